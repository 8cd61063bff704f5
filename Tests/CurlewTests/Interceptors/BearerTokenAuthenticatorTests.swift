import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import HTTPTypes
import Synchronization
import Testing

@Suite struct BearerTokenAuthenticatorTests {
    @Test func fiftyConcurrent401sRefreshTheTokenExactlyOnce() async throws {
        let refreshes = Atomic(0)
        try await withScriptedServer({ request in
            request.header("Authorization") == "Bearer fresh" ? .json(#"{"ok":true}"#) : ScriptedResponse(status: 401)
        }) { server in
            let authenticator = BearerTokenAuthenticator(token: "stale") { expired in
                #expect(expired == "stale")
                refreshes.add(1, ordering: .relaxed)
                // Keeps the refresh in flight while the other 401s arrive.
                try await Task.sleep(for: .milliseconds(100))
                return "fresh"
            }
            var configured = TestProvider(baseURL: server.baseURL)
            configured.interceptors = [authenticator]
            let provider = configured
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<50 {
                    group.addTask { try await provider.request(Route(path: "/private/\(index)")).status.code }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 50))
            #expect(refreshes.load(ordering: .relaxed) == 1)
            #expect(authenticator.token == "fresh")
            #expect(server.requestCount <= 100)
        }
    }

    /// Suspends callers of ``wait()`` until ``arrive()`` has been called `target` times.
    private final class Barrier: Sendable {
        private let state = Mutex<(count: Int, waiters: [CheckedContinuation<Void, Never>])>((0, []))
        private let target: Int

        init(_ target: Int) { self.target = target }

        func arrive() {
            let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.count += 1
                guard state.count >= target else { return [] }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in ready { waiter.resume() }
        }

        func wait() async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    if state.count >= target { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Counts 401s before the authenticator sees them (the provider's response side runs its list backwards).
    private struct Counting401s: Interceptor {
        let barrier: Barrier
        func intercept(_ response: RouteResponse, context: InterceptorContext) async throws -> InterceptorDecision {
            if response.status == .unauthorized { barrier.arrive() }
            return .pass
        }
    }

    @Test func fiftyCallsHoldingA401AtOnceShareOneRefresh() async throws {
        let count = 50
        // Every stale request is answered only once all 50 have been sent, and the refresh ends only once all
        // 50 401s have reached the authenticator: the other 49 meet a refresh in flight, every time.
        let sent = Barrier(count)
        let received = Barrier(count)
        let refreshes = Atomic(0)
        let mock = MockTransport(stubs: [
            Stub(
                matching: { _ in true },
                respond: { request, _ in
                    if request.headerFields[.authorization] == "Bearer fresh" { return .json(["ok": true]) }
                    sent.arrive()
                    await sent.wait()
                    return StubResponse(status: .unauthorized)
                })
        ])
        let authenticator = BearerTokenAuthenticator(token: "stale") { expired in
            #expect(expired == "stale")
            refreshes.add(1, ordering: .relaxed)
            await received.wait()
            return "fresh"
        }
        var configured = TestProvider(baseURL: "https://api.example.com", transport: mock)
        configured.interceptors = [authenticator, Counting401s(barrier: received)]
        let provider = configured
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                group.addTask { try await provider.request(Route(path: "/private/\(index)")).status.code }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: count))
        #expect(refreshes.load(ordering: .relaxed) == 1)
        #expect(mock.receivedRequests.count == 2 * count)
    }

    /// A refresh that hangs (a slow identity provider, a prompt nobody answers) must not hold calls their callers
    /// gave up on: the call whose 401 started it and a call waiting in `adapt` both end as cancelled at once, and the
    /// refresh goes on for the calls still waiting. Before, both waited for the refresh to return.
    @Test func callsCancelledDuringARefreshEndAtOnceAndTheRefreshGoesOnForTheOthers() async throws {
        let refreshStarted = Barrier(1)
        let releaseRefresh = Barrier(1)
        let mock = MockTransport(stubs: [
            Stub(
                matching: { _ in true },
                respond: { request, _ in
                    request.headerFields[.authorization] == "Bearer fresh"
                        ? .json(["ok": true]) : StubResponse(status: .unauthorized)
                })
        ])
        let authenticator = BearerTokenAuthenticator(token: "stale") { _ in
            refreshStarted.arrive()
            await releaseRefresh.wait()
            return "fresh"
        }
        var configured = TestProvider(baseURL: "https://api.example.com", transport: mock)
        configured.interceptors = [authenticator]
        let provider = configured
        let startedTheRefresh = Task { try await provider.request(Route(path: "/first")) }
        await refreshStarted.wait()
        let waitingInAdapt = Task { try await provider.request(Route(path: "/second")) }
        let staysWaiting = Task { try await provider.request(Route(path: "/third")) }
        startedTheRefresh.cancel()
        waitingInAdapt.cancel()
        for call in [startedTheRefresh, waitingInAdapt] {
            let error = await #expect(throws: ProviderError.self) {
                try await withTimeout(.seconds(30)) { try await call.value }
            }
            #expect(error?.code == .cancelled)
        }
        // Only the first call's stale request went out: the cancelled one in adapt never sent a request.
        #expect(mock.receivedRequests.count == 1)
        releaseRefresh.arrive()
        #expect(try await withTimeout(.seconds(30)) { try await staysWaiting.value }.status == .ok)
        #expect(authenticator.token == "fresh")
    }

    private struct RefreshFailed: Error {}

    /// A refresh that fails with `CancellationError` of its own (a timeout built on a task group) is a failed
    /// refresh: the 401 reaches the caller, whose call was not cancelled.
    @Test func aRefreshThatThrowsCancellationIsAFailedRefreshNotACancelledCall() async throws {
        let mock = MockTransport(stubs: [
            Stub(matching: { _ in true }, respond: { _, _ in StubResponse(status: .unauthorized) })
        ])
        var provider = TestProvider(baseURL: "https://api.example.com", transport: mock)
        provider.interceptors = [BearerTokenAuthenticator(token: "stale") { _ in throw CancellationError() }]
        let error = await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/private")) }
        #expect(error?.code == .status)
        #expect(error?.status == .unauthorized)
        #expect(mock.receivedRequests.count == 1)
    }

    /// A 401 at the end of redirects that left the origin and came back is no verdict on the token: the engine sent
    /// the last request without it. Another origin must not be able to make the client rotate its token. Within the
    /// origin, a 401 after a redirect refreshes as ever. `localhost` and `127.0.0.1` are two origins on one server.
    @Test func a401AfterARedirectOutAndBackRefreshesNothing() async throws {
        let refreshes = Atomic(0)
        try await withScriptedServer({ request in
            let port = request.header("Host")?.split(separator: ":").last.map(String.init) ?? ""
            switch request.path {
            case "/out": return ScriptedResponse(status: 302, headers: [("Location", "http://localhost:\(port)/back")])
            case "/back", "/within":
                return ScriptedResponse(status: 302, headers: [("Location", "http://127.0.0.1:\(port)/protected")])
            default:
                return request.header("Authorization") == "Bearer t1"
                    ? .json(#"{"ok":true}"#) : ScriptedResponse(status: 401)
            }
        }) { server in
            var provider = TestProvider(baseURL: server.baseURL)
            provider.interceptors = [
                BearerTokenAuthenticator(token: "t0") { _ in
                    refreshes.add(1, ordering: .relaxed)
                    return "t1"
                }
            ]
            let error = await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/out")) }
            #expect(error?.status == .unauthorized)
            #expect(refreshes.load(ordering: .relaxed) == 0)
            #expect(server.requestCount == 3, "/out, /back, /protected: no second attempt")
            // The control: within the origin, the 401 is the token's.
            let within = try await provider.request(Route(path: "/within"))
            #expect(within.status == .ok)
            #expect(refreshes.load(ordering: .relaxed) == 1)
        }
    }

    @Test func aFailedRefreshLetsThe401ReachTheCaller() async throws {
        try await withScriptedServer({ _ in ScriptedResponse(status: 401) }) { server in
            var provider = TestProvider(baseURL: server.baseURL)
            provider.interceptors = [BearerTokenAuthenticator(token: "stale") { _ in throw RefreshFailed() }]
            await #expect {
                try await provider.request(Route(path: "/private"))
            } throws: { error in
                (error as? ProviderError)?.status == .unauthorized
            }
            #expect(server.requestCount == 1)
        }
    }

    @Test func aServerThatRefusesEveryTokenIsAskedNoMoreThanMaxAttemptsTimes() async throws {
        let refreshes = Atomic(0)
        try await withScriptedServer({ _ in ScriptedResponse(status: 401) }) { server in
            var provider = TestProvider(baseURL: server.baseURL)
            provider.interceptors = [
                BearerTokenAuthenticator(token: "t0") { _ in "t\(refreshes.add(1, ordering: .relaxed).newValue)" }
            ]
            await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/private")) }
            #expect(server.requestCount == provider.maxAttempts)
            #expect(refreshes.load(ordering: .relaxed) == provider.maxAttempts - 1)
        }
    }
}
