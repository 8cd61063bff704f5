import HTTPTypes
public import Instrumentation
import Tracing

extension CurlewClient {
    /// The tracer bootstrapped with `InstrumentationSystem`, or `nil` when none was (the no-op tracer), so that
    /// an untraced client does no tracing work at all.
    static var bootstrappedTracer: (any Tracer)? {
        let tracer = InstrumentationSystem.tracer
        return tracer is NoOpTracer ? nil : tracer
    }

    /// Runs a request inside a client span, following OpenTelemetry's HTTP client conventions.
    ///
    /// The span is a child of the task's `ServiceContext`; its context goes out in the request's header fields as
    /// the tracer propagates it (`traceparent` with a W3C propagator). It ends when the caller's part is done:
    /// the whole response for ``execute(_:)`` and ``download(_:to:)``, the head for ``stream(_:bufferLimit:)``.
    /// A 5xx status or a transport failure sets its status to error.
    nonisolated(nonsending) func runTraced(
        _ request: CurlewRequest, sink: ResponseSink, box: TransferBox?, tracer: any Tracer
    ) async throws -> CurlewResponse {
        let parent = ServiceContext.current ?? .topLevel
        let span = tracer.startSpan(request.method.rawValue, context: parent, ofKind: .client)
        defer { span.end() }
        let target = RequestTarget(url: request.url)
        span.attributes["http.request.method"] = request.method.rawValue
        span.attributes["url.full"] = target.redactedURL
        span.attributes["server.address"] = target.host
        span.attributes["server.port"] = target.port
        if let resendCount = parent[HTTPResendCountKey.self], resendCount > 0 {
            span.attributes["http.request.resend_count"] = resendCount
        }

        var traced = request
        tracer.inject(span.context, into: &traced.headerFields, using: HTTPFieldsInjector())
        do {
            let response = try await runUntraced(traced, sink: sink, box: box)
            span.attributes["http.response.status_code"] = response.status.code
            span.attributes["http.request.body.size"] = Int(response.metrics.bytesSent)
            span.attributes["http.response.body.size"] = Int(response.metrics.bytesReceived)
            if let version = response.metrics.httpVersion.protocolVersion {
                span.attributes["network.protocol.version"] = version
            }
            if response.status.kind == .serverError {
                span.attributes["error.type"] = String(response.status.code)
                span.setStatus(SpanStatus(code: .error))
            }
            return response
        } catch {
            if let curlewError = error as? CurlewError {
                span.attributes["error.type"] = "\(curlewError.code)"
                if let metrics = curlewError.metrics {
                    span.attributes["http.request.body.size"] = Int(metrics.bytesSent)
                }
            } else {
                span.attributes["error.type"] = String(describing: type(of: error))
            }
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }
}

/// How many times the request was sent before this attempt (OpenTelemetry's `http.request.resend_count`): a
/// retrying caller (the route layer's pipeline) puts it in the task's `ServiceContext` around each retry, and the
/// client span of that attempt carries it.
public enum HTTPResendCountKey: ServiceContextKey {
    public typealias Value = Int
    public static var nameOverride: String? { "http.request.resend_count" }
}

/// Writes propagation fields (for example `traceparent`) into a request's header fields, replacing any of the
/// same name.
struct HTTPFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout HTTPFields) {
        guard let name = HTTPField.Name(key) else { return }
        carrier[name] = value
    }
}

/// The parts of a validated URL a span names: host, port, and the URL without credentials.
struct RequestTarget {
    let redactedURL: String
    let host: String
    let port: Int

    init(url: String) {
        let parts = URLParts(url)
        let scheme = parts.scheme?.lowercased() ?? "http"
        var authority = parts.authority
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host = Substring(authority)
        var port = scheme == "https" ? 443 : 80
        if let bracketEnd = authority.lastIndex(of: "]") {
            host = authority[authority.startIndex...bracketEnd]
            let afterBracket = authority[authority.index(after: bracketEnd)...]
            if afterBracket.hasPrefix(":"), let explicit = Int(afterBracket.dropFirst()) { port = explicit }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            if let explicit = Int(authority[authority.index(after: colon)...]) { port = explicit }
        }
        // Credentials never reach a span or a log record: OpenTelemetry's url.full keeps their place as REDACTED.
        self.redactedURL = URLRedaction.openTelemetry.redact(url)
        self.host = String(host)
        self.port = port
    }
}

extension TransferMetrics.HTTPVersion {
    /// OpenTelemetry's `network.protocol.version`.
    var protocolVersion: String? {
        switch self {
        case .http1_0: "1.0"
        case .http1_1: "1.1"
        case .http2: "2"
        case .http3: "3"
        case .unknown: nil
        }
    }
}
