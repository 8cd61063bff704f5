public import HTTPTypes

/// An endpoint described by a type of your own: an enum of an API's endpoints (LKAPI's `Routable`), or a
/// struct per request (Konex's `KonexRequest`). Only ``path`` is required.
///
/// ``Route`` conforms too, so every provider method that takes a `Routable` takes a route as it is.
///
/// ```swift
/// enum Router: Routable {
///     case login(email: String, password: String)
///     case user(id: String)
///
///     var method: HTTPRequest.Method {
///         switch self {
///         case .login: .post
///         case .user: .get
///         }
///     }
///     var path: String {
///         switch self {
///         case .login: "/sessions"
///         case .user(let id): "/users/\(id)"
///         }
///     }
///     var parameters: Parameters? {
///         switch self {
///         case .login(let email, let password): ["email": email, "password": password]
///         case .user: nil
///         }
///     }
///     var mockData: String? { self.isLogin ? "login" : nil }
/// }
/// let session = try await provider.request(Router.login(email: "a@b.c", password: "x")).decode(Session.self)
/// ```
public protocol Routable: Sendable {
    /// Relative to the provider's base URL, or a full URL.
    var path: String { get }
    /// Default: GET.
    var method: HTTPRequest.Method { get }
    /// Default: none.
    var parameters: Parameters? { get }
    /// Default: none.
    var headers: [String: String]? { get }
    /// Default: `nil`, the provider decides.
    var encoding: ParameterEncoding? { get }
    /// Default: none.
    var body: RouteBody? { get }
    /// Default: none.
    var timeout: Duration? { get }
    /// Default: none.
    var interceptors: [any Interceptor] { get }
    /// Konex's `requestPlugins`. Default: none.
    var requestPlugins: [any Plugin] { get }
    /// Konex's `requestResponseProcessors`. Default: none.
    var requestResponseProcessors: [any ResponseProcessor] { get }
    /// Konex's `requestResponseValidators`. Default: none.
    var requestResponseValidators: [any ResponseValidator] { get }
    /// LKAPI's `mockData`: the fixture a mock transport serves. Default: none.
    var mockData: String? { get }
    /// The route these properties describe; rarely worth replacing.
    var route: Route { get }
}

extension Routable {
    public var method: HTTPRequest.Method { .get }
    public var parameters: Parameters? { nil }
    public var headers: [String: String]? { nil }
    public var encoding: ParameterEncoding? { nil }
    public var body: RouteBody? { nil }
    public var timeout: Duration? { nil }
    public var interceptors: [any Interceptor] { [] }
    public var requestPlugins: [any Plugin] { [] }
    public var requestResponseProcessors: [any ResponseProcessor] { [] }
    public var requestResponseValidators: [any ResponseValidator] { [] }
    public var mockData: String? { nil }

    public var route: Route {
        Route(
            path: path, method: method, params: parameters ?? [:], headers: headers ?? [:], encoding: encoding,
            body: body, timeout: timeout, interceptors: interceptors, plugins: requestPlugins,
            responseProcessors: requestResponseProcessors, responseValidators: requestResponseValidators,
            mockData: mockData)
    }

    /// Sends this route with `provider` (LKAPI's `Router.login(…).request(…)`).
    public func request(with provider: some HTTPProvider) async throws(ProviderError) -> RouteResponse {
        try await provider.request(route)
    }
}
