import Curlew
import CurlewEngine
import CurlewTestSupport
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

    private struct RefreshFailed: Error {}

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
