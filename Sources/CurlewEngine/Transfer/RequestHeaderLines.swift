import HTTPTypes

extension HTTPFields {
    /// The request's header fields as the lines libcurl sends (`Name: value`, or `Name;` for an empty value),
    /// in order; a function of its own so the fuzz target checks exactly what goes on the wire.
    ///
    /// `Content-Length` and `Transfer-Encoding` are left out: the engine frames the body it sends (as AsyncHTTPClient
    /// does), and libcurl would send a caller's `Content-Length` in place of its own, then the whole body after it,
    /// so that bytes past the stated length reach the server as another request.
    ///
    /// `Proxy-Authorization` is left out too: it goes to proxies only (``forEachProxyHeaderLine(_:)``).
    ///
    /// - Parameter withholdingCredentials: leave out the fields `CredentialPolicy` withholds from other origins.
    func forEachRequestHeaderLine(withholdingCredentials: Bool, _ emit: (String) -> Void) {
        var cookies: [String] = []
        for field in self {
            if field.name == .contentLength || field.name == .transferEncoding || field.name == .proxyAuthorization {
                continue
            }
            if withholdingCredentials && CredentialPolicy.isCredential(field) { continue }
            if field.name == .cookie {
                // http-types keeps each cookie pair as a field of its own; HTTP/1.1 allows one Cookie line
                // (RFC 6265 §5.4), so they go out joined, in order.
                cookies.append(field.value)
                continue
            }
            // "Name:" would make libcurl drop the header; "Name;" is its syntax for an empty value.
            emit(field.value.isEmpty ? "\(field.name.rawName);" : "\(field.name.rawName): \(field.value)")
        }
        if !cookies.isEmpty { emit("Cookie: " + cookies.joined(separator: "; ")) }
    }

    /// The lines only a proxy gets (libcurl's `CURLOPT_PROXYHEADER`): the request's `Proxy-Authorization` fields.
    /// libcurl sends its list of header fields to the server, through a proxy's tunnel too, and this list to the
    /// proxy (on its CONNECT, or with a request it forwards), so a proxy's credentials never reach the server. An
    /// empty one is left out: libcurl would send none and drop the proxy credentials the client was given too.
    func forEachProxyHeaderLine(_ emit: (String) -> Void) {
        for field in self where Self.isProxyHeaderLine(field) {
            emit("\(field.name.rawName): \(field.value)")
        }
    }

    /// Whether ``forEachProxyHeaderLine(_:)`` emits any line.
    var hasProxyHeaderLines: Bool { contains(where: Self.isProxyHeaderLine) }

    private static func isProxyHeaderLine(_ field: HTTPField) -> Bool {
        field.name == .proxyAuthorization && !field.value.isEmpty
    }
}
