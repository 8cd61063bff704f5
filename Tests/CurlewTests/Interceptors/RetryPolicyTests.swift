import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Curlew

@Suite struct RetryPolicyTests {
    private let fast = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5))

    private func provider(_ server: ScriptedServer, _ policy: RetryPolicy, maxAttempts: Int = 5) -> TestProvider {
        var provider = TestProvider(baseURL: server.baseURL)
        provider.interceptors = [policy]
        provider.maxAttempts = maxAttempts
        return provider
    }

    @Test func idempotentRequestsAreRetriedUpToTheLimitAndThenFail() async throws {
        try await withScriptedServer({ _ in ScriptedResponse(status: 503) }) { server in
            await #expect {
                try await provider(server, fast).request(Route(path: "/busy"))
            } throws: { error in
                (error as? ProviderError)?.status == .serviceUnavailable
            }
            #expect(server.requestCount == 3)
        }
    }

    @Test func aRetriedRequestThatSucceedsReturnsTheSuccess() async throws {
        let calls = Atomic(0)
        try await withScriptedServer({ _ in
            calls.add(1, ordering: .relaxed).newValue < 3 ? ScriptedResponse(status: 502) : .json(#"{"ok":true}"#)
        }) { server in
            let json = try await provider(server, fast).request(Route(path: "/flaky")).json()
            #expect(json == ["ok": true])
            #expect(server.requestCount == 3)
        }
    }

    @Test func postIsNotRetriedUnlessThePolicySaysSo() async throws {
        try await withScriptedServer({ _ in ScriptedResponse(status: 503) }) { server in
            await #expect(throws: ProviderError.self) {
                try await provider(server, fast).request(Route(path: "/orders", method: .post, params: ["a": 1]))
            }
            #expect(server.requestCount == 1)
            var permissive = fast
            permissive.retriesNonIdempotentMethods = true
            await #expect(throws: ProviderError.self) {
                try await provider(server, permissive).request(Route(path: "/orders", method: .post, params: ["a": 1]))
            }
            #expect(server.requestCount == 1 + 3)
        }
    }

    /// One rule: a call makes at most the larger of the provider's bound and the policy's own `maxAttempts`, so
    /// a policy does what it says whatever the provider's default; a stricter policy stops itself earlier.
    @Test(arguments: [(5, 3, 5), (2, 3, 2), (4, 6, 4)])
    func aPolicyMakesTheAttemptsItSaysWhateverTheProvidersDefault(
        policyAttempts: Int, providerAttempts: Int, expected: Int
    ) async throws {
        try await withScriptedServer({ _ in ScriptedResponse(status: 503) }) { server in
            var policy = fast
            policy.maxAttempts = policyAttempts
            await #expect(throws: ProviderError.self) {
                try await provider(server, policy, maxAttempts: providerAttempts).request(Route(path: "/busy"))
            }
            #expect(server.requestCount == expected)
        }
    }

    @Test func retryAfterOn429IsHonoured() async throws {
        let calls = Atomic(0)
        try await withScriptedServer({ _ in
            calls.add(1, ordering: .relaxed).newValue == 1
                ? ScriptedResponse(status: 429, headers: [("Retry-After", "1")]) : .json("{}")
        }) { server in
            let started = ContinuousClock.now
            let response = try await provider(server, fast).request(Route(path: "/limited"))
            let elapsed = ContinuousClock.now - started
            #expect(response.status == .ok)
            #expect(server.requestCount == 2)
            // The policy's own backoff is at most 5 ms: only Retry-After explains a second.
            #expect(elapsed >= .seconds(1))
        }
    }

    @Test func aRetryAfterBeyondTheLimitPassesTheResponseOn() async throws {
        try await withScriptedServer({ _ in ScriptedResponse(status: 503, headers: [("Retry-After", "3600")]) }) {
            server in
            await #expect {
                try await provider(server, fast).request(Route(path: "/maintenance"))
            } throws: { error in
                (error as? ProviderError)?.status == .serviceUnavailable
            }
            #expect(server.requestCount == 1)
        }
    }

    @Test func transientTransportFailuresAreRetried() async throws {
        let mock = MockTransport(stubs: [
            .failing(.get, "/down", with: CurlewError(code: .connectionRefused, detail: "refused"))
        ])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [fast]
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/down")) }
        #expect(mock.receivedRequests.count == 3)

        // A POST is not retried after a transport failure either.
        let refusedPost = MockTransport(stubs: [
            .failing(.post, "/down", with: CurlewError(code: .connectionRefused, detail: "refused"))
        ])
        provider = TestProvider(baseURL: "http://api.local", transport: refusedPost)
        provider.interceptors = [fast]
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/down", method: .post)) }
        #expect(refusedPost.receivedRequests.count == 1)

        let invalid = MockTransport(stubs: [
            .failing(.get, "/bad", with: CurlewError(code: .invalidResponse, detail: "garbage"))
        ])
        provider = TestProvider(baseURL: "http://api.local", transport: invalid)
        provider.interceptors = [fast]
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/bad")) }
        #expect(invalid.receivedRequests.count == 1)
    }

    @Test func backoffGrowsExponentiallyWithJitterAndIsCapped() {
        let policy = RetryPolicy(baseDelay: .milliseconds(100), maxDelay: .milliseconds(350))
        for _ in 0..<20 {
            let first = policy.backoff(for: 1)
            #expect(first >= .milliseconds(50) && first <= .milliseconds(100))
            let second = policy.backoff(for: 2)
            #expect(second >= .milliseconds(100) && second <= .milliseconds(200))
            let capped = policy.backoff(for: 10)
            #expect(capped >= .milliseconds(175) && capped <= .milliseconds(350))
        }
    }

    @Test func retryAfterReadsSecondsAndHTTPDates() {
        #expect(RetryRules.retryAfterDelay("7") == .seconds(7))
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        #expect(RetryRules.retryAfterDelay("Wed, 21 Oct 2015 07:28:30 GMT", now: now) == .seconds(30))
        #expect(RetryRules.retryAfterDelay("soon") == nil)
    }

    @Test func retryAfterAcceptsTheObsoleteDateFormsTooAndNeverANegativeDelay() {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        #expect(RetryRules.retryAfterDelay("Wednesday, 21-Oct-15 07:28:45 GMT", now: now) == .seconds(45))
        #expect(RetryRules.retryAfterDelay("Wed Oct 21 07:29:00 2015", now: now) == .seconds(60))
        // asctime pads a one-digit day with a second space.
        let earlyInMonth = Date(timeIntervalSince1970: 1_444_116_480)  // Tue, 06 Oct 2015 07:28:00 GMT
        #expect(RetryRules.retryAfterDelay("Tue Oct  6 07:28:10 2015", now: earlyInMonth) == .seconds(10))
        #expect(RetryRules.retryAfterDelay("Wed, 21 Oct 2015 07:27:00 GMT", now: now) == .zero)
        #expect(RetryRules.retryAfterDelay("-5") == nil)
    }

    @Test func retriesThePolicyAndOtherInterceptorsAskForShareTheCallsOneBound() async throws {
        // 401, 503, 401, 503, …: an interceptor retries the 401s, the policy the 503s.
        let mock = MockTransport(stubs: [
            Stub(
                matching: { _ in true },
                respond: { _, calls in StubResponse(status: calls % 2 == 0 ? .unauthorized : .serviceUnavailable) })
        ])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        var generous = fast
        generous.maxAttempts = 7
        let retryOn401 = AnyInterceptor(response: { response, _ in response.status == .unauthorized ? .retry : .pass })
        provider.interceptors = [generous, retryOn401]
        provider.maxAttempts = 5
        await #expect {
            try await provider.request(Route(path: "/contested"))
        } throws: { error in
            (error as? ProviderError)?.status == .unauthorized
        }
        // The policy raised the call's bound to 7; the 401 retries count against the same 7.
        #expect(mock.receivedRequests.count == 7)

        // An interceptor that always asks for a retry cannot loop either.
        let always = MockTransport(stubs: [.get("/loop", status: .ok)])
        provider = TestProvider(baseURL: "http://api.local", transport: always)
        provider.interceptors = [AnyInterceptor(response: { _, _ in .retry })]
        #expect(try await provider.request(Route(path: "/loop")).status == .ok)
        #expect(always.receivedRequests.count == provider.maxAttempts)
    }

    private static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    private static func decision(
        _ policy: RetryPolicy, status: HTTPResponse.Status, retryAfter: String, attempt: Int = 1
    ) async throws -> InterceptorDecision {
        let request = try CurlewRequest(url: "http://api.local/x")
        let response = RouteResponse(
            status: status, headerFields: [.retryAfter: retryAfter], url: request.url, request: request)
        return try await policy.intercept(
            response, context: InterceptorContext(route: Route(path: "/x"), attempt: attempt, maxAttempts: 3))
    }

    @Test func retryAfterDatesAndSecondsAreCappedByMaxRetryAfter() async throws {
        let policy = RetryPolicy(maxRetryAfter: .seconds(60))
        /// The delay of a retry decision; `nil` when the response is passed on.
        func retryDelay(_ status: HTTPResponse.Status, _ retryAfter: String, attempt: Int = 1) async throws -> Duration?
        {
            let decision = try await Self.decision(policy, status: status, retryAfter: retryAfter, attempt: attempt)
            return decision.action == .retry ? decision.retryDelay ?? .zero : nil
        }
        // A date in the past means now; a date within the cap is waited for; beyond it, the response goes on.
        #expect(try await retryDelay(.serviceUnavailable, Self.httpDate(Date(timeIntervalSinceNow: -30))) == .zero)
        let soon = try await retryDelay(.tooManyRequests, Self.httpDate(Date(timeIntervalSinceNow: 30)))
        #expect(soon.map { $0 > .seconds(27) && $0 <= .seconds(30) } == true)
        #expect(try await retryDelay(.tooManyRequests, Self.httpDate(Date(timeIntervalSinceNow: 7200))) == nil)
        #expect(try await retryDelay(.serviceUnavailable, "60") == .seconds(60))
        #expect(try await retryDelay(.serviceUnavailable, "61") == nil)
        // Unreadable: the policy's own backoff.
        #expect(try await retryDelay(.serviceUnavailable, "later").map { $0 <= .milliseconds(200) } == true)
        // Retry-After on other statuses is not the policy's business: backoff.
        #expect(try await retryDelay(.badGateway, "3600").map { $0 <= .milliseconds(200) } == true)
        // The last attempt is never retried.
        #expect(try await retryDelay(.serviceUnavailable, "1", attempt: 3) == nil)
    }
}
