public import CurlewEngine
import HTTPTypes
public import Logging

/// Logs each request and its response through swift-log, with credentials redacted.
///
/// `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie` and `X-Amz-Security-Token` values, fields set as
/// secrets (never-indexed) and any names you add are logged as `<redacted>`, and so are a password in the URL
/// (`user:password@host`) and the values of query parameters that usually carry credentials
/// (``defaultRedactedQueryParameters``, and any names you add), such as `access_token` or a presigned URL's
/// `X-Amz-Signature`, in the request's URL and in a response's `Location` and `Content-Location`. So are the values
/// of the provider's ``HTTPProvider/additionalParameters``, which go only to its origins, as credentials do (an
/// `appid` or `client_id`); a route's own parameters of other names are logged as they are. Requests are
/// logged at `requestLevel` (`.debug` by default) with their header fields in the metadata, responses at
/// `responseLevel` (`.info`) with status and duration, transport failures at `.warning`. Bodies are never logged.
///
/// Added globally, it sees requests exactly as sent (see ``Interceptor`` for the order).
public struct LoggingInterceptor: Interceptor {
    /// Header names whose values are never logged.
    public static let defaultRedactedHeaders: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie",
    ]
    /// Whether `field`'s value is a secret wherever the layer shows it (log lines, printed routes and interceptors): its name is
    /// one of ``defaultRedactedHeaders``, or the engine withholds it from other origins (`Authorization`, `Cookie`,
    /// `X-Amz-Security-Token`, fields set as secrets with `CurlewRequest.setCredentialHeader`).
    static func isSecretByDefault(_ field: HTTPField) -> Bool {
        defaultRedactedHeaders.contains(field.name.canonicalName) || CredentialPolicy.isCredential(field)
    }

    /// Header fields whose values are URLs, logged redacted like the request's.
    static let urlValuedHeaders: Set<String> = ["location", "content-location"]
    /// Query parameter names (compared without regard to case) whose values are never logged.
    public static let defaultRedactedQueryParameters: Set<String> = URLRedaction.credentialQueryParameters

    private let logger: Logger
    private let requestLevel: Logger.Level
    private let responseLevel: Logger.Level
    private let redactedHeaders: Set<String>
    /// How URLs are logged: a user-info password and the values of the redacted query parameters replaced.
    private let urlRedaction: URLRedaction

    /// - Parameters:
    ///   - redactedHeaders: header names to redact, in addition to the defaults.
    ///   - redactedQueryParameters: query parameter names to redact, in addition to the defaults.
    public init(
        logger: Logger, requestLevel: Logger.Level = .debug, responseLevel: Logger.Level = .info,
        redactedHeaders: Set<String> = [], redactedQueryParameters: Set<String> = []
    ) {
        self.logger = logger
        self.requestLevel = requestLevel
        self.responseLevel = responseLevel
        self.redactedHeaders = Self.defaultRedactedHeaders.union(redactedHeaders.map { $0.lowercased() })
        self.urlRedaction = .logging(
            queryParameters: Self.defaultRedactedQueryParameters.union(redactedQueryParameters.map { $0.lowercased() }))
    }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        let urls = urlRedaction.redactingAlso(context.credentialParameterNames)
        logger.log(
            level: requestLevel, "→ \(request.method) \(urls.redact(request.url))",
            metadata: [
                "curlew.attempt": "\(context.attempt)",
                "curlew.request.headers": .dictionary(metadata(for: request.headerFields, urls: urls)),
            ])
    }

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    {
        let elapsed = ContinuousClock.now - context.startedAt
        let urls = urlRedaction.redactingAlso(context.credentialParameterNames)
        let url = urls.redact(response.url)
        logger.log(
            level: responseLevel,
            "← \(response.status.code) \(response.request.method) \(url) in \(Self.milliseconds(elapsed)) ms",
            metadata: [
                "curlew.attempt": "\(context.attempt)",
                "curlew.response.headers": .dictionary(metadata(for: response.headerFields, urls: urls)),
                "curlew.response.bytes": "\(response.body.count)",
            ])
        return .pass
    }

    public func intercept(_ error: CurlewError, context: InterceptorContext) async throws -> InterceptorDecision {
        let urls = urlRedaction.redactingAlso(context.credentialParameterNames)
        logger.warning(
            "✕ \(context.route.method) \(urls.redact(context.route.path)): \(error)",
            metadata: ["curlew.attempt": "\(context.attempt)"])
        return .pass
    }

    /// Whole milliseconds, without Foundation's formatters (locale lookups on every response).
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// The URL with a user-info password and the values of credential-carrying query parameters replaced by
    /// `<redacted>`; everything else, encoding included, as it was.
    func redacted(url: String) -> String {
        urlRedaction.redact(url)
    }

    /// The fields as metadata, credentials redacted, and URL-valued fields redacted as `urls` says (the call's
    /// provider's parameters included), the interceptor's own redaction by default.
    func metadata(for fields: HTTPFields, urls: URLRedaction? = nil) -> Logger.Metadata {
        let urls = urls ?? urlRedaction
        var metadata: Logger.Metadata = [:]
        for field in fields {
            let name = field.name.canonicalName
            // The engine's credential list (Authorization, Cookie, X-Amz-Security-Token, never-indexed fields)
            // besides the names given; a redirect's target is a URL like any other.
            let value =
                redactedHeaders.contains(name) || Self.isSecretByDefault(field)
                ? CurlewRequest.redactionMarker
                : Self.urlValuedHeaders.contains(name) ? urls.redact(field.value) : field.value
            if case .string(let existing) = metadata[name] {
                metadata[name] = .string(existing + ", " + value)
            } else {
                metadata[name] = .string(value)
            }
        }
        return metadata
    }
}
