import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Testing

@Suite("Connection reuse and load")
struct CurlewClientConnectionsTests {
    @Test(arguments: allLoops)
    func aThousandSequentialRequestsUseOneConnection(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        // Default loop count (one per core): sequential requests must still stick to one loop's connection.
        try await withClient(loop) { client in
            let request = try CurlewRequest(url: "\(server.baseURL)/small")
            for _ in 0..<1000 {
                let response = try await client.execute(request)
                #expect(response.body.count == 100)
            }
        }
        #expect(server.requestsServed == 1000)
        #expect(server.acceptedConnections == 1)
    }

    @Test(arguments: allLoops)
    func twentyThousandRequestsWith256InFlightAllSucceed(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let total = 20_000
        let inFlight = 256
        let succeeded = try await withClient(loop) { client in
            let request = try CurlewRequest(url: "http://127.0.0.1:\(nginx.httpPort)/small")
            return try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<inFlight {
                    group.addTask {
                        var ok = 0
                        for _ in 0..<(total / inFlight + 1) {
                            let response = try await client.execute(request)
                            if response.status == .ok && response.body.count == 100 { ok += 1 }
                        }
                        return ok
                    }
                }
                return try await group.reduce(0, +)
            }
        }
        #expect(succeeded >= total)
        #expect(succeeded == (total / inFlight + 1) * inFlight)
    }

    @Test func tasksOnALoopExecutorRunOnTheLoopThreadAndStillComplete() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(.thread, configure: { $0.loopCount = 2 }) { client in
            #expect(client.executors.count == 2)
            let request = try CurlewRequest(url: "\(server.baseURL)/small")
            let count = try await withThrowingTaskGroup(of: Int.self) { group in
                for worker in 0..<8 {
                    group.addTask(executorPreference: client.executors[worker % 2]) {
                        var done = 0
                        for _ in 0..<200 {
                            _ = try await client.execute(request)
                            done += 1
                        }
                        return done
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(count == 1600)
        }
        #expect(server.requestsServed == 1600)
    }

    @Test func dispatchLoopHasNoExecutors() async throws {
        try await withClient(.dispatch) { client in
            #expect(client.executors.isEmpty)
        }
    }
}
