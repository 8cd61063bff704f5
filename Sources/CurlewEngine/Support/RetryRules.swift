// Package imports: `Date` and `HTTPRequest.Method` are in the package-wide signatures below.
package import Foundation
package import HTTPTypes

/// When a failed attempt is tried again and how long to wait first: the one description of a retry policy, in two
/// named configurations, ``routeLayer`` (the route layer's `RetryPolicy`) and ``upload`` (`curlew upload`).
///
/// Pure: it decides from a status, an error and an attempt number; the waiting and the loop are
/// ``retrying(maxAttempts:_:onCancelledWait:)``'s.
package struct RetryRules: Sendable {
    /// What a request that is not idempotent (sent twice, it may act twice) is retried after.
    package enum NonIdempotentRetries: Sendable, Hashable {
        /// Nothing: only idempotent requests are retried.
        case none
        /// A retryable status, and a retryable failure before the request was sent (``failedBeforeSending(_:)``).
        case statusesAndUnsentFailures
        /// Whatever an idempotent request is retried after.
        case all
    }

    /// Attempts in all, the first included.
    package var maxAttempts: Int
    /// The backoff before the first retry; each further retry doubles it.
    package var baseDelay: Duration
    /// The longest backoff.
    package var maxDelay: Duration
    /// Statuses that are retried.
    package var retryableStatuses: Set<Int>
    /// Transport failures that are retried (of requests that may be sent again, see ``nonIdempotentRetries``).
    package var retryableErrors: @Sendable (CurlewError) -> Bool
    /// What requests that are not idempotent are retried after.
    package var nonIdempotentRetries: NonIdempotentRetries
    /// Statuses whose `Retry-After` is waited for instead of the backoff; empty: `Retry-After` is ignored.
    package var retryAfterStatuses: Set<Int>
    /// The longest `Retry-After` honoured; a server asking for more gets no retry.
    package var maxRetryAfter: Duration

    /// Rules from all their parts; see ``routeLayer`` and ``upload`` for the two in use.
    package init(
        maxAttempts: Int, baseDelay: Duration, maxDelay: Duration, retryableStatuses: Set<Int>,
        retryableErrors: @escaping @Sendable (CurlewError) -> Bool, nonIdempotentRetries: NonIdempotentRetries,
        retryAfterStatuses: Set<Int>, maxRetryAfter: Duration
    ) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.retryableStatuses = retryableStatuses
        self.retryableErrors = retryableErrors
        self.nonIdempotentRetries = nonIdempotentRetries
        self.retryAfterStatuses = retryAfterStatuses
        self.maxRetryAfter = maxRetryAfter
    }

    /// The route layer's (`RetryPolicy()`): three attempts, backoff from 200 ms up to 10 s, 429, 502, 503 and 504,
    /// ``transientError``s, idempotent requests only, and `Retry-After` on 429 and 503 up to a minute.
    package static let routeLayer = RetryRules(
        maxAttempts: 3, baseDelay: .milliseconds(200), maxDelay: .seconds(10),
        retryableStatuses: [429, 502, 503, 504], retryableErrors: transientError, nonIdempotentRetries: .none,
        retryAfterStatuses: [429, 503], maxRetryAfter: .seconds(60))

    /// `curlew upload`'s, for plain targets and S3 alike: three attempts (`--retries 2`; callers set
    /// ``maxAttempts`` from the option), backoff from 100 ms up to 3.2 s, 408 besides the route layer's statuses,
    /// ``uploadError``s, a multipart POST's retryable statuses and unsent failures, and `Retry-After` ignored
    /// (as the upload always has: its backoff alone sets the pace).
    package static let upload = RetryRules(
        maxAttempts: 3, baseDelay: .milliseconds(100), maxDelay: .milliseconds(3200),
        retryableStatuses: [408, 429, 502, 503, 504], retryableErrors: uploadError,
        nonIdempotentRetries: .statusesAndUnsentFailures, retryAfterStatuses: [], maxRetryAfter: .zero)

    /// These rules with `retries` retries after the first attempt (`curlew upload --retries`).
    package func allowingRetries(_ retries: Int) -> RetryRules {
        var rules = self
        rules.maxAttempts = retries + 1
        return rules
    }

    /// Failures before the request reached the server (no connection was made): safe to retry whatever the request.
    package static func failedBeforeSending(_ code: CurlewError.Code) -> Bool {
        switch code {
        case .connectionRefused, .connectFailed, .dnsFailure, .timeout(.connect), .timeout(.waitingForConnection): true
        default: false
        }
    }

    /// Whether `error` ended a request no server saw: a failure before sending (``failedBeforeSending(_:)``) with no
    /// response head received, not even a redirect's. A redirect's next request fails the same ways (no free
    /// connection, refused, unknown host), but the request it follows was answered: the server acted on it.
    package static func reachedNoServer(_ error: CurlewError) -> Bool {
        guard failedBeforeSending(error.code) else { return false }
        guard let metrics = error.metrics else { return true }
        return metrics.headerBytesReceived == 0 && metrics.redirectCount == 0
    }

    /// The route layer's retryable failures: those before sending, and a connection closed mid-way.
    package static let transientError: @Sendable (CurlewError) -> Bool = { error in
        failedBeforeSending(error.code) || error.code == .connectionClosed
    }

    /// The upload's retryable failures: those before sending, and a connection lost, stalled, timed out or broken
    /// at the HTTP/2 layer mid-way (the same bytes to the same name again). Never a file problem.
    package static let uploadError: @Sendable (CurlewError) -> Bool = { error in
        switch error.code {
        case .connectionClosed, .timeout(.idle), .timeout(.total), .http2: true
        default: failedBeforeSending(error.code)
        }
    }

    /// GET, HEAD, OPTIONS, TRACE, PUT and DELETE: sent twice, they act once (RFC 9110, section 9.2.2).
    package static func isIdempotent(_ method: HTTPRequest.Method) -> Bool {
        idempotentMethods.contains(method)
    }

    private static let idempotentMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace, .put, .delete]

    /// The share of the backoff waited, drawn anew for each retry: between half and all ("equal jitter"), so clients
    /// that failed together do not retry together.
    package static func randomJitter() -> Double { Double.random(in: 0.5...1.0) }

    /// The backoff before the retry that follows attempt `attempt` (1 for the first): `baseDelay × 2^(attempt−1)`
    /// capped at ``maxDelay``, times `jitter`.
    package func backoff(beforeRetry attempt: Int, jitter: Double = RetryRules.randomJitter()) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(baseDelay * (1 << exponent), maxDelay)
        return ceiling * jitter
    }

    /// The wait before retrying after attempt `attempt`, which the caller judged worth another: the backoff, or
    /// `nil` when no attempt is left.
    package func delayBeforeRetry(afterAttempt attempt: Int, jitter: Double = RetryRules.randomJitter()) -> Duration? {
        attempt < maxAttempts ? backoff(beforeRetry: attempt, jitter: jitter) : nil
    }

    /// The wait before retrying a request that got `status` on attempt `attempt`, or `nil` when it is not retried.
    ///
    /// A `Retry-After` on one of ``retryAfterStatuses`` is waited for when it is at most ``maxRetryAfter``; longer,
    /// the request is not retried; unreadable, the backoff applies.
    package func delayBeforeRetry(
        afterStatus status: Int, retryAfter: String?, idempotent: Bool, attempt: Int, now: Date = Date(),
        jitter: Double = RetryRules.randomJitter()
    ) -> Duration? {
        guard retryableStatuses.contains(status), idempotent || nonIdempotentRetries != .none else { return nil }
        guard attempt < maxAttempts else { return nil }
        if retryAfterStatuses.contains(status), let retryAfter, let asked = Self.retryAfterDelay(retryAfter, now: now) {
            return asked <= maxRetryAfter ? asked : nil
        }
        return backoff(beforeRetry: attempt, jitter: jitter)
    }

    /// The wait before retrying a request that failed with `error` on attempt `attempt`, or `nil` when it is not
    /// retried.
    package func delayBeforeRetry(
        after error: CurlewError, idempotent: Bool, attempt: Int, jitter: Double = RetryRules.randomJitter()
    ) -> Duration? {
        guard retryableErrors(error) else { return nil }
        switch (idempotent, nonIdempotentRetries) {
        case (true, _), (false, .all): break
        case (false, .statusesAndUnsentFailures): guard Self.reachedNoServer(error) else { return nil }
        case (false, .none): return nil
        }
        return delayBeforeRetry(afterAttempt: attempt, jitter: jitter)
    }

    /// `Retry-After` as delay-seconds or an HTTP date in any of the three forms a recipient must accept
    /// (RFC 9110, section 5.6.7: IMF-fixdate, the obsolete RFC 850 form and C's asctime); `nil` when neither.
    package static func retryAfterDelay(_ value: String, now: Date = Date()) -> Duration? {
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
