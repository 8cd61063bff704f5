import CurlewEngine
import CurlewLoad
import CurlewSharding
import CurlewTestSupport
import Foundation
import Synchronization
import Testing

/// The library's public API as a service would use it (no `@testable`), against a real nginx whose access log
/// counts what arrived.
@Suite(.serialized) struct LoadTestTests {
    /// The request URIs nginx logged under `marker`, once it has logged at least `expected` (a line may follow its
    /// response). A line is `MSEC CONNECTION METHOD STATUS REQUEST-URI HOST LENGTH`.
    private func nginxURIs(_ nginx: NginxServer, marker: String, atLeast expected: Int) async throws -> [String] {
        var uris: [String] = []
        try await waitUntil(timeout: .seconds(10), "nginx to log \(expected) requests under \(marker)") {
            uris = nginx.hitsLog.lines(inGroupOf: marker).compactMap { line in
                let fields = line.split(separator: " ")
                return fields.count >= 5 && fields[4].hasPrefix(marker) ? String(fields[4]) : nil
            }
            return uris.count >= expected
        }
        return uris
    }

    @Test func aRateModeLoadSendsWhatNginxCountsAndEvaluatesItsThresholds() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        // 200 requests/s for 1.5 s: the schedule holds requests 0 … 299, whatever the server does.
        var plan = try LoadPlan(
            target: nginx.httpBaseURL + marker + "load", shape: .rate(perSecond: 200, for: .milliseconds(1_500)))
        plan.connections = 8
        plan.thresholds = [try LoadThreshold("p99<10s"), try LoadThreshold("errors<1%"), try LoadThreshold("rps>1e6")]
        plan.progressInterval = .milliseconds(100)
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        // Taken before the run starts, so no interval is missed.
        let progress = load.progress
        let seen = Task {
            var totals: [Int] = []
            for await interval in progress { totals.append(interval.totalRequests) }
            return totals
        }
        let summary = try await load.run()
        let totals = await seen.value
        await client.shutdown()

        #expect(plan.shape.isOpenModel)
        #expect(summary.requests == 300)
        #expect(summary.succeeded == 300)
        #expect(summary.statusCodes == [200: 300])
        #expect(!summary.stopped)
        #expect(try await nginxURIs(nginx, marker: marker, atLeast: summary.requests).count == summary.requests)
        // Percentiles come from the histogram: ordered, and within the slowest request.
        let p50 = try #require(summary.latency(percentile: 50))
        let p99 = try #require(summary.latency(percentile: 99))
        let fastest = try #require(summary.minLatency)
        let slowest = try #require(summary.maxLatency)
        #expect(fastest <= p50 && p50 <= p99 && p99 <= slowest)
        #expect(summary.thresholds.map(\.threshold) == ["p99<10s", "errors<1%", "rps>1e6"])
        #expect(summary.thresholds.map(\.passed) == [true, true, false])
        #expect(!summary.passed)
        // The progress sequence ended with the run, its running totals never went back, and its last interval
        // (however busy the machine kept the sampler) ends at the run's total.
        #expect(totals == totals.sorted())
        #expect(totals.last == summary.requests)
    }

    /// One connection at 100,000 requests/s cannot keep the schedule: a request is due every 10 µs and each takes
    /// longer, so every request after the connection's first is claimed after its time, while the connection was
    /// busy with the one before. Each is counted late (the first is not: nothing held it back), by no more than its
    /// latency, which still counts from the schedule; progress reports them as the run goes.
    @Test func anOpenModelRunShortOfConnectionsCountsTheRequestsItSentLate() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        var plan = try LoadPlan(
            target: nginx.httpBaseURL + marker + "late", shape: .rate(perSecond: 100_000, requests: 200))
        plan.connections = 1
        plan.thresholds = [try LoadThreshold("late<50%")]
        plan.progressInterval = .milliseconds(50)
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let progress = load.progress
        let lastTotal = Task {
            var total = 0
            for await interval in progress { total = interval.totalLateRequests }
            return total
        }
        let summary = try await load.run()
        await client.shutdown()

        #expect(summary.requests == 200 && summary.failed == 0)
        #expect(summary.lateRequests == summary.requests - 1)
        let lateness = try #require(summary.maxLateness)
        #expect(lateness > .zero && lateness <= (summary.maxLatency ?? .zero))
        #expect(await lastTotal.value == summary.lateRequests)
        #expect(summary.thresholds.map(\.passed) == [false])
        #expect(abs((summary.thresholds.first?.actual ?? 0) - Double(summary.lateRequests) / 2) < 1e-9)
    }

    /// With a connection for every request due in the next second, a request is claimed long before its time unless
    /// one takes a second: nothing is late.
    @Test func anOpenModelRunWithConnectionsToSpareSendsNothingLate() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        var plan = try LoadPlan(
            target: nginx.httpBaseURL + marker + "on-time", shape: .rate(perSecond: 20, requests: 40))
        plan.connections = 20
        plan.thresholds = [try LoadThreshold("late<=0%")]
        plan.progressInterval = nil
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let summary = try await load.run()
        await client.shutdown()

        #expect(summary.requests == 40 && summary.failed == 0)
        #expect(summary.lateRequests == 0)
        #expect(summary.maxLateness == nil)
        #expect(summary.passed)
    }

    /// A connection for every request, all due at once: a worker that started early and finished its first request
    /// may claim another while later workers have yet to start, but a connection was free for it, so it is not
    /// late. (Once every worker has claimed one, no request is left to be late.)
    @Test func aRequestClaimedWhileAConnectionHasYetToStartIsNotLate() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        var plan = try LoadPlan(
            target: nginx.httpBaseURL + marker + "start-up", shape: .rate(perSecond: 1_000_000, requests: 1_000))
        plan.connections = 1_000
        plan.progressInterval = nil
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let summary = try await load.run()
        await client.shutdown()

        #expect(summary.requests == 1_000 && summary.failed == 0)
        #expect(summary.lateRequests == 0)
    }

    /// A threshold on late requests needs a schedule to be late for: a closed-model plan refuses it before sending.
    @Test func aLateThresholdWithoutARateIsRefused() async throws {
        let client = CurlewClient()
        var plan = try LoadPlan(target: "http://127.0.0.1:9/", shape: .requests(10))
        plan.thresholds = [try LoadThreshold("late<1%")]
        #expect {
            try LoadTest(plan, client: client)
        } throws: { error in
            "\(error)".contains("\"late<1%\": late counts requests sent after their scheduled time")
        }
        plan.shape = .rate(perSecond: 10, requests: 10)
        _ = try LoadTest(plan, client: client)
        await client.shutdown()
    }

    /// A shard's share of the connections and requests follows one rule, the command's and the library's: at most
    /// `maximumConnections` in one process, and at least one of each.
    @Test func aShardsShareOfTheRunIsCheckedByOneRule() async throws {
        let quarter = ShardAssignment(index: 3, count: 4)
        #expect(LoadPlan.connectionShareError(connections: 4, shard: quarter) == nil)
        #expect(
            LoadPlan.connectionShareError(connections: 3, shard: quarter)
                == .noConnections(connections: 3, shards: 4))
        #expect(
            LoadPlan.connectionShareError(connections: LoadPlan.maximumConnections + 1, shard: .whole)
                == .tooManyConnections(share: LoadPlan.maximumConnections + 1))
        #expect(LoadPlan.connectionShareError(connections: 4 * LoadPlan.maximumConnections, shard: quarter) == nil)
        #expect(LoadPlan.requestShareError(requests: 2, shard: quarter) == .noRequests(requests: 2, shards: 4))
        #expect(LoadPlan.requestShareError(requests: 4, shard: quarter) == nil)
        let client = CurlewClient()
        var plan = try LoadPlan(target: "http://127.0.0.1:9/", shape: .requests(2))
        plan.connections = 4
        plan.shard = quarter
        #expect {
            try LoadTest(plan, client: client)
        } throws: { error in
            "\(error)" == LoadShareError.noRequests(requests: 2, shards: 4).description
        }
        await client.shutdown()
    }

    @Test func aStoppedLoadCountsEveryRequestItSent() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        var plan = try LoadPlan(target: nginx.httpBaseURL + marker + "stop", shape: .duration(.seconds(60)))
        plan.connections = 4
        plan.thresholds = [try LoadThreshold("errors<1%")]
        plan.progressInterval = .milliseconds(50)
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let progress = load.progress
        // Stop as soon as requests are flowing: the run must then end long before its 60 s.
        let stopper = Task {
            for await interval in progress where interval.totalRequests > 0 {
                load.stop()
                return true
            }
            return false
        }
        let summary = try await load.run()
        await client.shutdown()

        #expect(await stopper.value)
        #expect(summary.stopped)
        #expect(summary.duration < .seconds(30))
        #expect(summary.requests > 0)
        #expect(summary.failed == 0)
        #expect(summary.passed)
        #expect(try await nginxURIs(nginx, marker: marker, atLeast: summary.requests).count == summary.requests)
    }

    /// Moved in-process from the command's tests: the order is the library's.
    @Test func aSeededRandomOrderIsReproducibleAndCountedPerTarget() async throws {
        let nginx = try await NginxServer.shared()
        let names = ["a", "b", "c", "d"]
        var perRun: [[Int]] = []
        for _ in 0..<2 {
            let marker = "/hits/" + UUID().uuidString + "/"
            var plan = LoadPlan(
                requests: try names.map { try CurlewRequest(url: nginx.httpBaseURL + marker + $0) },
                shape: .requests(400))
            plan.order = .random(seed: 7)
            plan.connections = 4
            plan.progressInterval = nil
            let client = CurlewClient(configuration: plan.clientConfiguration())
            let summary = try await LoadTest(plan, client: client).run()
            await client.shutdown()
            let uris = try await nginxURIs(nginx, marker: marker, atLeast: 400)
            let served = names.map { name in uris.filter { $0 == marker + name }.count }
            #expect(served == summary.requestsPerTarget)
            #expect(served.reduce(0, +) == 400)
            // Random, not round-robin: the counts are uneven.
            #expect(served != [100, 100, 100, 100])
            perRun.append(served)
        }
        #expect(perRun[0] == perRun[1])
    }

    @Test func aRefusedTargetsErrorNamesItWithoutItsPasswordOrKeys() {
        do {
            _ = try LoadPlan(target: "ftp://user:hunter2@127.0.0.1/f?api_key=k1&page=2", shape: .requests(1))
            Issue.record("an ftp target should be refused")
        } catch {
            #expect(error.description.contains("ftp://user:<redacted>@127.0.0.1/f?api_key=<redacted>&page=2"))
            #expect(!error.description.contains("hunter2") && !error.description.contains("k1"))
        }
        // A password with a raw `/` hides the user-info from every parser: the URL is not named at all.
        do {
            _ = try LoadPlan(target: "https://user:hun/ter2@127.0.0.1/f", shape: .requests(1))
            Issue.record("a URL that does not parse should be refused")
        } catch {
            #expect(error.description.contains("a URL that does not parse"), "\(error)")
            #expect(!error.description.contains("ter2"), "\(error)")
        }
    }

    /// Stops `load` after `limit` unless the run ended first: a test of a run that must end cannot hang.
    private func stopping(_ load: LoadTest, after limit: Duration) -> Task<Void, Never> {
        Task {
            try? await Task.sleep(for: limit)
            load.stop()
        }
    }

    /// At 1e-11 requests/s request 1 is due in 3,000 years: its due time in nanoseconds passed `UInt64.max` and
    /// trapped as the second connection claimed it. A rate that slow is still a rate (request 0 goes out at once,
    /// the rest after the run), so the run sends one request and ends with its second.
    @Test func aRateTooSlowForASecondRequestSendsOneAndEnds() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        var plan = try LoadPlan(
            target: nginx.httpBaseURL + marker + "slow", shape: .rate(perSecond: 1e-11, for: .seconds(1)))
        plan.connections = 2
        plan.progressInterval = nil
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let watchdog = stopping(load, after: .seconds(30))
        let summary = try await load.run()
        watchdog.cancel()
        await client.shutdown()

        #expect(!summary.stopped)
        #expect(summary.requests == 1)
        #expect(summary.succeeded == 1)
        #expect(summary.duration < .seconds(10))
    }

    /// A plan's duration may be any `Duration`: `.seconds(.max)` overflowed its conversion to nanoseconds (a trap as
    /// each connection started). It is a run that goes on until stopped.
    @Test func aRunOfTheLongestDurationGoesOnUntilStopped() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        var plan = try LoadPlan(target: nginx.httpBaseURL + marker + "long", shape: .duration(.seconds(Int64.max)))
        plan.connections = 2
        plan.progressInterval = nil
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let stopper = stopping(load, after: .milliseconds(300))
        let summary = try await load.run()
        await stopper.value
        await client.shutdown()

        #expect(summary.stopped)
        #expect(summary.requests > 0)
        #expect(summary.failed == 0)
    }

    /// A threshold on a check the plan does not have could only fail, for want of data, after the whole load: the
    /// plan is refused before anything is sent.
    @Test func aThresholdOnACheckThePlanLacksIsRefused() async throws {
        let client = CurlewClient()
        var plan = try LoadPlan(target: "http://127.0.0.1:9/", shape: .requests(10))
        plan.thresholds = [try LoadThreshold("checks>99%")]
        #expect {
            try LoadTest(plan, client: client)
        } throws: { error in
            "\(error)".contains("\"checks>99%\": there is no check to measure")
        }
        plan.checks = [try LoadCheck("status in 200")]
        plan.thresholds = [try LoadThreshold("checks>99%"), try LoadThreshold("check1>99%")]
        _ = try LoadTest(plan, client: client)
        plan.thresholds.append(try LoadThreshold("check2>99%"))
        #expect {
            try LoadTest(plan, client: client)
        } throws: { error in
            "\(error)".contains("\"check2>99%\": there is no check 2 (1 given)")
        }
        await client.shutdown()
    }

    @Test func plansThatAskForNothingAndSecondRunsAreRefused() async throws {
        let client = CurlewClient()
        var plan = try LoadPlan(target: "http://127.0.0.1:9/", shape: .requests(10))
        plan.connections = 0
        #expect(throws: LoadTestError.self) { try LoadTest(plan, client: client) }
        // Past the most a load test opens: a pool and a loop share sized from Int.max overflowed.
        plan.connections = .max
        #expect(throws: LoadTestError.self) { try LoadTest(plan, client: client) }
        plan.connections = LoadPlan.maximumConnections + 1
        #expect(throws: LoadTestError.self) { try LoadTest(plan, client: client) }
        // A shard of a larger run opens its share: 200,000 over 4 shards is 50,000 each.
        plan.connections = 2 * LoadPlan.maximumConnections
        plan.shard = ShardAssignment(index: 1, count: 4)
        #expect(throws: Never.self) { try LoadTest(plan, client: client) }
        plan.shard = .whole
        // A shard whose share of the requests is none: it would send nothing and fail its thresholds.
        plan.connections = 4
        plan.shape = .requests(2)
        plan.shard = ShardAssignment(index: 3, count: 4)
        #expect(throws: LoadTestError.self) { try LoadTest(plan, client: client) }
        plan.shard = ShardAssignment(index: 1, count: 4)
        #expect(throws: Never.self) { try LoadTest(plan, client: client) }
        plan.shard = .whole
        plan.connections = 1
        plan.requests = []
        #expect(throws: LoadTestError.self) { try LoadTest(plan, client: client) }
        #expect(throws: LoadTestError.self) { try LoadPlan(target: "ftp://127.0.0.1/", shape: .requests(1)) }
        #expect(throws: LoadThreshold.ParseError.self) { try LoadThreshold("p99<fast") }
        #expect(throws: LoadShape.ParseError.self) { try LoadShape(stages: "10s:100rps,10s:16c") }
        #expect(try !LoadShape(stages: "10s:16c").isOpenModel)

        // Port 9 (discard) refuses: every request fails, and the second run is refused outright.
        let refused = try LoadTest(try LoadPlan(target: "http://127.0.0.1:9/", shape: .requests(3)), client: client)
        let summary = try await refused.run()
        #expect(summary.requests == 3)
        #expect(summary.failed == 3)
        #expect(summary.latency(percentile: 50) != nil)
        await #expect(throws: LoadTestError.self) { try await refused.run() }
        await client.shutdown()
    }
}
