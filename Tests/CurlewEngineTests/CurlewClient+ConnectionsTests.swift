import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Glibc
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

    @Test(arguments: allLoops)
    func tasksOnALoopExecutorRunOnTheLoopAndStillComplete(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop, configure: { $0.loopCount = 2 }) { client in
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

    /// The Dispatch loop's executors are its serial queues: a task that prefers one runs there, between awaits too.
    @Test func tasksOnADispatchLoopExecutorRunOnTheLoopQueue() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(.dispatch, configure: { $0.loopCount = 2 }) { client in
            let request = try CurlewRequest(url: "\(server.baseURL)/small")
            let labels = try await Task(executorPreference: client.executors[1]) {
                let before = currentQueueLabel()
                _ = try await client.execute(request)
                return [before, currentQueueLabel()]
            }.value
            #expect(labels == ["curlew-dispatch-loop-1", "curlew-dispatch-loop-1"])
        }
        #expect(server.requestsServed == 1)
    }
}

/// The label of the Dispatch queue running the caller (`dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL)`,
/// which Swift's Dispatch does not export), empty on none.
private func currentQueueLabel() -> String {
    typealias GetLabel = @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    guard let symbol = dlsym(nil, "dispatch_queue_get_label") else { return "" }
    let label = unsafeBitCast(symbol, to: GetLabel.self)(nil)
    return label.map { String(cString: $0) } ?? ""
}
