import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Testing

/// Process-wide resource counts. Other tests open descriptors too, so `make test` runs this suite in a
/// process of its own (`swift test --filter FileDescriptorTests`), serialized.
@Suite("File descriptors", .serialized)
struct FileDescriptorTests {
    @Test(arguments: allLoops)
    func descriptorsReturnToTheirStartingCountAfterShutdown(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        // Warm up process-wide state (libdispatch's epoll, libcurl's globals) before counting.
        try await withClient(loop) { client in
            _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
        }
        let before = TestProcess.openFileDescriptorCount()
        try await withClient(loop) { client in
            let request = try CurlewRequest(url: "\(server.baseURL)/small")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<64 {
                    group.addTask { for _ in 0..<20 { _ = try await client.execute(request) } }
                }
                try await group.waitForAll()
            }
            #expect(TestProcess.openFileDescriptorCount() > before)
            // Faults and cancellations must not leak either.
            for fault in ["close-mid-body", "reset-after-headers", "empty-reply", "malformed"] {
                _ = try? await client.execute(try CurlewRequest(url: "\(server.baseURL)/fault/\(fault)"))
            }
            for _ in 0..<50 {
                let task = Task { try await client.execute(try CurlewRequest(url: "\(server.baseURL)/fault/never-answer")) }
                task.cancel()
                _ = try? await task.value
            }
        }
        // The in-process server closes its ends of the connections asynchronously after the client hangs up.
        try? await waitUntil(timeout: .seconds(5)) { TestProcess.openFileDescriptorCount() <= before }
        #expect(TestProcess.openFileDescriptorCount() == before)
    }
}
