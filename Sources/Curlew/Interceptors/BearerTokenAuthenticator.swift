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
        /// The callers waiting for the refresh in flight, by the number each registered with; nil when no refresh
        /// runs.
        var waiters: [Int: CheckedContinuation<String?, any Error>]?
        var nextWaiter = 0
    }

    private let state: Mutex<State>
    private let refreshToken: @Sendable (_ expired: String?) async throws -> String

    /// - Parameters:
    ///   - token: the token to start with; `nil` sends no header until the first refresh.
    ///   - refreshToken: fetches a new token, given the one the server refused. It runs in a task of its own, so
    ///     a call that is cancelled while it runs stops waiting for it at once; the refresh goes on for the others.
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
        } catch is WaitCancelled {
            throw CancellationError()
        } catch {
            return .pass
        }
        return .retry
    }

    /// The token, waiting for a refresh in flight so no request goes out with the token being replaced. If that
    /// refresh fails, the request goes out with the old token and its 401 reaches the caller.
    private func currentToken() async throws -> String? {
        do {
            return try await refreshed(replacing: nil, startingOne: false)
        } catch is WaitCancelled {
            throw CancellationError()
        } catch {
            return token
        }
    }

    /// The caller was cancelled while it waited for a refresh: not a `CancellationError`, which the refresh itself may
    /// throw (a failed refresh lets the 401 through; only the caller's own cancellation cancels the call).
    private struct WaitCancelled: Error {}

    /// The token once the refresh in flight ends. With `startingOne`, a refresh starts when none runs and the token
    /// is still the refused one (a 401 for a token already replaced just gets the new one). Cancelling the caller
    /// ends its wait with `WaitCancelled`, not the refresh.
    private func refreshed(replacing refused: String?, startingOne: Bool = true) async throws -> String? {
        // Most calls meet no refresh and start none: no continuation for them.
        let answer: String?? = state.withLock { state in
            guard state.waiters == nil, !(startingOne && Self.isRefused(state.token, refused)) else { return .none }
            return .some(state.token)
        }
        if let answer { return answer }
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                enum Registration {
                    case waiting(startedTheRefresh: Bool)
                    case answered(String?)
                    case cancelled
                }
                // Decided again under the lock: a refresh may have ended or started since the look above.
                let registration = state.withLock { state -> Registration in
                    // Cancelled before registering: the cancellation handler found nothing to end.
                    if Task.isCancelled { return .cancelled }
                    if state.waiters == nil {
                        guard startingOne, Self.isRefused(state.token, refused) else { return .answered(state.token) }
                        state.waiters = [id: continuation]
                        return .waiting(startedTheRefresh: true)
                    }
                    state.waiters?[id] = continuation
                    return .waiting(startedTheRefresh: false)
                }
                switch registration {
                case .cancelled:
                    continuation.resume(throwing: WaitCancelled())
                case .answered(let token):
                    continuation.resume(returning: token)
                case .waiting(let startedTheRefresh):
                    guard startedTheRefresh else { return }
                    let refreshToken = self.refreshToken
                    // Not a child of the caller: the caller may be cancelled, the others still wait for the token.
                    Task {
                        do {
                            self.finishRefresh(with: .success(try await refreshToken(refused)))
                        } catch {
                            self.finishRefresh(with: .failure(error))
                        }
                    }
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters?.removeValue(forKey: id) }
            waiter?.resume(throwing: WaitCancelled())
        }
    }

    /// Whether `token` is the one the server refused (or there is none yet), so a new one must be fetched.
    private static func isRefused(_ token: String?, _ refused: String?) -> Bool {
        token == nil || token == refused
    }

    private func finishRefresh(with outcome: Result<String, any Error>) {
        let waiters = state.withLock { state in
            defer { state.waiters = nil }
            if case .success(let token) = outcome { state.token = token }
            return state.waiters ?? [:]
        }
        for waiter in waiters.values { waiter.resume(with: outcome.map { Optional($0) }) }
    }
}
