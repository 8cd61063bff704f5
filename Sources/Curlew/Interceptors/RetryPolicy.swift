public import CurlewEngine
import HTTPTypes

/// Retries failed attempts, boundedly: a set number of attempts, exponential backoff with jitter, and the
/// server's `Retry-After` on 429 and 503.
///
/// Only idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) are retried unless
/// ``retriesNonIdempotentMethods`` says otherwise, and only requests whose body can be sent again. Its
/// ``maxAttempts`` is what the call makes at most: the policy declares it as its
/// ``Interceptor/requestedAttempts``, which raises the provider's ``HTTPProvider/maxAttempts`` for the calls it is
/// part of (a call's bound is the largest of the two).
///
/// ```swift
/// struct API: HTTPProvider {
///     let baseURL = "…"
///     var interceptors: [any Interceptor] { [RetryPolicy(maxAttempts: 5)] }   // five attempts, not the default 3
/// }
/// ```
public struct RetryPolicy: Interceptor {
    /// The decisions and delays, shared with `curlew upload` (which runs another configuration of them).
    private var rules: RetryRules

    /// Attempts in all, the first included.
    public var maxAttempts: Int {
        get { rules.maxAttempts }
        set { rules.maxAttempts = newValue }
    }

    public var requestedAttempts: Int? { maxAttempts }
    /// The delay before the first retry; each further retry doubles it.
    public var baseDelay: Duration {
        get { rules.baseDelay }
        set { rules.baseDelay = newValue }
    }
    /// The longest backoff delay.
    public var maxDelay: Duration {
        get { rules.maxDelay }
        set { rules.maxDelay = newValue }
    }
    /// The longest `Retry-After` honoured; a server asking for more gets its response passed on instead.
    public var maxRetryAfter: Duration {
        get { rules.maxRetryAfter }
        set { rules.maxRetryAfter = newValue }
    }
    /// Statuses that are retried.
    public var retryableStatuses: Set<Int> {
        get { rules.retryableStatuses }
        set { rules.retryableStatuses = newValue }
    }
    /// Transport failures that are retried.
    public var retryableErrors: @Sendable (CurlewError) -> Bool {
        get { rules.retryableErrors }
        set { rules.retryableErrors = newValue }
    }
    /// Whether POST, PATCH and other non-idempotent methods are retried too.
    public var retriesNonIdempotentMethods: Bool {
        get { rules.nonIdempotentRetries == .all }
        set { rules.nonIdempotentRetries = newValue ? .all : .none }
    }

    /// A policy; the defaults retry 429, 502, 503 and 504 and transient connection failures of idempotent
    /// requests, three attempts in all, backing off from 200 ms.
    public init(
        maxAttempts: Int = 3,
        baseDelay: Duration = .milliseconds(200),
        maxDelay: Duration = .seconds(10),
        maxRetryAfter: Duration = .seconds(60),
        retryableStatuses: Set<Int> = [429, 502, 503, 504],
        retriesNonIdempotentMethods: Bool = false,
        retryableErrors: @escaping @Sendable (CurlewError) -> Bool = RetryPolicy.isTransient
    ) {
        rules = .routeLayer
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
        self.retryableStatuses = retryableStatuses
        self.retriesNonIdempotentMethods = retriesNonIdempotentMethods
        self.retryableErrors = retryableErrors
    }

    /// Refused and failed connections, connections closed mid-way and connect timeouts: failures a second
    /// attempt may not meet.
    public static let isTransient: @Sendable (CurlewError) -> Bool = RetryRules.transientError

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    {
        let delay = rules.delayBeforeRetry(
            afterStatus: response.status.code, retryAfter: response.headerFields[.retryAfter],
            idempotent: RetryRules.isIdempotent(response.request.method), attempt: context.attempt)
        return delay.map { .retry(after: $0) } ?? .pass
    }

    public func intercept(_ error: CurlewError, context: InterceptorContext) async throws -> InterceptorDecision {
        let delay = rules.delayBeforeRetry(
            after: error, idempotent: RetryRules.isIdempotent(context.route.method), attempt: context.attempt)
        return delay.map { .retry(after: $0) } ?? .pass
    }

    /// The delay before retry number `attempt`: `baseDelay × 2^(attempt−1)` capped at ``maxDelay``, then a random
    /// share of it between half and all ("equal jitter"), so clients that failed together do not retry together.
    public func backoff(for attempt: Int) -> Duration {
        rules.backoff(beforeRetry: attempt)
    }
}
