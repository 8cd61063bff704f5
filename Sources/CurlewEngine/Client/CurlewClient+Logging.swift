import Logging
import Synchronization

extension CurlewClient {
    /// Runs a request with debug-level events on `logger`, each with the request's id in its metadata
    /// (`curlew-request-id`, as AsyncHTTPClient's `ahc-request-id`): the request going out, the response (status,
    /// time, connection reused or new, redirects followed), and failures (timeouts by kind). The URL is logged
    /// without credentials and header fields are never logged. Nothing of this runs for a request without a
    /// logger (neither ``Configuration/logger`` nor ``CurlewRequest/logger``).
    nonisolated(nonsending) func runLogged(
        _ request: CurlewRequest, logger: Logger, sink: ResponseSink, box: TransferBox?
    ) async throws -> CurlewResponse {
        var logger = logger
        logger[metadataKey: "curlew-request-id"] = "\(RequestIDs.next())"
        let target = RequestTarget(url: request.url)
        logger.debug(
            "sending request",
            metadata: ["http.request.method": "\(request.method.rawValue)", "url.full": "\(target.redactedURL)"])
        do {
            let response = try await runTracedIfEnabled(request, sink: sink, box: box)
            let metrics = response.metrics
            if metrics.redirectCount > 0 {
                logger.debug(
                    "followed redirects",
                    metadata: [
                        "curlew.redirect.count": "\(metrics.redirectCount)",
                        "url.final": "\(RequestTarget(url: response.url).redactedURL)",
                    ])
            }
            logFreshConnectionRetries(response.metrics, to: logger)
            logger.debug(
                "received response",
                metadata: [
                    "http.response.status_code": "\(response.status.code)",
                    "curlew.connection.reused": "\(metrics.reusedConnection)",
                    "curlew.connection.local_port": "\(metrics.localPort)",
                    "curlew.duration": "\(metrics.total)",
                ])
            return response
        } catch let error as CurlewError {
            if let metrics = error.metrics { logFreshConnectionRetries(metrics, to: logger) }
            if let kind = error.code.timeoutKind {
                logger.debug("request timed out", metadata: ["curlew.timeout": "\(kind.name)"])
            } else {
                logger.debug("request failed", metadata: ["error.type": "\(error.code)"])
            }
            throw error
        } catch {
            logger.debug("request failed", metadata: ["error.type": "\(type(of: error))"])
            throw error
        }
    }
}

/// Process-wide request ids: small numbers, unique within the process, cheap to make.
enum RequestIDs {
    private static let counter = Atomic<UInt64>(0)

    static func next() -> UInt64 {
        counter.wrappingAdd(1, ordering: .relaxed).newValue
    }
}

/// A request the engine sent once more because its pooled connection was dead or dirty (design note 0007).
private func logFreshConnectionRetries(_ metrics: TransferMetrics, to logger: Logger) {
    guard metrics.freshConnectionRetries > 0 else { return }
    logger.debug(
        "retried on a fresh connection",
        metadata: ["curlew.connection.fresh_retries": "\(metrics.freshConnectionRetries)"])
}
