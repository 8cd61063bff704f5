public import CurlewEngine
import Foundation
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
    /// Attempts in all, the first included.
    public var maxAttempts: Int

    public var requestedAttempts: Int? { maxAttempts }
    /// The delay before the first retry; each further retry doubles it.
    public var baseDelay: Duration
    /// The longest backoff delay.
    public var maxDelay: Duration
    /// The longest `Retry-After` honoured; a server asking for more gets its response passed on instead.
    public var maxRetryAfter: Duration
    /// Statuses that are retried.
    public var retryableStatuses: Set<Int>
    /// Transport failures that are retried.
    public var retryableErrors: @Sendable (CurlewError) -> Bool
    /// Whether POST, PATCH and other non-idempotent methods are retried too.
    public var retriesNonIdempotentMethods: Bool

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
    public static let isTransient: @Sendable (CurlewError) -> Bool = { error in
        switch error.code {
        case .connectionRefused, .connectFailed, .connectionClosed, .timeout(.connect), .dnsFailure: true
        default: false
        }
    }

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    {
        guard retryableStatuses.contains(response.status.code), allowsRetry(of: response.request.method, context)
        else { return .pass }
        if response.status == .tooManyRequests || response.status == .serviceUnavailable,
            let header = response.headerFields[.retryAfter]
        {
            guard let delay = Self.retryAfterDelay(header) else { return .retry(after: backoff(for: context.attempt)) }
            return delay <= maxRetryAfter ? .retry(after: delay) : .pass
        }
        return .retry(after: backoff(for: context.attempt))
    }

    public func intercept(_ error: CurlewError, context: InterceptorContext) async throws -> InterceptorDecision {
        guard retryableErrors(error), allowsRetry(of: context.route.method, context) else { return .pass }
        return .retry(after: backoff(for: context.attempt))
    }

    private func allowsRetry(of method: HTTPRequest.Method, _ context: InterceptorContext) -> Bool {
        guard context.attempt < maxAttempts else { return false }
        return retriesNonIdempotentMethods || Self.idempotentMethods.contains(method)
    }

    static let idempotentMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace, .put, .delete]

    /// The delay before retry number `attempt`: `baseDelay × 2^(attempt−1)` capped at ``maxDelay``, then a random
    /// share of it between half and all ("equal jitter"), so clients that failed together do not retry together.
    public func backoff(for attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(baseDelay * (1 << exponent), maxDelay)
        return ceiling * Double.random(in: 0.5...1.0)
    }

    /// `Retry-After` as delay-seconds or an HTTP date in any of the three forms a recipient must accept
    /// (RFC 9110, section 5.6.7: IMF-fixdate, the obsolete RFC 850 form and C's asctime); `nil` when neither.
    static func retryAfterDelay(_ value: String, now: Date = Date()) -> Duration? {
        // asctime pads a one-digit day with a space ("Nov  6"); one space between fields is enough to parse.
        let trimmed = value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        if let seconds = Int(trimmed), seconds >= 0 { return .seconds(seconds) }
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) {
                return .milliseconds(max(0, Int(date.timeIntervalSince(now) * 1000)))
            }
        }
        return nil
    }
}
