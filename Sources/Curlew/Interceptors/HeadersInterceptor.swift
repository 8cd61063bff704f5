public import CurlewEngine

/// Sets header fields on every request it adapts, replacing fields of the same name.
public struct HeadersInterceptor: Interceptor {
    /// The fields, in the order they are set.
    public let headers: [(name: String, value: String)]
    /// Whether the fields are credentials (an API key): see ``Interceptor/attachesCredentials``.
    public let attachesCredentials: Bool

    /// Sets `headers` (in name order) on every request; `attachesCredentials` when they are credentials.
    public init(_ headers: [String: String], attachesCredentials: Bool = false) {
        self.headers = headers.keys.sorted().map { (name: $0, value: headers[$0]!) }
        self.attachesCredentials = attachesCredentials
    }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        for header in headers {
            // Credentials are marked never-indexed: withheld from redirects to other origins, redacted in logs.
            if attachesCredentials {
                try request.setCredentialHeader(header.name, header.value)
            } else {
                try request.setHeader(header.name, header.value)
            }
        }
    }
}

/// BothamNetworking's `JSONHeadersRequestInterceptor`: `Accept: application/json`, and
/// `Content-Type: application/json` on requests with a body that have no content type yet.
public struct JSONHeadersInterceptor: Interceptor {
    /// The interceptor; it has no settings.
    public init() {}

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        request.headerFields[.accept] = "application/json"
        if request.body != nil, request.headerFields[.contentType] == nil {
            request.headerFields[.contentType] = "application/json"
        }
    }
}
