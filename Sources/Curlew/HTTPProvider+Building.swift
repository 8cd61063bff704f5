public import CurlewEngine
import Foundation
import HTTPTypes

extension HTTPProvider {
    /// The engine request a route becomes before any interceptor sees it.
    ///
    /// - Throws: ``ProviderError/invalidRoute(_:)``.
    public func makeRequest(for route: Route) throws(ProviderError) -> CurlewRequest {
        try buildRequest(for: route).request
    }

    /// Whether what the provider adds (``additionalHeaders``, ``additionalParameters``, credential-attaching
    /// interceptors) may go to `url`: the engine's rule for redirects (`CredentialPolicy`), with the base URL and
    /// ``credentialOrigins`` as the request's own origins.
    func sharesCredentials(with url: String) -> Bool {
        // Under the base URL (at a path boundary) is its origin, whatever libcurl's URL parser makes of the scheme
        // (`http+unix://` is not one it parses).
        Self.isUnder(baseURL, url) || CredentialPolicy.mayCarryCredentials(from: baseURL, to: url)
            || credentialOrigins.contains { CredentialPolicy.mayCarryCredentials(from: $0, to: url) }
    }

    private static func isUnder(_ base: String, _ url: String) -> Bool {
        guard !base.isEmpty, url.hasPrefix(base) else { return false }
        if base.hasSuffix("/") || url.count == base.count { return true }
        let next = url[url.index(url.startIndex, offsetBy: base.count)]
        return next == "/" || next == "?" || next == "#"
    }

    /// The request a route becomes, and whether it goes to one of the provider's origins. A relative path always
    /// does (it is appended to the base URL, its `//`, `@` and `:` encoded or kept in the path); only a full URL is
    /// compared.
    func buildRequest(for route: Route) throws(ProviderError) -> (request: CurlewRequest, sharesCredentials: Bool) {
        var url = try absoluteURL(for: route)
        let sharesCredentials = !route.isFullURL || self.sharesCredentials(with: url)
        var parameters = route.parameters
        let shared = sharesCredentials ? additionalParameters : [:]
        if !shared.isEmpty {
            for (key, value) in shared where parameters[key] == nil {
                parameters[key] = value.parameterValue
            }
        }
        let encoding = route.body != nil ? .url : (route.encoding ?? defaultEncoding(for: route.method))
        if encoding != .url, route.method == .get || route.method == .head {
            let path = URLRedaction.messages.redact(route.path)
            throw .invalidRoute("\(route.method) \(path) cannot carry \(encoding) parameters in a body")
        }

        if encoding == .url, !parameters.isEmpty {
            url += (url.contains("?") ? "&" : "?") + QueryEncoder.encode(parameters, arrays: arrayEncoding)
        }

        var request: CurlewRequest
        do {
            request = try ValidatedRequestCache.request(for: url)
            request.method = route.method
            let provided = sharesCredentials ? additionalHeaders : [:]
            if !provided.isEmpty {
                // Marked as secrets (API keys live here): a redirect to another origin does not get them either.
                for name in provided.keys.sorted() { try request.setCredentialHeader(name, provided[name]!) }
            }
            for header in route.headers { try request.setHeader(header.name, header.value) }
        } catch let error as CurlewError {
            throw .invalidRoute(error.detail)
        } catch {
            throw .invalidRoute(String(describing: error))
        }

        var contentType: String?
        if let body = route.body {
            contentType = body.contentType
            switch body.storage {
            case .bytes(let bytes):
                request.body = .bytes(bytes)
            case .encodable(let encode):
                do {
                    request.body = .bytes(try encode(jsonEncoder))
                } catch {
                    throw .invalidRoute("the JSON body did not encode: \(error)")
                }
            case .file(let path):
                request.body = .file(.path(path))
            case .multipart(let form):
                request.body = .multipart(form)
            case .stream(let stream):
                request.body = .stream(stream)
            }
        } else if !parameters.isEmpty, let encoded = try parameterBody(parameters, encoding: encoding) {
            request.body = .bytes(encoded.bytes)
            contentType = encoded.contentType
        }
        if let contentType, request.headerFields[.contentType] == nil {
            request.headerFields[.contentType] = contentType
        }
        request.bodyCompression = route.bodyCompression
        if let timeout = route.timeout {
            // Only the total changes: the engine keeps the client's connect and idle timeouts.
            request.timeouts.total = timeout
        }
        return (request, sharesCredentials)
    }

    /// `parameters` as the body `encoding` makes of them, with its content type; `nil` for ``ParameterEncoding/url``,
    /// which puts them in the query.
    private func parameterBody(
        _ parameters: [String: JSONValue], encoding: ParameterEncoding
    ) throws(ProviderError) -> (bytes: [UInt8], contentType: String)? {
        switch encoding.storage {
        case .json:
            do {
                return (Array(try ProviderDefaults.parameterEncoder.encode(parameters)), "application/json")
            } catch {
                throw .invalidRoute("the parameters did not encode as JSON: \(error)")
            }
        case .form:
            return (
                Array(QueryEncoder.encode(parameters, arrays: arrayEncoding).utf8),
                "application/x-www-form-urlencoded"
            )
        case .url:
            return nil
        }
    }

    /// The body ``buildRequest(for:)`` gives `route` with the provider's ``additionalParameters`` left out, in the
    /// same encoding (`{}` or an empty form when the route has no parameters of its own; one named as one of the
    /// provider's is left out too), for a request an
    /// interceptor moves off the provider's origins; `nil` when the body it builds holds none of them (a route with
    /// a body of its own, URL encoding, no additional parameters, a full URL on another origin).
    func bodyWithoutAdditionalParameters(for route: Route) throws(ProviderError) -> [UInt8]? {
        let encoding = route.encoding ?? defaultEncoding(for: route.method)
        guard route.body == nil, encoding != .url, !additionalParameters.isEmpty else { return nil }
        if route.isFullURL, !sharesCredentials(with: try absoluteURL(for: route)) { return nil }
        // A route's own parameter named as one of the provider's is left out too, as it is from the query: the
        // name says it is the provider's kind of credential.
        let names = credentialParameterNames
        let own = route.parameters.filter { !names.contains($0.key.lowercased()) }
        return try parameterBody(own, encoding: encoding)?.bytes
    }

    private func absoluteURL(for route: Route) throws(ProviderError) -> String {
        if route.isFullURL {
            return Self.encodingPathAndQuery(ofFullURL: route.path)
        }
        guard !baseURL.isEmpty else {
            throw .invalidRoute(
                "\(URLRedaction.messages.redact(route.path)) is relative and the provider has no base URL")
        }
        let base = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        let path =
            route.path.isEmpty || route.path.hasPrefix("/") || route.path.hasPrefix("?")
            ? route.path : "/" + route.path
        return base + Self.encodingPathAndQuery(path)
    }

    private static func encodingPathAndQuery(ofFullURL url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let afterScheme = url[schemeEnd.upperBound...]
        guard let pathStart = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return url }
        return String(url[..<pathStart]) + encodingPathAndQuery(String(url[pathStart...]))
    }

    private static func encodingPathAndQuery(_ pathAndQuery: String) -> String {
        guard let questionMark = pathAndQuery.firstIndex(of: "?") else {
            return PercentEncoding.encodePath(pathAndQuery)
        }
        return PercentEncoding.encodePath(String(pathAndQuery[..<questionMark])) + "?"
            + PercentEncoding.encodeQuery(String(pathAndQuery[pathAndQuery.index(after: questionMark)...]))
    }
}
