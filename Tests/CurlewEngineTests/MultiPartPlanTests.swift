import Testing

@testable import CurlewEngine

/// How the socket-action driver spreads HTTP/1 transfers over multi handles, and the limits of each: no socket.
@Suite("Multi-handle parts")
struct MultiPartPlanTests {
    private func plan(
        loops: Int = 1, perHost: Int? = nil, total: Int? = nil, cached: Int = 256, spreads: Bool = true
    ) -> MultiPartPlan {
        var configuration = CurlewClient.Configuration()
        configuration.maxConnectionsPerHost = perHost
        configuration.maxConnectionsTotal = total
        configuration.maxCachedConnectionsPerLoop = cached
        return MultiPartPlan(
            settings: ClientSettings(configuration: configuration), loopCount: loops, spreadsTransfers: spreads)
    }

    private let part = MultiPartPlan.transfersPerPart

    @Test func limitsNoLargerThanOnePartKeepOneMultiHandleWithTheLoopsWholeShare() {
        // The default 256 per host over four loops: 64 each, one part, as before parts existed.
        let plan = plan(loops: 4, perHost: 256)
        #expect(plan.partCount == 1)
        #expect(
            plan.limits(ofPart: 0)
                == MultiLimits(
                    hostConnections: 64, totalConnections: 0, cachedConnections: 256, concurrentStreams: 1000))
        #expect(plan.choosePart(http1Only: true, openParts: 1, inFlight: { _ in 500 }) == .part(0))
    }

    @Test func thePollAndDispatchDriversNeverSpread() {
        let plan = plan(perHost: nil, spreads: false)
        #expect(plan.partCount == 1)
        #expect(plan.limits(ofPart: 0).hostConnections == 0)
        #expect(plan.choosePart(http1Only: true, openParts: 1, inFlight: { _ in 10_000 }) == .part(0))
    }

    @Test func theTighterLimitSetsThePartsAndTheirSlicesAddUpToTheLoopsShare() {
        // 1,000 per host and 300 in total over two loops: 150 per loop bounds the connections, so three parts.
        let plan = plan(loops: 2, perHost: 1_000, total: 300)
        #expect(plan.partCount == 3)
        let limits = (0..<plan.partCount).map { plan.limits(ofPart: $0) }
        #expect(limits.map(\.totalConnections) == [part, part, 150 - 2 * part])
        #expect(limits.map(\.totalConnections).reduce(0, +) == 150)
        #expect(limits.map(\.hostConnections) == [part, part, part])
        // Each part caches as many connections as it runs transfers (libcurl 7.88 counts busy ones too).
        #expect(limits.allSatisfy { $0.cachedConnections >= part })
    }

    @Test func withoutLimitsALoopOpensUpToTheMaximumParts() {
        let plan = plan(perHost: nil)
        #expect(plan.partCount == MultiPartPlan.maximumParts)
        #expect(plan.limits(ofPart: 5).hostConnections == 0)
        #expect(plan.limits(ofPart: 5).totalConnections == 0)
    }

    @Test func partsFillInOrderAndAFreedPlaceIsTakenFirst() {
        let plan = plan(perHost: 4_000)
        // Part 1 just finished a transfer: the next one takes its place (and its idle connection), not part 2.
        var inFlight = [part, part - 1, part - 5]
        #expect(plan.choosePart(http1Only: true, openParts: 3, inFlight: { inFlight[$0] }) == .part(1))
        inFlight = [part, part, part]
        #expect(plan.choosePart(http1Only: true, openParts: 3, inFlight: { inFlight[$0] }) == .openPart)
        inFlight = [part - 1, 0, 0]
        #expect(plan.choosePart(http1Only: true, openParts: 3, inFlight: { inFlight[$0] }) == .part(0))
    }

    @Test func whenEveryPartIsFullAndNoMoreMayOpenTheLeastLoadedTakesIt() {
        let plan = plan(perHost: 2 * part)
        #expect(plan.partCount == 2)
        let inFlight = [part + 9, part + 3]
        #expect(plan.choosePart(http1Only: true, openParts: 2, inFlight: { inFlight[$0] }) == .part(1))
    }

    @Test func theLastPartTakesNoMoreTransfersThanItsSliceOfConnections() {
        // 65 per host: part 1 has one connection, so it takes one transfer; the rest go to the least loaded part.
        let plan = plan(perHost: part + 1)
        #expect(plan.partCount == 2)
        #expect(plan.capacity(ofPart: 0) == part)
        #expect(plan.capacity(ofPart: 1) == 1)
        #expect(plan.choosePart(http1Only: true, openParts: 2, inFlight: { [part, 0][$0] }) == .part(1))
        #expect(plan.choosePart(http1Only: true, openParts: 2, inFlight: { [part - 3, 1][$0] }) == .part(0))
        #expect(plan.choosePart(http1Only: true, openParts: 2, inFlight: { [part + 2, 1][$0] }) == .part(1))
    }

    @Test func aTransferThatMayMultiplexStaysInPartZero() {
        let plan = plan(perHost: nil)
        #expect(plan.choosePart(http1Only: false, openParts: 3, inFlight: { _ in 10 * part }) == .part(0))
    }
}
