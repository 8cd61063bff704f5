public import CurlewEngine
public import Foundation
public import HTTPTypes

/// What a provider returns: the status, the header fields, the body, the transfer's metrics and the request
/// as it was sent (after every interceptor), with one-line helpers to read the body.
///
/// ```swift
/// let user = try await provider.request(.user("42")).decode(User.self)
/// let json = try await provider.request(.friends).json()
/// ```
public struct RouteResponse: Sendable {
    /// What a response arrived with, behind one reference: a response is copied at every step of the pipeline,
    /// and one retain is cheaper than copying (and retaining) a dozen fields each time.
    private final class Head: Sendable {
        /// The engine's response (or one a mock made), whose header block is parsed only when asked for: most
        /// callers never read the headers of a response they decode.
        let response: CurlewResponse
        /// The fields a response made in code was given, kept as they are rather than parsed back.
        let fields: HTTPFields?

        init(response: CurlewResponse, fields: HTTPFields?) {
            self.response = response
            self.fields = fields
        }
    }

    /// The request sent, boxed for the same reason as ``Head``.
    private final class SentRequest: Sendable {
        let request: CurlewRequest
        init(_ request: CurlewRequest) { self.request = request }
    }

    private let head: Head
    private var sent: SentRequest
    private var replacedFields: HTTPFields?
    /// The body, decompressed.
    public var body: [UInt8]
    /// The decoder ``decode(_:decoder:)`` uses unless told otherwise: the provider's.
    let jsonDecoder: JSONDecoder

    /// Creates a response, as mock transports and response interceptors do.
    ///
    /// - Parameter metrics: what the transfer would have measured; all zero unless given.
    public init(
        status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: [UInt8] = [],
        metrics: TransferMetrics = TransferMetrics(), url: String, request: CurlewRequest
    ) {
        let response = CurlewResponse(status: status, body: body, metrics: metrics, url: url)
        self.head = Head(response: response, fields: headerFields)
        self.sent = SentRequest(request)
        self.body = body
        self.jsonDecoder = ProviderDefaults.jsonDecoder
    }

    /// Wraps an engine response (from ``CurlewEngine/CurlewClient``, or one a transport made with
    /// `CurlewResponse(status:headerFields:body:metrics:url:)`) as the answer to `request`.
    public init(_ response: CurlewResponse, request: CurlewRequest) {
        self.head = Head(response: response, fields: nil)
        self.sent = SentRequest(request)
        self.body = response.body
        self.jsonDecoder = ProviderDefaults.jsonDecoder
    }

    private init(copying response: RouteResponse, decoder: JSONDecoder) {
        self.head = response.head
        self.sent = response.sent
        self.replacedFields = response.replacedFields
        self.body = response.body
        self.jsonDecoder = decoder
    }

    func with(decoder: JSONDecoder) -> RouteResponse {
        decoder === jsonDecoder ? self : RouteResponse(copying: self, decoder: decoder)
    }

    /// The status of the final response (after redirects).
    public var status: HTTPResponse.Status { head.response.status }
    /// The engine's timings, sizes and connection facts; a mock transport reports the bytes it served and its
    /// delay as the total, and a response made in code reports what it was given (zeros by default).
    public var metrics: TransferMetrics { head.response.metrics }
    /// The URL of the final response.
    public var url: String { head.response.url }

    /// Whether the response came from the origin its request was sent to (no redirect, or redirects within that
    /// origin), by the engine's rule for credentials on redirects. A redirect chain that left the origin and came
    /// back (``TransferMetrics/leftRequestedOrigin``) does not count: its last request went without the credentials.
    public var isFromRequestedOrigin: Bool {
        guard !metrics.leftRequestedOrigin else { return false }
        return url == request.url || CredentialPolicy.mayCarryCredentials(from: request.url, to: url)
    }

    /// The request as it was sent, after every request interceptor.
    public internal(set) var request: CurlewRequest {
        get { sent.request }
        set { sent = SentRequest(newValue) }
    }

    /// The header fields; names compare case-insensitively (`headerFields[.contentType]`,
    /// `headerFields[HTTPField.Name("x-custom")!]`).
    public var headerFields: HTTPFields {
        get { replacedFields ?? head.fields ?? head.response.headerFields }
        set { replacedFields = newValue }
    }

    /// The value of the first header field named `name` (any case), joined as HTTP allows for repeated fields.
    public func header(_ name: String) -> String? {
        guard let fieldName = HTTPField.Name(name) else { return nil }
        return headerFields[fieldName]
    }
}

extension RouteResponse {
    /// The body as UTF-8 text (invalid sequences replaced).
    public func string() -> String {
        String(decoding: body, as: UTF8.self)
    }

    /// The body as `Data`.
    public func data() -> Data {
        Data(body)
    }

    /// The body parsed as JSON.
    ///
    /// - Throws: ``ProviderError/decoding(_:)`` when the body is not JSON.
    public func json() throws(ProviderError) -> JSONValue {
        try decode(JSONValue.self)
    }

    /// The body decoded as `T` with `decoder`, or with the provider's ``HTTPProvider/jsonDecoder``.
    ///
    /// - Throws: ``ProviderError/decoding(_:)`` with the coding path and the start of the body.
    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder? = nil) throws(ProviderError) -> T {
        do {
            return try (decoder ?? jsonDecoder).decode(T.self, from: Data(body))
        } catch let error as DecodingError {
            throw .decoding(DecodingFailure(type: T.self, error: error, response: self))
        } catch {
            throw .decoding(DecodingFailure(type: T.self, underlying: error, response: self))
        }
    }
}

/// Shared instances, so a provider that keeps the defaults allocates no coder per request.
enum ProviderDefaults {
    static let jsonDecoder = JSONDecoder()
    static let jsonEncoder = JSONEncoder()
    /// Parameters are encoded with sorted keys: the same route gives the same bytes.
    static let parameterEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}
