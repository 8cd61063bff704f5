public import CurlewEngine

/// Changes requests before they are sent and decides what to do with what comes back.
///
/// Both sides are optional and async. Interceptors sit at four levels, applied in this order:
///
/// | side | order |
/// |---|---|
/// | request (``adapt(_:context:)``) | call → route → provider → global |
/// | response (``intercept(_:context:)-(RouteResponse,_)``) | global → provider → route → call |
///
/// The global ones (``GlobalInterceptors``) are closest to the wire, as in BothamNetworking ("local, then
/// global") and Konex (call, request, client): a global logger sees the request exactly as sent, headers added by
/// the provider and the route included, and the response exactly as received, before anything more specific
/// replaces it. Read it as an onion whose outside is the call.
///
/// A response interceptor may pass, replace the response, fail, or ask for a retry. A retry runs the whole
/// request side again (so a refreshed token is picked up), and is bounded by the call's attempt bound: the
/// provider's ``HTTPProvider/maxAttempts``, raised by any interceptor that declares more
/// (``requestedAttempts``). No interceptor can loop forever.
public protocol Interceptor: Sendable {
    /// Changes the request before it is sent. Throwing fails the call with ``ProviderError/interceptor(_:)``.
    func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws

    /// Looks at a response before validation and decoding.
    func intercept(_ response: RouteResponse, context: InterceptorContext) async throws -> InterceptorDecision

    /// Looks at a transport failure (no response arrived): ``InterceptorDecision/pass`` keeps the error,
    /// ``InterceptorDecision/replace(_:)`` recovers with a response of your own, ``InterceptorDecision/retry(after:)``
    /// tries again.
    func intercept(_ error: CurlewError, context: InterceptorContext) async throws -> InterceptorDecision

    /// The attempts, the first included, this interceptor may ask for in one call; `nil` (the default) asks for
    /// none beyond the provider's ``HTTPProvider/maxAttempts``. A call's bound is the largest of the provider's
    /// and of its interceptors' (``RetryPolicy`` declares its `maxAttempts`), so `RetryPolicy(maxAttempts: 5)`
    /// makes five attempts whatever the provider's default.
    var requestedAttempts: Int? { get }

    /// Whether this interceptor adds credentials (an `Authorization` field, an API key, a token in the query) or
    /// acts on their refusal (a 401 that refreshes a token). At the provider and global levels such an interceptor
    /// runs, on both sides, only for requests to the provider's origins (``HTTPProvider/credentialOrigins``); at
    /// the route and call levels it runs wherever the route points. Default: false. Whatever an interceptor says,
    /// a request to another origin never leaves with the credential fields (the engine's list: `Authorization`,
    /// `Cookie`, `Proxy-Authorization`, `X-Amz-Security-Token`, and fields marked never-indexed, as
    /// `CurlewRequest.setCredentialHeader` sets them) that provider-level or global interceptors set. The origin is
    /// decided on the request's URL before any interceptor runs, and again when an interceptor moved the request
    /// to a new URL (``HTTPProvider/credentialOrigins``); a request moved to another origin also loses the
    /// credential query parameters (`access_token`, `api_key`, the provider's ``HTTPProvider/additionalParameters``)
    /// that the call's and the route's interceptors did not put there themselves.
    var attachesCredentials: Bool { get }
}

extension Interceptor {
    public var requestedAttempts: Int? { nil }

    public var attachesCredentials: Bool { false }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {}

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    { .pass }

    public func intercept(_ error: CurlewError, context: InterceptorContext) async throws -> InterceptorDecision {
        .pass
    }
}

/// What a response interceptor wants done: ``pass``, ``replace(_:)``, ``fail(_:)`` or ``retry(after:)``.
///
/// A struct rather than an enum, so that decisions can be added without breaking a caller's `switch`:
/// ``action`` says which one it is (its ``Action/name`` is stable), and ``replacement``, ``error`` and
/// ``retryDelay`` hold what came with it.
public struct InterceptorDecision: Sendable {
    /// Which decision it is, for matching: `decision.action == .retry`.
    public struct Action: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case pass
            case replace
            case fail
            case retry
        }

        private let kind: Kind

        private init(_ kind: Kind) { self.kind = kind }

        /// ``InterceptorDecision/pass``.
        public static let pass = Action(.pass)
        /// ``InterceptorDecision/replace(_:)``.
        public static let replace = Action(.replace)
        /// ``InterceptorDecision/fail(_:)``.
        public static let fail = Action(.fail)
        /// ``InterceptorDecision/retry(after:)`` and ``InterceptorDecision/retry``.
        public static let retry = Action(.retry)

        /// The stable name: the static member's name (`"pass"`, `"retry"`).
        public var name: String {
            switch kind {
            case .pass: "pass"
            case .replace: "replace"
            case .fail: "fail"
            case .retry: "retry"
            }
        }

        public var description: String { name }
    }

    /// The pipeline's exhaustive view of the decision.
    enum Storage: Sendable {
        case pass
        case replace(RouteResponse)
        case fail(any Error)
        case retry(after: Duration?)
    }

    let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// Go on with the response (or error) as it is.
    public static let pass = InterceptorDecision(.pass)

    /// Go on with this response instead.
    public static func replace(_ response: RouteResponse) -> InterceptorDecision {
        InterceptorDecision(.replace(response))
    }

    /// Stop with this error: ``ProviderError/validation(_:_:)`` when there is a response, else
    /// ``ProviderError/interceptor(_:)``; a ``ProviderError`` is thrown as it is.
    public static func fail(_ error: any Error) -> InterceptorDecision { InterceptorDecision(.fail(error)) }

    /// Send the request again after the delay, if the provider's ``HTTPProvider/maxAttempts`` allows it and the
    /// body can be sent again; otherwise the response goes on as if the interceptor had passed.
    public static func retry(after delay: Duration?) -> InterceptorDecision {
        InterceptorDecision(.retry(after: delay))
    }

    /// Send the request again at once (BothamNetworking's `.retry`).
    public static var retry: InterceptorDecision { .retry(after: nil) }

    /// Which decision it is.
    public var action: Action {
        switch storage {
        case .pass: .pass
        case .replace: .replace
        case .fail: .fail
        case .retry: .retry
        }
    }

    /// The response a ``replace(_:)`` decision goes on with; `nil` for the others.
    public var replacement: RouteResponse? {
        if case .replace(let response) = storage { response } else { nil }
    }

    /// The error a ``fail(_:)`` decision stops with; `nil` for the others.
    public var error: (any Error)? {
        if case .fail(let error) = storage { error } else { nil }
    }

    /// The wait before a ``retry(after:)`` decision's next attempt; `nil` for a retry at once and for the others
    /// (``action`` tells them apart).
    public var retryDelay: Duration? {
        if case .retry(let delay) = storage { delay } else { nil }
    }
}

/// What an interceptor knows about the call it is part of.
public struct InterceptorContext: Sendable {
    /// The route being requested.
    public let route: Route
    /// 1 for the first attempt, 2 for the first retry, and so on.
    public let attempt: Int
    /// The provider's bound on attempts.
    public let maxAttempts: Int
    /// When this attempt's request side started: what logging and metrics measure from.
    public let startedAt: ContinuousClock.Instant
    /// The names of the provider's ``HTTPProvider/additionalParameters`` (lower-case): credentials to it, whose
    /// values every URL the layer names for the call (log lines, errors) redacts.
    package let credentialParameterNames: Set<String>

    /// A context, as the pipeline makes one per attempt (and tests of interceptors may).
    public init(route: Route, attempt: Int, maxAttempts: Int, startedAt: ContinuousClock.Instant = .now) {
        self.init(
            route: route, attempt: attempt, maxAttempts: maxAttempts, startedAt: startedAt,
            credentialParameterNames: [])
    }

    /// A context of a call of a provider whose ``HTTPProvider/additionalParameters`` are named
    /// `credentialParameterNames`.
    package init(
        route: Route, attempt: Int, maxAttempts: Int, startedAt: ContinuousClock.Instant = .now,
        credentialParameterNames: Set<String>
    ) {
        self.route = route
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.startedAt = startedAt
        self.credentialParameterNames = credentialParameterNames
    }
}

/// An interceptor made of closures, for one-off needs.
///
/// ```swift
/// let tagged = AnyInterceptor(adapt: { request, _ in try request.setHeader("X-Trace", traceID) })
/// ```
public struct AnyInterceptor: Interceptor {
    private let adaptBody: @Sendable (inout CurlewRequest, InterceptorContext) async throws -> Void
    private let responseBody: @Sendable (RouteResponse, InterceptorContext) async throws -> InterceptorDecision
    public let attachesCredentials: Bool

    /// An interceptor from a request adapter and a response handler, either optional; `attachesCredentials` when
    /// it adds credentials (see ``Interceptor/attachesCredentials``).
    public init(
        attachesCredentials: Bool = false,
        adapt: @escaping @Sendable (inout CurlewRequest, InterceptorContext) async throws -> Void = { _, _ in },
        response: @escaping @Sendable (RouteResponse, InterceptorContext) async throws -> InterceptorDecision = {
            _, _ in .pass
        }
    ) {
        self.attachesCredentials = attachesCredentials
        self.adaptBody = adapt
        self.responseBody = response
    }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        try await adaptBody(&request, context)
    }

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    {
        try await responseBody(response, context)
    }
}
