public import CurlewEngine
public import HTTPTypes

/// The one error a provider throws.
///
/// ```swift
/// do {
///     let track = try await deezer.request(.track(id)).decode(Track.self)
/// } catch {
///     switch error.code {
///     case .validation:
///         if let deezer = error.cause as? DeezerError { print(deezer.message) }   // "no data", from a 200
///     case .status where error.status == .unauthorized:
///         signIn()
///     default:
///         print(error)
///     }
/// }
/// ```
///
/// A struct rather than an enum, so that kinds of failure can be added without breaking a caller's `switch`
/// (which therefore ends in `default`), as `CurlewError` does: ``code`` says what went wrong, and the properties
/// hold what came with it (``response``, ``cause``, ``transportError``, ``decodingFailure``, …). Make one with the
/// static function of the code's name: `.status(response)`, `.validation(error, response)`, `.stopped(error)`.
public struct ProviderError: Error, Sendable, CustomStringConvertible {
    /// The failures a caller handles differently.
    ///
    /// Match with `==` or `switch error.code` (ending in `default`); ``name`` is stable and is what logs and
    /// trace spans print.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case status
            case validation
            case decoding
            case transport
            case cancelled
            case invalidRoute
            case interceptor
            case stopped
        }

        private let kind: Kind

        private init(_ kind: Kind) { self.kind = kind }

        /// The response's status is not acceptable (not 2xx by default); ``ProviderError/response`` keeps the
        /// whole response, body included.
        public static let status = Code(.status)
        /// Your validation turned a response into your own error (``ProviderError/cause``): the provider's
        /// ``HTTPProvider/validate(_:)``, a ``ResponseValidator`` or processor, or an interceptor's
        /// ``InterceptorDecision/fail(_:)``.
        public static let validation = Code(.validation)
        /// The body could not be decoded into the type asked for; see ``ProviderError/decodingFailure``.
        public static let decoding = Code(.decoding)
        /// The request could not be sent or its response not received; see ``ProviderError/transportError``.
        public static let transport = Code(.transport)
        /// The calling task was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The route cannot become a request; see ``ProviderError/invalidRouteReason``.
        public static let invalidRoute = Code(.invalidRoute)
        /// An interceptor or processor threw before there was a response to blame; see ``ProviderError/cause``.
        public static let interceptor = Code(.interceptor)
        /// The provider's ``HTTPProvider/shouldContinue(with:)`` said to stop on an error, which
        /// ``ProviderError/stoppedError`` holds.
        public static let stopped = Code(.stopped)

        /// The stable name: the static member's name (`"status"`, `"invalidRoute"`).
        public var name: String {
            switch kind {
            case .status: "status"
            case .validation: "validation"
            case .decoding: "decoding"
            case .transport: "transport"
            case .cancelled: "cancelled"
            case .invalidRoute: "invalidRoute"
            case .interceptor: "interceptor"
            case .stopped: "stopped"
            }
        }

        public var description: String { name }
    }

    /// What came with each kind of failure; `indirect` for the error a stop wraps.
    private indirect enum Storage: Sendable {
        case status(RouteResponse)
        case validation(any Error, RouteResponse)
        case decoding(DecodingFailure)
        case transport(CurlewError, request: CurlewRequest)
        case cancelled
        case invalidRoute(String)
        case interceptor(any Error)
        case stopped(ProviderError)
    }

    private let storage: Storage
    /// The names of the failed call's provider's ``HTTPProvider/additionalParameters`` (lower-case): credentials to
    /// it (API keys such as `appid`), so the URLs ``description`` names redact their values too.
    package private(set) var credentialParameterNames: Set<String> = []

    private init(_ storage: Storage) { self.storage = storage }

    /// This error, as a call of a provider whose ``HTTPProvider/additionalParameters`` are named
    /// `credentialParameterNames` tells it: their values redacted in the URLs it names, and in those of the error
    /// it wraps (``stopped(_:)``).
    package func redacting(_ credentialParameterNames: Set<String>) -> ProviderError {
        guard !credentialParameterNames.isSubset(of: self.credentialParameterNames) else { return self }
        var error =
            if case .stopped(let wrapped) = storage {
                ProviderError(.stopped(wrapped.redacting(credentialParameterNames)))
            } else {
                self
            }
        error.credentialParameterNames = self.credentialParameterNames.union(credentialParameterNames)
        return error
    }

    /// The response's status is not acceptable (not 2xx by default); the whole response, body included, is kept.
    public static func status(_ response: RouteResponse) -> ProviderError { ProviderError(.status(response)) }

    /// Your validation turned a response into your own error: the provider's ``HTTPProvider/validate(_:)``,
    /// a ``ResponseValidator``, or an interceptor's ``InterceptorDecision/fail(_:)``.
    public static func validation(_ error: any Error, _ response: RouteResponse) -> ProviderError {
        ProviderError(.validation(error, response))
    }

    /// The body could not be decoded into the type asked for.
    public static func decoding(_ failure: DecodingFailure) -> ProviderError { ProviderError(.decoding(failure)) }

    /// The request could not be sent or its response not received (the engine's error).
    public static func transport(_ error: CurlewError, request: CurlewRequest) -> ProviderError {
        ProviderError(.transport(error, request: request))
    }

    /// The calling task was cancelled.
    public static let cancelled = ProviderError(.cancelled)

    /// The route cannot become a request: a JSON body on GET, a header with CR/LF, a URL the engine refuses.
    public static func invalidRoute(_ reason: String) -> ProviderError { ProviderError(.invalidRoute(reason)) }

    /// An interceptor or processor threw before there was a response to blame.
    public static func interceptor(_ error: any Error) -> ProviderError { ProviderError(.interceptor(error)) }

    /// The provider's ``HTTPProvider/shouldContinue(with:)`` said to stop on this error (to sign out on a 401,
    /// say); the caller still gets the error, wrapped, so it knows the provider has already acted on it.
    public static func stopped(_ error: ProviderError) -> ProviderError { ProviderError(.stopped(error)) }

    /// What went wrong, for matching.
    public var code: Code {
        switch storage {
        case .status: .status
        case .validation: .validation
        case .decoding: .decoding
        case .transport: .transport
        case .cancelled: .cancelled
        case .invalidRoute: .invalidRoute
        case .interceptor: .interceptor
        case .stopped: .stopped
        }
    }

    /// The response the error is about, if one arrived (through a stop, too).
    public var response: RouteResponse? {
        switch storage {
        case .status(let response), .validation(_, let response): response
        case .decoding(let failure): failure.response
        case .stopped(let error): error.response
        case .transport, .cancelled, .invalidRoute, .interceptor: nil
        }
    }

    /// The HTTP status of ``response``.
    public var status: HTTPResponse.Status? { response?.status }

    /// The error your code threw: a ``Code/validation`` error's (from ``HTTPProvider/validate(_:)``, a validator,
    /// a processor or ``InterceptorDecision/fail(_:)``) or an ``Code/interceptor`` error's; `nil` for the others.
    public var cause: (any Error)? {
        switch storage {
        case .validation(let error, _), .interceptor(let error): error
        default: nil
        }
    }

    /// The engine's error of a ``Code/transport`` failure; `nil` for the others.
    public var transportError: CurlewError? {
        if case .transport(let error, _) = storage { error } else { nil }
    }

    /// The request as it was sent: a ``Code/transport`` failure's, or that of ``response``; `nil` when the call
    /// failed before there was one.
    public var request: CurlewRequest? {
        if case .transport(_, let request) = storage { return request }
        return response?.request
    }

    /// Where and why the body did not decode, for a ``Code/decoding`` failure; `nil` for the others.
    public var decodingFailure: DecodingFailure? {
        if case .decoding(let failure) = storage { failure } else { nil }
    }

    /// Why the route could not become a request, for an ``Code/invalidRoute`` failure; `nil` for the others.
    public var invalidRouteReason: String? {
        if case .invalidRoute(let reason) = storage { reason } else { nil }
    }

    /// The error the provider stopped on, for a ``Code/stopped`` failure; `nil` for the others.
    public var stoppedError: ProviderError? {
        if case .stopped(let error) = storage { error } else { nil }
    }

    /// The error itself, unwrapped from ``stopped(_:)``.
    public var underlying: ProviderError {
        if case .stopped(let error) = storage { return error.underlying }
        return self
    }

    public var description: String {
        let redaction = URLRedaction.messages.redactingAlso(credentialParameterNames)
        switch storage {
        case .status(let response):
            let excerpt = DecodingFailure.excerpt(of: response.body)
            let url = redaction.redact(response.url)
            return "HTTP \(response.status.code) from \(response.request.method) \(url)"
                + (excerpt.isEmpty ? "" : ": \(excerpt)")
        case .validation(let error, let response):
            let url = redaction.redact(response.url)
            return "validation failed for \(response.request.method) \(url): \(error)"
        case .decoding(let failure):
            return failure.description
        case .transport(let error, let request):
            return "\(request.method) \(redaction.redact(request.url)) failed: \(error)"
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

/// An error printed any way (interpolation, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger)
/// shows ``ProviderError/description``, which names URLs with their credentials and the values of the provider's
/// ``HTTPProvider/additionalParameters`` redacted: without a mirror of its own, `dump` would walk into the response
/// and request it holds and print what the description leaves out.
extension ProviderError: CustomDebugStringConvertible, CustomReflectable {
    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the ``code`` and the ``description``; the response, request and cause are read
    /// through their properties.
    public var customMirror: Mirror {
        Mirror(self, children: ["code": code.name, "description": description], displayStyle: .struct)
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
