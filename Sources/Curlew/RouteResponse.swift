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
    enum HeaderStorage: Sendable {
        case fields(HTTPFields)
        /// Kept unparsed until asked for: most callers never read the headers of a response they decode.
        case engine(CurlewResponse)
    }

    /// The status of the final response (after redirects).
    public let status: HTTPResponse.Status
    /// The body, decompressed.
    public var body: [UInt8]
    /// The engine's timings and connection facts; `nil` for responses a mock made.
    public let metrics: TransferMetrics?
    /// The URL of the final response.
    public let url: String
    /// The request as it was sent, after every request interceptor.
    public internal(set) var request: CurlewRequest
    private var headerStorage: HeaderStorage
    /// The decoder ``decode(_:decoder:)`` uses unless told otherwise: the provider's.
    let jsonDecoder: JSONDecoder

    /// Creates a response, as mock transports and response interceptors do.
    public init(
        status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: [UInt8] = [],
        metrics: TransferMetrics? = nil, url: String, request: CurlewRequest
    ) {
        self.status = status
        self.headerStorage = .fields(headerFields)
        self.body = body
        self.metrics = metrics
        self.url = url
        self.request = request
        self.jsonDecoder = ProviderDefaults.jsonDecoder
    }

    init(engineResponse: CurlewResponse, request: CurlewRequest) {
        self.status = engineResponse.status
        self.headerStorage = .engine(engineResponse)
        self.body = engineResponse.body
        self.metrics = engineResponse.metrics
        self.url = engineResponse.url
        self.request = request
        self.jsonDecoder = ProviderDefaults.jsonDecoder
    }

    private init(copying response: RouteResponse, decoder: JSONDecoder) {
        self.status = response.status
        self.headerStorage = response.headerStorage
        self.body = response.body
        self.metrics = response.metrics
        self.url = response.url
        self.request = response.request
        self.jsonDecoder = decoder
    }

    func with(decoder: JSONDecoder) -> RouteResponse {
        decoder === jsonDecoder ? self : RouteResponse(copying: self, decoder: decoder)
    }

    /// The header fields; names compare case-insensitively (`headerFields[.contentType]`,
    /// `headerFields[HTTPField.Name("x-custom")!]`).
    public var headerFields: HTTPFields {
        get {
            switch headerStorage {
            case .fields(let fields): fields
            case .engine(let response): response.headerFields
            }
        }
        set { headerStorage = .fields(newValue) }
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
