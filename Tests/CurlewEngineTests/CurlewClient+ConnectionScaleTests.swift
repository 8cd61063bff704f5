import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Testing

/// A thousand connections and more (issue 11). Thousands of transfers through a debug build load both cores for
/// seconds, so these run in a process of their own (`make test`), not beside the main run's timing-sensitive tests
/// or the descriptor suite's process-wide counts.
@Suite("Connections at scale")
struct ConnectionScaleTests {
    /// 1,000 HTTP/1 transfers in flight on one loop (the socket-action driver spreads them over 16 multi handles,
    /// `MultiPartPlan`): the second round goes out on the first round's connections, in whichever part holds them,
    /// so the server accepts no more connections than transfers in flight.
    @Test(arguments: allLoops)
    func aThousandTransfersInFlightReuseTheirConnectionsInTheNextRound(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let inFlight = 1_000
        try await withLoopbackServer(threads: 2) { server in
            // The first round is held 300 ms by the server, so its transfers overlap and each opens a connection.
            let held = try CurlewRequest(url: "\(server.baseURL)/delay/300")
            let small = try CurlewRequest(url: "\(server.baseURL)/small")
            let succeeded = try await withClient(
                loop,
                configure: { configuration in
                    configuration.loopCount = 1
                    configuration.maxConnectionsPerHost = inFlight
                    configuration.maxCachedConnectionsPerLoop = inFlight
                    configuration.timeouts.total = .seconds(60)
                }
            ) { client in
                try await okResponses(client, workers: inFlight, each: [held, small, small])
            }
            #expect(succeeded == 3 * inFlight)
            #expect(server.requestsServed == 3 * inFlight)
            // No connection beyond the first round's (a few of which may have served two of its transfers, if one
            // ended before the last started on a loaded machine); a part that lost its idle connections would open
            // hundreds more.
            #expect(server.acceptedConnections <= inFlight)
            #expect(server.acceptedConnections >= inFlight * 9 / 10)
        }
    }

}
