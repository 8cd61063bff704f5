public import CurlewEngine
public import Foundation
public import HTTPTypes

/// How an API behaves: where it lives, what every request carries, what counts as an error, and what runs
/// around each request. Only ``baseURL`` is required.
///
/// ```swift
/// struct MyProvider: HTTPProvider {
///     let baseURL = "https://my-website.com/api"
///     let additionalHeaders = ["Locale": "en-US"]
///     let additionalParameters: Parameters = ["token": "d71106a0-dd44-4092-a72e"]
/// }
/// let friends = try await MyProvider().request(Route(path: "/me/friends")).json()
/// ```
///
/// Every provider runs on ``transport``, which is ``CurlewClient/shared`` unless you say otherwise: one
/// connection pool for the process, never a client per request.
public protocol HTTPProvider: Sendable {
    /// The URL relative route paths are appended to, for example `https://api.example.com/v1`.
    var baseURL: String { get }
    /// Header fields every request to the provider's origins carries (see ``credentialOrigins``); a route's own
    /// fields of the same name win.
    var additionalHeaders: [String: String] { get }
    /// Parameters every request to the provider's origins carries (see ``credentialOrigins``), encoded with the
    /// route's; a route's own of the same name win.
    var additionalParameters: Parameters { get }
    /// Origins besides the ``baseURL``'s (scheme, host and port) that get what the provider adds: its
    /// ``additionalHeaders`` and ``additionalParameters``, and what its and the global interceptors that attach
    /// credentials (``Interceptor/attachesCredentials``) add. A route with a full URL on any other origin, or a
    /// request made by hand for one, gets none of it, as a redirect to another origin gets no credentials; the
    /// route's and the call's own headers and interceptors still apply. A request an interceptor moves to another
    /// origin keeps only the credential fields and credential query parameters (`access_token`, `api_key`) the
    /// call's and the route's interceptors set, and the route's own parameters: the ``additionalParameters`` leave
    /// its query, and the JSON or form body they were encoded into if it still carries that body, and the base URL's
    /// user-info leaves its URL. Default: none.
    var credentialOrigins: [String] { get }
    /// What requests run on. Default: ``CurlewClient/shared``.
    var transport: any HTTPTransport { get }
    /// Interceptors of every request of this provider (see ``Interceptor`` for the order of the four levels).
    var interceptors: [any Interceptor] { get }
    /// Konex's client-level plugins.
    var plugins: [any Plugin] { get }
    /// Konex's client-level response processors.
    var responseProcessors: [any ResponseProcessor] { get }
    /// Konex's client-level response validators.
    var responseValidators: [any ResponseValidator] { get }
    /// Decodes bodies in ``RouteResponse/decode(_:decoder:)``.
    var jsonDecoder: JSONDecoder { get }
    /// Encodes ``RouteBody/json(_:)`` bodies.
    var jsonEncoder: JSONEncoder { get }
    /// How arrays in URL and form parameters are written. Default: ``ArrayEncoding/brackets``.
    var arrayEncoding: ArrayEncoding { get }
    /// The most attempts one call makes, retries included, unless one of the call's interceptors asks for more
    /// (``Interceptor/requestedAttempts``, such as ``RetryPolicy``'s `maxAttempts`): a call's bound is the
    /// largest of them, so no interceptor can loop forever and none is silently cut short. Default: 3.
    var maxAttempts: Int { get }

    /// The encoding of routes that name none: JSON for POST, PUT and PATCH, URL for the others.
    func defaultEncoding(for method: HTTPRequest.Method) -> ParameterEncoding
    /// Whether a status is a success. Default: 2xx.
    func isAcceptable(_ status: HTTPResponse.Status) -> Bool
    /// Turns any response, whatever its status, into your own error by throwing it: a 200 whose body says
    /// "error", as Deezer answers. The caller gets ``ProviderError/validation(_:_:)`` with your error inside.
    func validate(_ response: RouteResponse) throws
    /// Called with every error before the caller gets it. Return `false` to stop there (sign out on a 401, say):
    /// the caller then gets ``ProviderError/stopped(_:)``, so it always gets an answer. Decoding failures of
    /// `requestObject` and `requestArray` come here too; a `decode` you call on a response yourself does not.
    func shouldContinue(with error: ProviderError) -> Bool
}

extension HTTPProvider {
    public var additionalHeaders: [String: String] { [:] }
    public var additionalParameters: Parameters { [:] }
    public var credentialOrigins: [String] { [] }
    public var transport: any HTTPTransport { CurlewClient.shared }
    public var interceptors: [any Interceptor] { [] }
    public var plugins: [any Plugin] { [] }
    public var responseProcessors: [any ResponseProcessor] { [] }
    public var responseValidators: [any ResponseValidator] { [] }
    public var jsonDecoder: JSONDecoder { ProviderDefaults.jsonDecoder }
    public var jsonEncoder: JSONEncoder { ProviderDefaults.jsonEncoder }
    public var arrayEncoding: ArrayEncoding { .brackets }
    public var maxAttempts: Int { 3 }

    public func defaultEncoding(for method: HTTPRequest.Method) -> ParameterEncoding {
        switch method {
        case .post, .put, .patch: .json
        default: .url
        }
    }

    public func isAcceptable(_ status: HTTPResponse.Status) -> Bool {
        status.kind == .successful
    }

    public func validate(_ response: RouteResponse) throws {}

    public func shouldContinue(with error: ProviderError) -> Bool { true }
}

/// The provider for routes with full URLs, when no API-wide behaviour is needed (Nikka's `DefaultProvider`).
///
/// ```swift
/// let user = try await DefaultProvider.request(Route(path: "https://my-website.com/api/user/1")).json()
/// ```
/// A relative path is refused with ``ProviderError/invalidRoute(_:)``, rather than sent somewhere else.
///
/// With no base URL it has no origin of its own: its interceptors that attach credentials
/// (``Interceptor/attachesCredentials``) apply only to the `credentialOrigins` it is given. Authentication for one
/// call goes with that call's interceptors instead.
public struct DefaultProvider: HTTPProvider {
    /// Empty: routes must carry full URLs.
    public let baseURL = ""
    /// What the requests run on.
    public let transport: any HTTPTransport
    /// The provider-level interceptors.
    public let interceptors: [any Interceptor]
    /// The origins its credential-attaching interceptors apply to.
    public let credentialOrigins: [String]

    /// A provider on `transport` (the shared engine client by default) with `interceptors`, whose credentials go
    /// to `credentialOrigins` only.
    public init(
        transport: any HTTPTransport = CurlewClient.shared, interceptors: [any Interceptor] = [],
        credentialOrigins: [String] = []
    ) {
        self.transport = transport
        self.interceptors = interceptors
        self.credentialOrigins = credentialOrigins
    }

    /// Sends a route with a full URL on the shared engine client.
    @discardableResult
    public static func request(
        _ route: Route, interceptors: [any Interceptor] = []
    ) async throws(ProviderError) -> RouteResponse {
        try await DefaultProvider().request(route, interceptors: interceptors)
    }
}
