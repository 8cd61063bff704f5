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
/// The refresh may send its request through a provider that uses this same authenticator, even the provider whose
/// 401 started it, or with the authenticator among the ``GlobalInterceptors``: requests made inside the refresh
/// (its task, and the child and `Task {}` tasks it starts, which inherit its task-local values; not a
/// `Task.detached`) do not wait for it. They go out with the token being replaced, and a 401
/// they get is left to the refresh (no refresh inside the refresh).
///
/// A token goes out exactly as the authenticator keeps it, so it can tell which token a 401 refused: spaces, tabs
/// and line breaks around a token (a token read from a file often ends in one) are trimmed where it is given or
/// refreshed, as the `Authorization` field would trim them. A token that is empty, or holds a line break or another
/// control character, is refused with ``InvalidToken``, which fails the call as ``ProviderError/interceptor(_:)``:
/// an initial token like that fails every call that would send it; a refresh that returns one fails the calls
/// waiting for it, and the token in use stays.
///
/// ```swift
/// let auth = BearerTokenAuthenticator(token: stored) { expired in
///     try await authProvider.request(.refresh(expired)).decode(Tokens.self).accessToken
/// }
/// struct API: HTTPProvider { let baseURL = "…"; var interceptors: [any Interceptor] { [auth] } }
/// ```
public final class BearerTokenAuthenticator: Interceptor {
    /// A token that cannot be sent as it is in an `Authorization` field; a call that would send it fails with
    /// ``ProviderError/interceptor(_:)``, whose ``ProviderError/cause`` is this error.
    ///
    /// It never holds the token, which is a secret: ``reason`` says what is wrong with it.
    public struct InvalidToken: Error, Sendable, Hashable, CustomStringConvertible {
        /// Where a token came from.
        public enum Origin: Sendable, Hashable {
            /// The token the authenticator was made with.
            case initial
            /// A token the refresh returned.
            case refresh
        }

        /// Where the token came from.
        public let origin: Origin
        /// What is wrong with it: `"is empty"`, `"contains a line break"`, `"contains a control character"`.
        public let reason: String

        public var description: String {
            let token =
                switch origin {
                case .initial: "the bearer token the authenticator was given"
                case .refresh: "the bearer token the refresh returned"
                }
            return "\(token) cannot be sent in an Authorization field as it is: it \(reason)"
        }

        /// What is wrong with a trimmed `token` (``BearerTokenAuthenticator/trimmed(_:)``), `nil` when it can go out
        /// as it is (it survives the `Authorization` field unchanged).
        static func check(_ token: String, from origin: Origin) -> InvalidToken? {
            if token.isEmpty { return InvalidToken(origin: origin, reason: "is empty") }
            if HTTPField.isValidValue(token) { return nil }
            let reason =
                token.utf8.contains { $0 == 0x0A || $0 == 0x0D }
                ? "contains a line break" : "contains a control character"
            return InvalidToken(origin: origin, reason: reason)
        }
    }

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
    ///   - token: the token to start with, trimmed of spaces, tabs and line breaks around it; `nil` sends no header
    ///     until the first refresh. A token that cannot go out as it is (see ``InvalidToken``) fails every call that
    ///     would send it.
    ///   - refreshToken: fetches a new token (trimmed as `token` is), given the one the server refused. It runs in
    ///     a task of its own, so a call that is cancelled while it runs stops waiting for it at once; the refresh
    ///     goes on for the others.
    ///     It may send its request through a provider that uses this authenticator: that request goes out with
    ///     the token being replaced, without waiting for the refresh.
    public init(token: String?, refreshToken: @escaping @Sendable (_ expired: String?) async throws -> String) {
        self.state = Mutex(State(token: token.map(Self.trimmed)))
        self.refreshToken = refreshToken
    }

    /// The token requests are sent with now.
    public var token: String? {
        state.withLock { $0.token }
    }

    public var attachesCredentials: Bool { true }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        if let token = try await currentToken() {
            // Only the initial token can be invalid: a refreshed one is checked before it replaces the token.
            if let invalid = InvalidToken.check(token, from: .initial) { throw invalid }
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
        // A 401 for a request the refresh itself sent is the refresh's to handle: refreshing again from inside
        // the refresh would wait for itself.
        guard response.status == .unauthorized, response.isFromRequestedOrigin, context.attempt < context.maxAttempts,
            !isInsideOwnRefresh
        else { return .pass }
        // The token the 401 refused: what follows the field's scheme (`Bearer`, or one another interceptor put in
        // its place, as for an API that wants `Token <token>`); none when the request went without the field. A
        // refused token that is no longer the one in use was replaced meanwhile: the call retries with the new one.
        let refused = response.request.headerFields[.authorization].map { value in
            value.firstIndex(of: " ").map { String(value[value.index(after: $0)...]) } ?? value
        }
        do {
            _ = try await refreshed(replacing: refused)
        } catch is WaitCancelled {
            throw CancellationError()
        } catch let invalid as InvalidToken {
            // Thrown from here it would be a validation failure of the 401.
            throw ProviderError.interceptor(invalid)
        } catch {
            return .pass
        }
        return .retry
    }

    /// The authenticators whose refresh the current task runs (or was started by): their requests do not wait for
    /// the refresh in flight, which is their own.
    @TaskLocal private static var refreshing: Set<ObjectIdentifier> = []

    /// Whether the current task is part of this authenticator's refresh.
    private var isInsideOwnRefresh: Bool {
        Self.refreshing.contains(ObjectIdentifier(self))
    }

    /// `token` without the spaces, tabs and line breaks around it, which the `Authorization` field would trim:
    /// the authenticator keeps the token the field carries.
    static func trimmed(_ token: String) -> String {
        let isAround = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        let bytes = token.utf8
        guard let first = bytes.firstIndex(where: { !isAround($0) }),
            let last = bytes.lastIndex(where: { !isAround($0) })
        else { return "" }
        // Cut at ASCII bytes, so still valid UTF-8.
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    /// The token, waiting for a refresh in flight so no request goes out with the token being replaced. If that
    /// refresh fails, the request goes out with the old token and its 401 reaches the caller; if it returned an
    /// invalid token, the call fails with ``InvalidToken``.
    ///
    /// Inside the refresh (a request it sends), the token being replaced, at once: waiting would be for itself.
    private func currentToken() async throws -> String? {
        if isInsideOwnRefresh { return token }
        do {
            return try await refreshed(replacing: nil, startingOne: false)
        } catch is WaitCancelled {
            throw CancellationError()
        } catch let invalid as InvalidToken {
            throw invalid
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
                    /// `expired` is the token the refresh replaces when this caller started it.
                    case waiting(startedTheRefreshOf: String??)
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
                        return .waiting(startedTheRefreshOf: .some(state.token))
                    }
                    state.waiters?[id] = continuation
                    return .waiting(startedTheRefreshOf: .none)
                }
                switch registration {
                case .cancelled:
                    continuation.resume(throwing: WaitCancelled())
                case .answered(let token):
                    continuation.resume(returning: token)
                case .waiting(let startedTheRefreshOf):
                    guard case .some(let expired) = startedTheRefreshOf else { return }
                    let refreshToken = self.refreshToken
                    // Marks the refresh, and the requests it sends, as this authenticator's own.
                    let refreshing = Self.refreshing.union([ObjectIdentifier(self)])
                    // Not a child of the caller: the caller may be cancelled, the others still wait for the token.
                    Task {
                        do {
                            let token = Self.trimmed(
                                try await Self.$refreshing.withValue(refreshing) { try await refreshToken(expired) })
                            if let invalid = InvalidToken.check(token, from: .refresh) { throw invalid }
                            self.finishRefresh(with: .success(token))
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

/// Printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger), it says whether it holds
/// a token, never which.
extension BearerTokenAuthenticator: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `BearerTokenAuthenticator(token: <redacted>)`, or `BearerTokenAuthenticator(no token yet)` before the first
    /// refresh of one made without a token.
    public var description: String {
        token == nil
            ? "BearerTokenAuthenticator(no token yet)"
            : "BearerTokenAuthenticator(token: \(CurlewRequest.redactionMarker))"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the marker in place of the token, `nil` when there is none.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["token": token.map { _ in CurlewRequest.redactionMarker } as Any], displayStyle: .class)
    }
}
