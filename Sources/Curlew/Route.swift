public import CurlewEngine
public import HTTPTypes

/// One endpoint and how to talk to it: a value, so routes can live wherever suits the API.
///
/// As statics and closures on an extension (Nikka):
/// ```swift
/// extension Route {
///     static let me = Route(path: "/me")
///     static let user = { @Sendable (id: String) in Route(path: "/user/\(id)") }
///     static let login = { @Sendable (email: String, password: String) in
///         Route(path: "/login", method: .post, params: ["email": email, "password": password])
///     }
/// }
/// let response = try await MyProvider().request(.login("foo@gmail.com", "bar"))
/// ```
/// or as an enum or a struct conforming to ``Routable`` (LKAPI, Konex).
///
/// The path is relative to the provider's ``HTTPProvider/baseURL`` unless it is a full `http(s)://` URL.
/// Characters a path may not hold (spaces, unicode, `#`) are percent-encoded; `%XX` escapes already in it
/// are kept, and the first `?` starts the query: a value that may hold `/`, `?` or `%` goes in through
/// ``segment(_:)``. A query written in the path is kept, and ``parameters`` encoded for the URL are appended to it.
public struct Route: Sendable {
    /// Relative to the provider's base URL, or a full URL.
    public var path: String
    /// The request method; GET unless given.
    public var method: HTTPRequest.Method
    /// Parameters, sent as ``encoding`` says.
    public var parameters: [String: JSONValue]
    /// Header fields of this route; they replace the provider's ``HTTPProvider/additionalHeaders`` of the same
    /// name.
    public var headers: [(name: String, value: String)]
    /// How ``parameters`` travel; `nil` lets the provider decide (``HTTPProvider/defaultEncoding(for:)``).
    public var encoding: ParameterEncoding?
    /// A body of the route's own; parameters then go to the URL whatever the encoding says.
    public var body: RouteBody?
    /// Compresses the body on the way out (`.gzip()`), with `Content-Encoding` set.
    public var bodyCompression: CurlewRequest.BodyCompression?
    /// The longest the whole request may take, retries excluded (each attempt has the full time). The connect and
    /// idle timeouts stay as the provider's client is configured.
    public var timeout: Duration?
    /// Interceptors of this route, applied between the call's and the provider's
    /// (see ``Interceptor`` for the order).
    public var interceptors: [any Interceptor]
    /// Konex's request-level plugins.
    public var plugins: [any Plugin]
    /// Konex's request-level response processors.
    public var responseProcessors: [any ResponseProcessor]
    /// Konex's request-level response validators.
    public var responseValidators: [any ResponseValidator]
    /// The name of the fixture a mock transport serves for this route (LKAPI's `mockData`): the file's name
    /// without `.json`.
    public var mockData: String?

    /// Creates a route; every argument but the path is optional, with Nikka's labels.
    ///
    /// A `multipartForm` (Nikka's label) is the same as `body: .multipart(form)`.
    public init(
        path: String,
        method: HTTPRequest.Method = .get,
        params: Parameters = [:],
        headers: [String: String] = [:],
        encoding: ParameterEncoding? = nil,
        body: RouteBody? = nil,
        multipartForm: MultipartForm? = nil,
        bodyCompression: CurlewRequest.BodyCompression? = nil,
        timeout: Duration? = nil,
        interceptors: [any Interceptor] = [],
        plugins: [any Plugin] = [],
        responseProcessors: [any ResponseProcessor] = [],
        responseValidators: [any ResponseValidator] = [],
        mockData: String? = nil
    ) {
        self.path = path
        self.method = method
        self.parameters = params.mapValues(\.parameterValue)
        self.headers = headers.keys.sorted().map { (name: $0, value: headers[$0]!) }
        self.encoding = encoding
        self.body = multipartForm.map(RouteBody.multipart) ?? body
        self.bodyCompression = bodyCompression
        self.timeout = timeout
        self.interceptors = interceptors
        self.plugins = plugins
        self.responseProcessors = responseProcessors
        self.responseValidators = responseValidators
        self.mockData = mockData
    }

    /// A value percent-encoded to stand as one path segment: everything but RFC 3986's unreserved characters
    /// is escaped, `/`, `?`, `#` and `%` included, so no value can add a segment, start the query or be read as
    /// an escape.
    ///
    /// ```swift
    /// Route(path: "/files/\(Route.segment(name))")   // "a/b?.txt" → "/files/a%2Fb%3F.txt"
    /// ```
    public static func segment(_ value: String) -> String {
        PercentEncoding.encodeComponent(value)
    }

    /// Whether the path is a full URL, which the provider's base URL does not prefix.
    public var isFullURL: Bool {
        // Most paths start with "/": one byte decides.
        guard let first = path.utf8.first, first == UInt8(ascii: "h") || first == UInt8(ascii: "H") else {
            return false
        }
        let scheme = path.prefix(8).lowercased()
        return scheme.hasPrefix("http://") || scheme.hasPrefix("https://")
    }

    /// A copy with one more header field (replacing one of the same name).
    public func adding(header name: String, _ value: String) -> Route {
        var copy = self
        copy.headers.removeAll { $0.name.lowercased() == name.lowercased() }
        copy.headers.append((name: name, value: value))
        return copy
    }
}

/// A route is the ``Routable`` it describes, so every call that takes a `Routable` takes a route as it is:
/// one set of `HTTPProvider` methods serves both.
extension Route: Routable {
    /// The route itself.
    public var route: Route { self }
}

// The requirements a route stores under another name or shape. A member of a protocol extension constrained to
// `Route` is the witness of a requirement, while the route's own stored `parameters` and `headers`, which are
// declared on the type itself, are what a call on a `Route` value finds.
extension Routable where Self == Route {
    /// ``Route/parameters``, as a `Routable` reports them.
    public var parameters: Parameters? { route.parameters.mapValues { $0 as any ParameterConvertible } }

    /// ``Route/headers`` by name, as a `Routable` reports them.
    public var headers: [String: String]? {
        Dictionary(route.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
    }

    /// ``Route/plugins``.
    public var requestPlugins: [any Plugin] { route.plugins }

    /// ``Route/responseProcessors``.
    public var requestResponseProcessors: [any ResponseProcessor] { route.responseProcessors }

    /// ``Route/responseValidators``.
    public var requestResponseValidators: [any ResponseValidator] { route.responseValidators }
}

/// Printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger), a route shows its method,
/// its path as messages name URLs (a password and credential query values replaced), its parameters with the values
/// of credential names (`password`, `access_token`, `api_key`: the names URLs are redacted by, at any depth)
/// replaced, its header fields as ``LoggingInterceptor`` logs them, and its body's kind, never its bytes.
extension Route: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `Route(POST /login, parameters: [email: "a@b.c", password: <redacted>], headers: [], body: JSON)`.
    public var description: String {
        let fields = shownHeaders.map(\.debugDescription).joined(separator: ", ")
        let shownBody = bodySummary.map { ", body: \($0)" } ?? ""
        return "Route(\(method) \(shownPath), parameters: [\(shownParameters.joined(separator: ", "))], "
            + "headers: [\(fields)]\(shownBody))"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the method, path, parameters, header fields and body as ``description`` shows them,
    /// and the rest of the route's settings.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "method": method.rawValue, "path": shownPath,
                "parameters": shownParameters,
                "headers": shownHeaders, "encoding": encoding as Any, "body": bodySummary as Any,
                "timeout": timeout as Any, "interceptors": interceptors, "mockData": mockData as Any,
            ],
            displayStyle: .struct)
    }

    private var shownPath: String { URLRedaction.messages.displaying(path) }

    /// `name: value` per parameter, by name.
    private var shownParameters: [String] {
        parameters.keys.sorted().map { "\($0): \(Self.shown(parameters[$0]!, named: $0))" }
    }

    /// `Name: value` per field, the values logs redact replaced.
    private var shownHeaders: [String] {
        headers.map { header in
            // A name no field can have is refused when the request is built: its value is hidden all the same.
            let isSecret =
                HTTPField.Name(header.name).map {
                    LoggingInterceptor.isSecretByDefault(HTTPField(name: $0, value: header.value))
                }
                ?? true
            return "\(header.name): \(isSecret ? CurlewRequest.redactionMarker : header.value)"
        }
    }

    /// The body's kind and size, never its content.
    private var bodySummary: String? {
        guard let body else { return nil }
        switch body.storage {
        case .bytes(let bytes): return "\(bytes.count) bytes"
        case .encodable: return "JSON"
        case .file(let path): return "file \(path)"
        case .multipart: return "multipart form"
        case .stream: return "stream"
        }
    }

    /// A parameter's value as text, replaced under a credential name (the names ``URLRedaction`` redacts in URLs),
    /// in nested objects too.
    private static func shown(_ value: JSONValue, named name: String) -> String {
        guard !URLRedaction.credentialQueryParameters.contains(name.lowercased()) else {
            return CurlewRequest.redactionMarker
        }
        switch value {
        case .null: return "null"
        case .bool(let bool): return String(bool)
        case .int(let int): return String(int)
        case .double(let double): return String(double)
        case .string(let string): return string.debugDescription
        case .array(let elements): return "[" + elements.map { shown($0, named: "") }.joined(separator: ", ") + "]"
        case .object(let members):
            let shownMembers = members.keys.sorted().map { "\($0): \(shown(members[$0]!, named: $0))" }
            return "[" + shownMembers.joined(separator: ", ") + "]"
        }
    }
}
