import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Testing

/// Live smoke tests of the shell: every loop must wake for each kind of deadline and report it. The decisions
/// (when the idle clock starts, what pauses it, how the deadlines are computed) are the state machine's and the
/// setup's, tested synchronously in TransferStateMachineTests and Transfer+ConfigureTests; the tests of those
/// run on one loop only.
@Suite("Timeouts")
struct CurlewClientTimeoutsTests {
    @Test(arguments: allLoops)
    func totalTimeoutFiresOnASlowResponse(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.timeouts.total = .milliseconds(400) }) { client in
            let url = "\(httpbin.baseURL)/delay/3"
            let (code, elapsed) = try await timedFailure(get: url, on: client)
            #expect(code == .timeout(.total))
            #expect(elapsed >= .milliseconds(390))
            #expect(elapsed < .milliseconds(2500))
        }
    }

    @Test(arguments: [CurlewClient.Configuration.EventLoopKind.thread])
    func subSecondTimeoutsAreNotTruncated(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop) { client in
            // 1.9 s must stay 1.9 s: a 1.2 s response fits, where truncation to whole seconds would fail it.
            var request = try CurlewRequest(url: "\(server.baseURL)/delay/1200")
            request.timeouts = .init(total: .milliseconds(1900))
            #expect(try await client.execute(request).status == .ok)
        }
    }

    @Test(arguments: allLoops)
    func idleTimeoutFiresWhenTheServerNeverAnswers(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop, configure: { $0.timeouts.idle = .milliseconds(300) }) { client in
            let url = "\(server.baseURL)/fault/never-answer"
            let (code, elapsed) = try await timedFailure(get: url, on: client)
            #expect(code == .timeout(.idle))
            #expect(elapsed >= .milliseconds(290))
            #expect(elapsed < .milliseconds(2000))
        }
    }

    @Test(arguments: [CurlewClient.Configuration.EventLoopKind.thread])
    func idleTimeoutDoesNotFireWhileBytesKeepMoving(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop, configure: { $0.timeouts.idle = .milliseconds(400) }) { client in
            // 8 chunks 150 ms apart: 1.2 s in all, never 400 ms without a byte.
            let request = try CurlewRequest(url: "\(server.baseURL)/fault/slow-body?chunks=8&interval_ms=150")
            let response = try await client.execute(request)
            #expect(response.body.count == 80)
        }
    }

    @Test(arguments: allLoops)
    func connectTimeoutFiresWhenTheHandshakeStalls(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let listener = try StalledListener()
        try await withClient(loop, configure: { $0.timeouts.connect = .milliseconds(300) }) { client in
            let url = "http://127.0.0.1:\(listener.port)/"
            let (code, elapsed) = try await timedFailure(get: url, on: client)
            #expect(code == .timeout(.connect))
            #expect(elapsed < .milliseconds(2000))
        }
        _ = listener
    }

    /// The connection stays busy for a minute (cancelled at the end): a 3 s request once ended during a stall of the
    /// test process on CI, and the queued request then got the connection and succeeded.
    @Test(arguments: allLoops)
    func totalClockIncludesWaitingForAFreeConnection(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        var queued = try CurlewRequest(url: "\(server.baseURL)/small")
        queued.timeouts = .init(total: .milliseconds(300))
        let (error, elapsed) = try await failureWhileTheOnlyConnectionIsBusy(to: server, loop: loop, running: queued)
        #expect(error?.code == .timeout(.total), "\(String(describing: error))")
        // Far below the minute the connection is busy for, far above any stall.
        #expect(elapsed >= .milliseconds(290) && elapsed < .seconds(30), "\(elapsed)")
        #expect(server.requestsServed == 1)
    }

    /// The connect timeout bounds getting a connection, the wait for a free one included, on every libcurl: 7.88
    /// restarts its own timer when the wait ends, 8.x counts the wait but looks only once a connection is free (here
    /// a minute later). The engine fails the waiting request on time, as waiting, and the server never sees it.
    @Test(arguments: allLoops)
    func aRequestWaitingForAFreeConnectionPastTheConnectTimeoutFailsAsWaiting(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        var waiting = try CurlewRequest(url: "\(server.baseURL)/small")
        waiting.timeouts = .init(connect: .milliseconds(300))
        let (error, elapsed) = try await failureWhileTheOnlyConnectionIsBusy(to: server, loop: loop, running: waiting)
        #expect(error?.code == .timeout(.waitingForConnection), "\(String(describing: error))")
        #expect(error?.detail.contains("maxConnectionsPerHost") == true)
        #expect(elapsed >= .milliseconds(290) && elapsed < .seconds(5))
        #expect(server.requestsServed == 1)
    }

    /// A redirect to a host whose one allowed connection is busy waits in libcurl's queue as a first request does:
    /// the connect timeout bounds that wait too, counted from the redirect (which comes after twice the timeout, so
    /// the count from submission is long over). Before, 7.88 waited until the connection was free (a minute here)
    /// and 8.x's socket-action and Dispatch loops looked only then.
    @Test(arguments: allLoops)
    func aRedirectWaitingForAFreeConnectionPastTheConnectTimeoutFailsAsWaiting(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let landing = try await LoopbackServer.start()
        defer { Task { try? await landing.shutdown() } }
        let origin = try await WireScriptServer.start { _ in
            [
                .wait(milliseconds: 600),
                .response(status: 302, headers: [("Location", "\(landing.baseURL)/small")], body: ""),
            ]
        }
        defer { Task { try? await origin.shutdown() } }
        var redirected = try CurlewRequest(url: "\(origin.baseURL)/moved")
        redirected.timeouts = .init(connect: .milliseconds(300))
        let (error, elapsed) = try await failureWhileTheOnlyConnectionIsBusy(
            to: landing, loop: loop, running: redirected)
        #expect(error?.code == .timeout(.waitingForConnection), "\(String(describing: error))")
        #expect(elapsed >= .milliseconds(890) && elapsed < .seconds(5), "\(elapsed)")
        #expect(origin.requests.count == 1, "the redirect was served")
        #expect(landing.requestsServed == 1, "the redirected request never reached the busy host")
    }

    @Test(arguments: [CurlewClient.Configuration.EventLoopKind.thread])
    func waitingForAFreeConnectionIsNotIdleness(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(
            loop,
            configure: {
                $0.loopCount = 1
                $0.maxConnectionsPerHost = 1
                $0.timeouts.idle = .milliseconds(300)
            }
        ) { client in
            // The first request keeps the only connection busy for 1.2 s, with bytes moving every 150 ms.
            async let busy = client.execute(
                try CurlewRequest(url: "\(server.baseURL)/fault/slow-body?chunks=8&interval_ms=150"))
            try await waitUntil(timeout: .seconds(30)) { server.requestsServed >= 1 }
            // The second waits four idle periods for that connection, then is served at once.
            let queued = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            #expect(queued.body.count == 100)
            #expect(try await busy.body.count == 80)
        }
    }

    @Test(arguments: [CurlewClient.Configuration.EventLoopKind.thread])
    func refusedConnectionIsReportedAsSuch(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let port = try FreePort.allocate()
        try await withClient(loop) { client in
            let code = await curlewErrorCode {
                _ = try await client.execute(try CurlewRequest(url: "http://127.0.0.1:\(port)/"))
            }
            #expect(code == .connectionRefused)
        }
    }
}

/// The error code a GET of `url` fails with on `client` (nil if it succeeds), and how long it took, timed as
/// ``measured(_:)`` times.
private func timedFailure(get url: String, on client: CurlewClient) async throws -> (CurlewError.Code?, Duration) {
    try await measured { await curlewErrorCode { _ = try await client.execute(try CurlewRequest(url: url)) } }
}

/// A client of one loop, allowed one connection per host: a request that holds it makes the next one wait.
private func oneLoopOneConnectionPerHost(_ configuration: inout CurlewClient.Configuration) {
    configuration.loopCount = 1
    configuration.maxConnectionsPerHost = 1
}

/// On a client of one `loop` allowed one connection per host, holds the connection to `busy` with a request the
/// server answers after a minute (cancelled at the end: under CI's load, 10 s once passed before the request under
/// test went out, and the connection was free again),
/// then runs `request`: how it failed (nil if it succeeded) and how long it took, timed as ``measured(_:)`` times.
private func failureWhileTheOnlyConnectionIsBusy(
    to busy: LoopbackServer, loop: CurlewClient.Configuration.EventLoopKind, running request: CurlewRequest
) async throws -> (CurlewError?, Duration) {
    try await withClient(
        loop,
        configure: oneLoopOneConnectionPerHost
    ) { client in
        let occupying = Task { try await client.execute(try CurlewRequest(url: "\(busy.baseURL)/delay/60000")) }
        defer { occupying.cancel() }
        try await waitUntil(timeout: .seconds(30)) { busy.requestsServed >= 1 }
        return try await measured {
            do {
                _ = try await client.execute(request)
                return nil as CurlewError?
            } catch {
                return error as? CurlewError
            }
        }
    }
}

/// Runs `operation` on a thread of its own and times it there, so the figure is the engine's and not the
/// cooperative pool's backlog while the rest of the suite runs.
private func measured<T: Sendable>(_ operation: @escaping @Sendable () async -> T) async throws -> (T, Duration) {
    try await onDedicatedThread {
        let clock = ContinuousClock()
        let start = clock.now
        let value = await operation()
        return (value, clock.now - start)
    }
}
