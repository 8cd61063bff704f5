import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Testing

/// Servers that misbehave on the wire, from the in-process SwiftNIO server: every fault is a typed error,
/// never a crash, a hang or a silently short body.
@Suite("Faulty servers")
struct CurlewClientFaultsTests {
    @Test(arguments: allLoops)
    func everyFaultIsATypedError(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        let faults: [(String, CurlewError.Code)] = [
            ("close-mid-body", .connectionClosed),
            ("short-content-length", .connectionClosed),
            ("reset-after-headers", .connectionClosed),
            ("chunked-truncated", .connectionClosed),
            ("empty-reply", .connectionClosed),
            ("malformed", .invalidResponse),
        ]
        // A short idle timeout, so a fault the client fails to notice fails the test quickly, by name.
        try await withClient(loop, configure: { $0.timeouts.idle = .seconds(10) }) { client in
            for (fault, expected) in faults {
                let error = await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/fault/\(fault)"))
                }
                let curlewError = try #require(error as? CurlewError, "\(fault): \(String(describing: error))")
                #expect(
                    curlewError.code == expected,
                    "\(fault): \(curlewError); server accepted \(server.acceptedConnections), read \(server.requestsServed)"
                )
                #expect(curlewError.curlCode != nil, "\(fault)")
            }
            // The client is still healthy afterwards.
            let response = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            #expect(response.body.count == 100)
        }
    }

    @Test(arguments: allLoops)
    func aThousandCancellationsInARowEachThrowCancellationError(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop) { client in
            let request = try CurlewRequest(url: "\(server.baseURL)/fault/never-answer")
            var cancelled = 0
            for round in 0..<1000 {
                let task = Task { try await client.execute(request) }
                if round % 2 == 0 {
                    // Half of them after the transfer reached the server, half at once (racing the submission).
                    try await waitUntil(timeout: .seconds(30)) { server.requestsServed > round / 2 }
                }
                task.cancel()
                do {
                    _ = try await task.value
                    Issue.record("round \(round) succeeded")
                } catch is CancellationError {
                    cancelled += 1
                } catch {
                    Issue.record("round \(round): \(error)")
                }
            }
            #expect(cancelled == 1000)
            let response = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            #expect(response.status == .ok)
        }
    }

    @Test(arguments: allLoops)
    func completionAndCancellationRacingResolveExactlyOnce(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop) { client in
            let request = try CurlewRequest(url: "\(server.baseURL)/small")
            var outcomes = (succeeded: 0, cancelled: 0)
            for _ in 0..<500 {
                let task = Task { try await client.execute(request) }
                await Task.yield()
                task.cancel()
                do {
                    let response = try await task.value
                    #expect(response.body.count == 100)
                    outcomes.succeeded += 1
                } catch is CancellationError {
                    outcomes.cancelled += 1
                }
            }
            // Each one resolved exactly once, one way or the other: debug builds use checked continuations, which trap
            // on a second resume and report a missing one. Both outcomes must have happened for the race to count.
            #expect(outcomes.succeeded + outcomes.cancelled == 500)
            #expect(outcomes.cancelled > 0)
        }
    }

    @Test(arguments: allLoops)
    func requestsAfterShutdownFailWithClientShutdown(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        var configuration = CurlewClient.Configuration()
        configuration.eventLoop = loop
        let client = CurlewClient(configuration: configuration)
        let stuck = Task { try await client.execute(try CurlewRequest(url: "\(server.baseURL)/fault/never-answer")) }
        try await waitUntil(timeout: .seconds(30)) { server.requestsServed >= 1 }
        await client.shutdown()
        let stuckCode = await curlewErrorCode { _ = try await stuck.value }
        #expect(stuckCode == .cancelled)
        let laterCode = await curlewErrorCode {
            _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
        }
        #expect(laterCode == .clientShutdown)
        await client.shutdown()  // a second shutdown is harmless
    }

    @Test(arguments: allLoops)
    func aFailedTransferSaysHowFarItGot(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let broken =
                    await caughtError {
                        _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/fault/close-mid-body"))
                    } as? CurlewError
                let metrics = try #require(broken?.metrics)
                #expect(!metrics.reusedConnection)
                #expect(metrics.bytesReceived > 0)
                #expect(metrics.localPort > 0)

                var slow = try CurlewRequest(url: "\(server.baseURL)/fault/never-answer")
                slow.timeouts = .init(total: .milliseconds(200))
                let timedOut = await caughtError { _ = try await client.execute(slow) } as? CurlewError
                #expect(timedOut?.code == .timeout(.total))
                #expect(timedOut?.metrics?.connected ?? .zero > .zero)
            }
        }
        let invalid = await caughtError {
            _ = try await CurlewClient.shared.execute(try CurlewRequest(url: "file:///etc/passwd"))
        }
        #expect((invalid as? CurlewError)?.metrics == nil)
    }
}
