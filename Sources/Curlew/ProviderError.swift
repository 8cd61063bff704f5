public import CurlewEngine
public import HTTPTypes

/// The one error a provider throws.
///
/// ```swift
/// do {
///     let track = try await deezer.request(.track(id)).decode(Track.self)
/// } catch .validation(let error as DeezerError, _) {
///     print(error.message)          // "no data", from a 200 with an error body
/// } catch .status(let response) where response.status == .unauthorized {
///     signIn()
/// } catch {
///     print(error)
/// }
/// ```
public enum ProviderError: Error, Sendable, CustomStringConvertible {
    /// The response's status is not acceptable (not 2xx by default); the whole response, body included, is kept.
    case status(RouteResponse)
    /// Your validation turned a response into your own error: the provider's ``HTTPProvider/validate(_:)``,
    /// a ``ResponseValidator``, or an interceptor's ``InterceptorDecision/fail(_:)``.
    case validation(any Error, RouteResponse)
    /// The body could not be decoded into the type asked for.
    case decoding(DecodingFailure)
    /// The request could not be sent or its response not received (the engine's error).
    case transport(CurlewError, request: CurlewRequest)
    /// The calling task was cancelled.
    case cancelled
    /// The route cannot become a request: a JSON body on GET, a header with CR/LF, a URL the engine refuses.
    case invalidRoute(String)
    /// An interceptor or processor threw before there was a response to blame.
    case interceptor(any Error)
    /// The provider's ``HTTPProvider/shouldContinue(with:)`` said to stop on this error (to sign out on a 401,
    /// say); the caller still gets the error, wrapped, so it knows the provider has already acted on it.
    indirect case stopped(ProviderError)

    /// The response the error is about, if one arrived.
    public var response: RouteResponse? {
        switch self {
        case .status(let response), .validation(_, let response): response
        case .decoding(let failure): failure.response
        case .stopped(let error): error.response
        case .transport, .cancelled, .invalidRoute, .interceptor: nil
        }
    }

    /// The HTTP status of ``response``.
    public var status: HTTPResponse.Status? { response?.status }

    /// The error itself, unwrapped from ``stopped(_:)``.
    public var underlying: ProviderError {
        if case .stopped(let error) = self { return error.underlying }
        return self
    }

    public var description: String {
        switch self {
        case .status(let response):
            let excerpt = DecodingFailure.excerpt(of: response.body)
            return "HTTP \(response.status.code) from \(response.request.method) \(response.url)"
                + (excerpt.isEmpty ? "" : ": \(excerpt)")
        case .validation(let error, let response):
            return "validation failed for \(response.request.method) \(response.url): \(error)"
        case .decoding(let failure):
            return failure.description
        case .transport(let error, let request):
            return "\(request.method) \(request.url) failed: \(error)"
        case .cancelled:
            return "cancelled"
        case .invalidRoute(let reason):
            return "invalid route: \(reason)"
        case .interceptor(let error):
            return "an interceptor failed: \(error)"
        case .stopped(let error):
            return "stopped by the provider: \(error)"
        }
    }
}

/// Why a body did not decode: where in the document, what was expected, and what the body looked like.
public struct DecodingFailure: Sendable, CustomStringConvertible {
    /// The type asked for.
    public let type: String
    /// The coding path to the failing value, for example `results[2].id`.
    public let codingPath: String
    /// The decoder's explanation.
    public let reason: String
    /// The first 512 bytes of the body as text.
    public let bodyExcerpt: String
    /// The response whose body failed to decode.
    public let response: RouteResponse

    init(type: Any.Type, error: DecodingError, response: RouteResponse) {
        let context: DecodingError.Context?
        switch error {
        case .typeMismatch(_, let found), .valueNotFound(_, let found), .dataCorrupted(let found):
            context = found
        case .keyNotFound(let key, let found):
            context = DecodingError.Context(
                codingPath: found.codingPath + [key], debugDescription: found.debugDescription)
        @unknown default:
            context = nil
        }
        self.type = String(describing: type)
        self.codingPath = Self.render(context?.codingPath ?? [])
        self.reason = context.map { Self.reason(of: error, context: $0) } ?? String(describing: error)
        self.bodyExcerpt = Self.excerpt(of: response.body)
        self.response = response
    }

    init(type: Any.Type, underlying: any Error, response: RouteResponse) {
        self.type = String(describing: type)
        self.codingPath = ""
        self.reason = String(describing: underlying)
        self.bodyExcerpt = Self.excerpt(of: response.body)
        self.response = response
    }

    public var description: String {
        "could not decode \(type) at \(codingPath.isEmpty ? "the top level" : codingPath): \(reason); body: \(bodyExcerpt)"
    }

    private static func reason(of error: DecodingError, context: DecodingError.Context) -> String {
        switch error {
        case .keyNotFound: "missing key"
        case .valueNotFound(let type, _): "expected \(type), found null"
        case .typeMismatch(let type, _): "expected \(type): \(context.debugDescription)"
        default: context.debugDescription
        }
    }

    private static func render(_ path: [any CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }

    static func excerpt(of body: [UInt8], limit: Int = 512) -> String {
        let text = String(decoding: body.prefix(limit), as: UTF8.self)
        return body.count > limit ? text + "…" : text
    }
}
