import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewEngine

/// `CurlewClient.poolStatistics()`: the pool as the server sees it. Connections opened are the connections the server
/// accepted; busy and waiting are read while the server holds responses; closes are the ones the server asked for.
@Suite("Pool statistics")
struct PoolStatisticsTests {
    @Test(arguments: allLoops)
    func busyIdleWaitingAndOpenedMatchWhatTheServerHolds(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ request in
            if request.target.hasPrefix("/held/") {
                return [.mark("arrived \(request.target)"), .waitForRelease("answer"), .response(body: "held")]
            }
            // Answers and asks for its connection to be closed.
            return [.response(headers: [("Connection", "close")], body: "closing"), .close]
        }) { server in
            try await withClient(
                loop,
                configure: {
                    $0.loopCount = 1
                    $0.maxConnectionsPerHost = 2
                    $0.httpVersion = .http1_1
                    // Two requests wait for a connection until the server lets go, however slow a loaded machine
                    // makes that: the connect timeout counts the wait.
                    $0.timeouts.connect = .seconds(300)
                }
            ) { client in
                let origin = "http://127.0.0.1:\(server.port)"
                let empty = await client.poolStatistics()
                #expect(empty.byOrigin.isEmpty && empty.total == PoolStatistics.Counts())

                // Four requests, two connections allowed: two are on the server's held connections, two wait.
                let requests = try (0..<4).map { try CurlewRequest(url: "\(origin)/held/\($0)") }
                async let responses = withThrowingTaskGroup(of: Int.self) { group in
                    for request in requests { group.addTask { try await client.execute(request).status.code } }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                try await waitUntil(timeout: .seconds(20), "the server holds two requests") {
                    server.requests.count == 2
                }
                let held = await client.poolStatistics()
                let during = try #require(held.byOrigin[origin])
                #expect(held.byOrigin.count == 1)
                #expect(during.transfersInFlight == 4)
                #expect(during.connectionsBusy == 2)
                #expect(during.transfersWaitingForConnection == 2)
                #expect(during.connectionsOpen == 2 && during.connectionsIdle == 0)
                #expect(during.connectionsOpened == server.connectionCount)
                #expect(held.total == during)

                server.release("answer")
                #expect(try await responses == [200, 200, 200, 200])
                #expect(server.requests.count == 4)
                let after = try #require(await client.poolStatistics().byOrigin[origin])
                #expect(after.transfersInFlight == 0 && after.transfersWaitingForConnection == 0)
                #expect(after.connectionsBusy == 0)
                #expect(after.connectionsOpen == 2 && after.connectionsIdle == 2, "both connections pooled: \(after)")
                #expect(after.connectionsOpened == 2 && server.connectionCount == 2)
                #expect(after.connectionsClosed == 0 && after.retriesOnFreshConnection == 0)

                // A response that closes its connection: libcurl closes its end, and the snapshot counts it.
                let closing = try await client.execute(try CurlewRequest(url: "\(origin)/close"))
                #expect(closing.status.code == 200)
                let closed = try #require(await client.poolStatistics().byOrigin[origin])
                #expect(closed.connectionsClosed == 1, "\(closed)")
                #expect(closed.connectionsOpen == 1 && closed.connectionsOpened == server.connectionCount)
            }
        }
    }

    @Test(arguments: allLoops)
    func originsAreCountedApart(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ _ in [.response(body: "one")] }) { first in
            try await withWireScriptServer(host: "127.0.0.2", { _ in [.response(body: "two")] }) { second in
                try await withClient(loop, configure: { $0.httpVersion = .http1_1 }) { client in
                    for _ in 0..<3 { _ = try await client.execute(try CurlewRequest(url: first.baseURL + "/a")) }
                    _ = try await client.execute(try CurlewRequest(url: second.baseURL + "/b"))
                    let statistics = await client.poolStatistics()
                    let one = try #require(statistics.byOrigin["http://127.0.0.1:\(first.port)"])
                    let two = try #require(statistics.byOrigin["http://127.0.0.2:\(second.port)"])
                    #expect(statistics.byOrigin.count == 2)
                    #expect(one.connectionsOpened == first.connectionCount)
                    #expect(two.connectionsOpened == second.connectionCount)
                    #expect(statistics.total.connectionsOpened == first.connectionCount + second.connectionCount)
                    #expect(statistics.total.transfersInFlight == 0)
                }
            }
        }
    }
}
