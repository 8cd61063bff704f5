import Foundation
import HTTPTypes
import Testing

@testable import CurlewEngine

@Suite struct RetryRulesTests {
    private static func error(_ code: CurlewError.Code) -> CurlewError { CurlewError(code: code, detail: "test") }

    /// Every code a transfer can fail with, for tables of decisions.
    private static let allCodes: [CurlewError.Code] = [
        .invalidRequest, .protocolNotAllowed, .dnsFailure, .connectionRefused, .connectFailed, .timeout(.connect),
        .timeout(.waitingForConnection), .timeout(.total), .timeout(.idle), .tls, .tooManyRedirects, .bodyTooLarge,
        .requestBodyFailed,
        .requestBodyNotReplayable, .downloadFailed, .connectionClosed, .invalidResponse, .http2, .cancelled,
        .clientShutdown, .unsupportedLibcurl, .transport,
    ]

    @Test func theRouteLayersBackoffDoublesFrom200MillisecondsUpTo10Seconds() {
        let rules = RetryRules.routeLayer
        #expect(rules.backoff(beforeRetry: 1, jitter: 1) == .milliseconds(200))
        #expect(rules.backoff(beforeRetry: 2, jitter: 1) == .milliseconds(400))
        #expect(rules.backoff(beforeRetry: 6, jitter: 1) == .milliseconds(6400))
        #expect(rules.backoff(beforeRetry: 7, jitter: 1) == .seconds(10))
        #expect(rules.backoff(beforeRetry: 1000, jitter: 1) == .seconds(10))
        #expect(rules.backoff(beforeRetry: 1, jitter: 0.5) == .milliseconds(100))
        #expect(rules.backoff(beforeRetry: 0, jitter: 1) == .milliseconds(200))
    }

    @Test func theUploadsBackoffDoublesFrom100MillisecondsUpTo3Point2Seconds() {
        let rules = RetryRules.upload
        #expect(rules.backoff(beforeRetry: 1, jitter: 1) == .milliseconds(100))
        #expect(rules.backoff(beforeRetry: 2, jitter: 1) == .milliseconds(200))
        #expect(rules.backoff(beforeRetry: 6, jitter: 1) == .milliseconds(3200))
        #expect(rules.backoff(beforeRetry: 7, jitter: 1) == .milliseconds(3200))
        #expect(rules.backoff(beforeRetry: 1, jitter: 0.5) == .milliseconds(50))
        // The upload's own formula before the rules were shared: 0.1 s × 2^min(attempt − 1, 5) × jitter.
        for attempt in 1...12 {
            for jitter in [0.5, 0.8, 1.0] {
                let before = Duration.seconds(0.1 * Double(1 << min(max(attempt, 1) - 1, 5)) * jitter)
                let now = rules.backoff(beforeRetry: attempt, jitter: jitter)
                #expect(abs((now - before).nanosecondsApproximately) < 1, "attempt \(attempt), jitter \(jitter)")
            }
        }
    }

    @Test func theJitterIsBetweenHalfAndAllOfTheBackoff() {
        for _ in 0..<200 {
            let jitter = RetryRules.randomJitter()
            #expect(jitter >= 0.5 && jitter <= 1.0)
            let delay = RetryRules.routeLayer.backoff(beforeRetry: 2)
            #expect(delay >= .milliseconds(200) && delay <= .milliseconds(400))
        }
    }

    @Test func theRouteLayerRetriesItsStatusesOfIdempotentRequestsWithinItsAttempts() {
        let rules = RetryRules.routeLayer
        func delay(_ status: Int, idempotent: Bool = true, attempt: Int = 1) -> Duration? {
            rules.delayBeforeRetry(
                afterStatus: status, retryAfter: nil, idempotent: idempotent, attempt: attempt, jitter: 1)
        }
        for status in [429, 502, 503, 504] { #expect(delay(status) == .milliseconds(200), "\(status)") }
        for status in [200, 400, 404, 408, 500, 501] { #expect(delay(status) == nil, "\(status)") }
        #expect(delay(503, attempt: 2) == .milliseconds(400))
        #expect(delay(503, attempt: 3) == nil, "the third attempt is the last")
        #expect(delay(503, idempotent: false) == nil)
        var allMethods = rules
        allMethods.nonIdempotentRetries = .all
        #expect(
            allMethods.delayBeforeRetry(afterStatus: 503, retryAfter: nil, idempotent: false, attempt: 1, jitter: 1)
                == .milliseconds(200))
    }

    @Test func theUploadRetriesItsStatusesWhateverTheMethod() {
        let rules = RetryRules.upload
        for status in [408, 429, 502, 503, 504] {
            for idempotent in [true, false] {
                #expect(
                    rules.delayBeforeRetry(
                        afterStatus: status, retryAfter: nil, idempotent: idempotent, attempt: 1, jitter: 1)
                        == .milliseconds(100), "\(status), idempotent: \(idempotent)")
            }
        }
        #expect(rules.delayBeforeRetry(afterStatus: 500, retryAfter: nil, idempotent: true, attempt: 1) == nil)
        #expect(rules.delayBeforeRetry(afterStatus: 503, retryAfter: nil, idempotent: true, attempt: 3) == nil)
        #expect(
            rules.allowingRetries(5).delayBeforeRetry(
                afterStatus: 503, retryAfter: nil, idempotent: true, attempt: 5, jitter: 1) == .milliseconds(1600))
    }

    @Test func retryAfterIsHonouredOnlyByTheRouteLayerOn429And503UpToItsCap() {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        func delay(_ rules: RetryRules, _ status: Int, _ retryAfter: String) -> Duration? {
            rules.delayBeforeRetry(
                afterStatus: status, retryAfter: retryAfter, idempotent: true, attempt: 1, now: now, jitter: 1)
        }
        let route = RetryRules.routeLayer
        #expect(delay(route, 503, "7") == .seconds(7))
        #expect(delay(route, 429, "Wed, 21 Oct 2015 07:28:30 GMT") == .seconds(30))
        #expect(delay(route, 429, "Wed, 21 Oct 2015 07:27:00 GMT") == .zero, "a date in the past: at once")
        #expect(delay(route, 503, "60") == .seconds(60))
        #expect(delay(route, 503, "61") == nil, "longer than the cap: no retry")
        #expect(delay(route, 503, "soon") == .milliseconds(200), "unreadable: the backoff")
        #expect(delay(route, 502, "7") == .milliseconds(200), "other statuses: the backoff")
        // The upload keeps its own pace.
        #expect(delay(.upload, 503, "7") == .milliseconds(100))
        #expect(delay(.upload, 429, "3600") == .milliseconds(100))
    }

    @Test func theRouteLayerRetriesTransientFailuresOfIdempotentRequests() {
        let retried: Set<CurlewError.Code> = [
            .connectionRefused, .connectFailed, .connectionClosed, .timeout(.connect), .dnsFailure,
            .timeout(.waitingForConnection),
        ]
        for code in Self.allCodes {
            let delay = RetryRules.routeLayer.delayBeforeRetry(
                after: Self.error(code), idempotent: true, attempt: 1, jitter: 1)
            #expect(delay == (retried.contains(code) ? .milliseconds(200) : nil), "\(code)")
            #expect(
                RetryRules.routeLayer.delayBeforeRetry(after: Self.error(code), idempotent: false, attempt: 1) == nil)
        }
        #expect(
            RetryRules.routeLayer.delayBeforeRetry(after: Self.error(.connectionRefused), idempotent: true, attempt: 3)
                == nil)
    }

    /// A redirect's next request can fail before it is sent, but the request the redirect answered reached the
    /// server (a POST answered 303 was acted on): not the failure before sending that makes any request safe to retry.
    @Test func aFailureAfterARedirectOrAnyResponseHeadIsNotUnsent() {
        for code in [CurlewError.Code.timeout(.waitingForConnection), .timeout(.connect), .connectionRefused] {
            let unsent = Self.error(code).with(TransferMetrics())
            #expect(RetryRules.reachedNoServer(unsent), "\(code)")
            #expect(
                RetryRules.upload.delayBeforeRetry(after: unsent, idempotent: false, attempt: 1, jitter: 1)
                    == .milliseconds(100))
            for metrics in [TransferMetrics(redirectCount: 1), TransferMetrics(headerBytesReceived: 120)] {
                let answered = Self.error(code).with(metrics)
                #expect(!RetryRules.reachedNoServer(answered), "\(code)")
                #expect(
                    RetryRules.upload.delayBeforeRetry(after: answered, idempotent: false, attempt: 1, jitter: 1)
                        == nil)
                #expect(
                    RetryRules.upload.delayBeforeRetry(after: answered, idempotent: true, attempt: 1, jitter: 1)
                        == .milliseconds(100), "an idempotent request may go again")
            }
        }
    }

    @Test func theUploadRetriesUnsentFailuresOfEveryRequestAndLostConnectionsOfIdempotentOnes() {
        let unsent: Set<CurlewError.Code> = [
            .connectionRefused, .connectFailed, .dnsFailure, .timeout(.connect), .timeout(.waitingForConnection),
        ]
        let lostMidway: Set<CurlewError.Code> = [.connectionClosed, .timeout(.idle), .timeout(.total), .http2]
        for code in Self.allCodes {
            for idempotent in [true, false] {
                let retried = unsent.contains(code) || (idempotent && lostMidway.contains(code))
                let delay = RetryRules.upload.delayBeforeRetry(
                    after: Self.error(code), idempotent: idempotent, attempt: 1, jitter: 1)
                #expect(delay == (retried ? .milliseconds(100) : nil), "\(code), idempotent: \(idempotent)")
            }
        }
    }

    @Test func anyNumberOfRetriesBecomesAttempts() {
        #expect(RetryRules.upload.maxAttempts == 3, "--retries 2, the default")
        #expect(RetryRules.upload.allowingRetries(0).maxAttempts == 1)
        #expect(RetryRules.upload.allowingRetries(10).maxAttempts == 11)
        #expect(RetryRules.routeLayer.maxAttempts == 3)
        #expect(
            RetryRules.upload.allowingRetries(0).delayBeforeRetry(
                after: Self.error(.connectFailed), idempotent: true, attempt: 1)
                == nil)
    }

    @Test func idempotentMethodsAreThoseRFC9110Names() {
        for method in [HTTPRequest.Method.get, .head, .options, .trace, .put, .delete] {
            #expect(RetryRules.isIdempotent(method), "\(method)")
        }
        for method in [HTTPRequest.Method.post, .patch, .connect, HTTPRequest.Method("PURGE")!] {
            #expect(!RetryRules.isIdempotent(method), "\(method)")
        }
    }
}

extension Duration {
    /// Nanoseconds as a `Double`, for comparing durations computed two ways.
    fileprivate var nanosecondsApproximately: Double {
        Double(components.seconds) * 1e9 + Double(components.attoseconds) / 1e9
    }
}
