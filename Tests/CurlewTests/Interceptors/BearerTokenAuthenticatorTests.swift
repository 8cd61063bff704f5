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

    /// Holds the provider a refresh sends through: the provider holds the authenticator, whose refresh needs it.
    private final class ProviderBox: Sendable {
        private let stored = Mutex<TestProvider?>(nil)

        var provider: TestProvider {
            get { stored.withLock { $0! } }
            set { stored.withLock { $0 = newValue } }
        }
    }

    /// A server that accepts only `Bearer <accepted>` and hands out tokens at `/refresh` (the last stub wins).
    private static func tokenServer(
        accepting accepted: String, refreshStatus: HTTPResponse.Status = .ok
    ) -> MockTransport {
        MockTransport(stubs: [
            Stub(
                matching: { _ in true },
                respond: { request, _ in
                    request.headerFields[.authorization] == "Bearer \(accepted)"
                        ? .json(["ok": true]) : StubResponse(status: .unauthorized)
                }),
            Stub.get("/refresh", status: refreshStatus, json: refreshStatus == .ok ? ["token": "fresh"] : nil),
        ])
    }

    /// A refresh whose request goes through the provider whose 401 started it: the request's `adapt` used to wait
    /// for the refresh in flight, its own, so the call and every later call hung for ever. The refresh's request
    /// goes out with the old token instead.
    @Test func aRefreshSentThroughTheSameProviderGoesOutWithTheOldTokenInsteadOfWaitingForItself() async throws {
        let mock = Self.tokenServer(accepting: "fresh")
        let box = ProviderBox()
        let authenticator = BearerTokenAuthenticator(token: "stale") { _ in
            try await box.provider.request(Route(path: "/refresh")).json()["token"].stringValue
        }
        var configured = TestProvider(baseURL: "https://api.example.com", transport: mock)
        configured.interceptors = [authenticator]
        box.provider = configured
        let provider = configured
        let response = try await withTimeout(.seconds(10), "the call whose 401 starts the refresh") {
            try await provider.request(Route(path: "/private"))
        }
        #expect(response.status == .ok)
        #expect(authenticator.token == "fresh")
        let sent = mock.receivedRequests.map { "\($0.url) \($0.headerFields[.authorization] ?? "-")" }
        #expect(
            sent == [
                "https://api.example.com/private Bearer stale", "https://api.example.com/refresh Bearer stale",
                "https://api.example.com/private Bearer fresh",
            ])
        // Later calls do not wait for anything either.
        let later = try await withTimeout(.seconds(10), "a later call") {
            try await provider.request(Route(path: "/private"))
        }
        #expect(later.status == .ok)
    }

    /// The refresh's own request refused with a 401 must not start a refresh inside the refresh (which would wait
    /// for itself): the refresh fails, and the first call's 401 reaches its caller.
    @Test func aRefreshWhoseOwnRequestGetsA401FailsInsteadOfWaitingForItself() async throws {
        let mock = Self.tokenServer(accepting: "fresh", refreshStatus: .unauthorized)
        let box = ProviderBox()
        let refreshes = Atomic(0)
        let authenticator = BearerTokenAuthenticator(token: "stale") { _ in
            refreshes.add(1, ordering: .relaxed)
            return try await box.provider.request(Route(path: "/refresh")).json()["token"].stringValue
        }
        var configured = TestProvider(baseURL: "https://api.example.com", transport: mock)
        configured.interceptors = [authenticator]
        box.provider = configured
        let provider = configured
        let error = await #expect(throws: ProviderError.self) {
            try await withTimeout(.seconds(10), "the call whose 401 starts the refresh") {
                try await provider.request(Route(path: "/private"))
            }
        }
        #expect(error?.status == .unauthorized)
        #expect(refreshes.load(ordering: .relaxed) == 1)
        #expect(authenticator.token == "stale")
        #expect(mock.receivedRequests.count == 2, "/private, then /refresh once: no retry inside the refresh")
    }

    /// Tokens the `Authorization` field cannot carry as they are, even trimmed: swift-http-types rewrites them, so
    /// the token read back from a 401's request never matched the one in use and nothing was ever refreshed.
    static let tokensThatAreNotLegalHeaderValues: [(token: String, reason: String)] = [
        ("", "is empty"), (" \r\n", "is empty"), ("t\r\n0", "contains a line break"), ("t\n0", "contains a line break"),
        ("t\u{0}0", "contains a control character"), ("t\u{7F}0", "contains a control character"),
    ]

    /// A token read from a file ends in a line break, and one pasted may have spaces around it: the field trims
    /// them, so the authenticator does too where the token is given and refreshed. Before, `stale\n` went out as
    /// `Bearer stale`, and its 401 never matched the token in use: it was never refreshed.
    @Test func aTokenWithSpacesOrALineBreakAroundItIsSentTrimmedAndRefreshedWhenRefused() async throws {
        let mock = Self.tokenServer(accepting: "fresh")
        let refreshes = Atomic(0)
        let authenticator = BearerTokenAuthenticator(token: "stale\n") { expired in
            #expect(expired == "stale")
            refreshes.add(1, ordering: .relaxed)
            return " fresh\r\n"
        }
        var provider = TestProvider(baseURL: "https://api.example.com", transport: mock)
        provider.interceptors = [authenticator]
        #expect(try await provider.request(Route(path: "/private")).status == .ok)
        #expect(refreshes.load(ordering: .relaxed) == 1)
        #expect(authenticator.token == "fresh")
        #expect(
            mock.receivedRequests.map { $0.headerFields[.authorization] } == ["Bearer stale", "Bearer fresh"])
        // Only what is around the token goes: its own bytes, non-ASCII ones included, stay.
        #expect(BearerTokenAuthenticator(token: "\t tö ké\u{301}n\r\n") { _ in "" }.token == "tö ké\u{301}n")
    }

    @Test(arguments: tokensThatAreNotLegalHeaderValues)
    func anInitialTokenThatIsNotALegalHeaderValueFailsTheCallBeforeAnythingIsSent(
        token: String, reason: String
    ) async throws {
        let mock = Self.tokenServer(accepting: "fresh")
        let refreshes = Atomic(0)
        var provider = TestProvider(baseURL: "https://api.example.com", transport: mock)
        provider.interceptors = [
            BearerTokenAuthenticator(token: token) { _ in
                refreshes.add(1, ordering: .relaxed)
                return "fresh"
            }
        ]
        let error = await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/private")) }
        #expect(error?.code == .interceptor)
        let invalid = error?.cause as? BearerTokenAuthenticator.InvalidToken
        #expect(invalid?.origin == .initial)
        #expect(invalid?.reason == reason)
        #expect(invalid.map { !"\($0)".contains(token) || token.isEmpty } ?? false, "the message never shows the token")
        #expect(mock.receivedRequests.isEmpty)
        #expect(refreshes.load(ordering: .relaxed) == 0)
    }

    @Test(arguments: tokensThatAreNotLegalHeaderValues)
    func aRefreshedTokenThatIsNotALegalHeaderValueFailsTheCallAndTheTokenInUseStays(
        token: String, reason: String
    ) async throws {
        // The server accepts no token: before, the call went on with the refreshed token as the field had
        // rewritten it, and each 401 after that retried it without refreshing.
        let mock = Self.tokenServer(accepting: "never")
        let refreshes = Atomic(0)
        let authenticator = BearerTokenAuthenticator(token: "stale") { _ in
            refreshes.add(1, ordering: .relaxed)
            return token
        }
        var provider = TestProvider(baseURL: "https://api.example.com", transport: mock)
        provider.interceptors = [authenticator]
        let error = await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/private")) }
        #expect(error?.code == .interceptor)
        let invalid = error?.cause as? BearerTokenAuthenticator.InvalidToken
        #expect(invalid?.origin == .refresh)
        #expect(invalid?.reason == reason)
        #expect(authenticator.token == "stale")
        #expect(refreshes.load(ordering: .relaxed) == 1)
        #expect(mock.receivedRequests.count == 1)
    }

    /// Rewrites the `Bearer` field into a scheme of its own after the authenticator has set it.
    private struct RewritingScheme: Interceptor {
        func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
            if let value = request.headerFields[.authorization], value.hasPrefix("Bearer ") {
                request.headerFields[.authorization] = "Custom " + value.dropFirst(7)
            }
        }
    }

    /// A 401 whose `Authorization` field another interceptor gave another scheme (an API that wants
    /// `Custom <token>`) refused the token after the scheme. Before, it refused none, so the call retried the dead
    /// token until its attempts ran out.
    @Test func a401ForAFieldWithAnotherSchemeRefreshesTheTokenItCarries() async throws {
        let mock = MockTransport(stubs: [
            Stub(
                matching: { _ in true },
                respond: { request, _ in
                    request.headerFields[.authorization] == "Custom fresh"
                        ? .json(["ok": true]) : StubResponse(status: .unauthorized)
                })
        ])
        let refreshes = Atomic(0)
        let authenticator = BearerTokenAuthenticator(token: "stale") { expired in
            #expect(expired == "stale")
            refreshes.add(1, ordering: .relaxed)
            return "fresh"
        }
        var provider = TestProvider(baseURL: "https://api.example.com", transport: mock)
        provider.interceptors = [authenticator, RewritingScheme()]
        #expect(try await provider.request(Route(path: "/private")).status == .ok)
        #expect(refreshes.load(ordering: .relaxed) == 1)
        #expect(mock.receivedRequests.count == 2)
    }

    @Test func everyPrintingHidesTheToken() {
        let authenticator = BearerTokenAuthenticator(token: "token-secret") { _ in "refreshed-secret" }
        let none = BearerTokenAuthenticator(token: nil) { _ in "refreshed-secret" }
        for (way, text) in everyPrinting(of: authenticator) {
            #expect(!text.contains("token-secret"), "\(way): \(text)")
            #expect(text.contains("BearerTokenAuthenticator") && text.contains("<redacted>"), "\(way): \(text)")
        }
        for (way, text) in everyPrinting(of: none) {
            #expect(text.contains("BearerTokenAuthenticator") && text.contains("no token"), "\(way): \(text)")
        }
    }
}
