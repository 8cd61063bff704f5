public import CurlewEngine
import HTTPTypes
import Synchronization

/// Bearer token authentication with refresh: adds `Authorization: Bearer <token>`, and on a 401 refreshes the
/// token and retries.
///
/// However many requests hit 401 at the same time, the refresh runs once: the first 401 starts it, the others
/// wait for it, and a 401 for a token that has already been replaced just retries with the new one.
/// Retries stay within the provider's ``HTTPProvider/maxAttempts``; when the refresh fails, the 401 goes on to
/// the caller as ``ProviderError/status(_:)``.
///
/// ```swift
/// let auth = BearerTokenAuthenticator(token: stored) { expired in
///     try await authProvider.request(.refresh(expired)).decode(Tokens.self).accessToken
/// }
/// struct API: HTTPProvider { let baseURL = "…"; var interceptors: [any Interceptor] { [auth] } }
/// ```
public final class BearerTokenAuthenticator: Interceptor {
    private struct State {
        var token: String?
        var refresh: Task<String, any Error>?
    }

    private let state: Mutex<State>
    private let refreshToken: @Sendable (_ expired: String?) async throws -> String

    /// - Parameters:
    ///   - token: the token to start with; `nil` sends no header until the first refresh.
    ///   - refreshToken: fetches a new token, given the one the server refused.
    public init(token: String?, refreshToken: @escaping @Sendable (_ expired: String?) async throws -> String) {
        self.state = Mutex(State(token: token))
        self.refreshToken = refreshToken
    }

    /// The token requests are sent with now.
    public var token: String? {
        state.withLock { $0.token }
    }

    public var attachesCredentials: Bool { true }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        if let token = try await currentToken() {
            request.headerFields[.authorization] = "Bearer " + token
        }
    }

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    {
        // A 401 from another origin a redirect reached is not about the token (it was not sent there): refreshing
        // would let any server a redirect names rotate it.
        guard response.status == .unauthorized, response.isFromRequestedOrigin, context.attempt < context.maxAttempts
        else { return .pass }
        let sentToken = response.request.headerFields[.authorization].flatMap { value -> String? in
            value.hasPrefix("Bearer ") ? String(value.dropFirst(7)) : nil
        }
        do {
            _ = try await refreshed(replacing: sentToken)
        } catch {
            return .pass
        }
        return .retry
    }

    /// The token, waiting for a refresh in flight so no request goes out with the token being replaced. If that
    /// refresh fails, the request goes out with the old token and its 401 reaches the caller.
    private func currentToken() async throws -> String? {
        let (token, refresh) = state.withLock { ($0.token, $0.refresh) }
        if let refresh { return (try? await refresh.value) ?? token }
        return token
    }

    /// Starts a refresh unless the refused token is already replaced or one is running; returns the new token.
    private func refreshed(replacing refused: String?) async throws -> String {
        let task: Task<String, any Error> = state.withLock { state in
            if let running = state.refresh { return running }
            if let current = state.token, current != refused {
                return Task { current }
            }
            let refreshToken = self.refreshToken
            let task = Task { try await refreshToken(refused) }
            state.refresh = task
            return task
        }
        do {
            let token = try await task.value
            finishRefresh(task, with: token)
            return token
        } catch {
            finishRefresh(task, with: nil)
            throw error
        }
    }

    private func finishRefresh(_ task: Task<String, any Error>, with token: String?) {
        state.withLock { state in
            guard let running = state.refresh, running == task else { return }
            state.refresh = nil
            if let token { state.token = token }
        }
    }
}
