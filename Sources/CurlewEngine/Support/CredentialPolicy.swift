import CLibCurl
package import HTTPTypes

/// The one rule for credentials and redirects, owned by the engine: a request's credentials go only to its own
/// origin (scheme, host and port).
///
/// Withheld from a redirect to another origin, and so never sent over http after https: `Authorization`,
/// `Cookie`, `Proxy-Authorization`, `X-Amz-Security-Token` (the session token of temporary AWS credentials, which
/// S3 clients send as a header), and any field the caller marks sensitive
/// with `HTTPField.indexingStrategy = .disallow` (HTTP/2's "never index", the marker swift-http-types has for secrets).
/// Credentials in the URL's user-info are libcurl's: it sends them only to the original host, scheme and port.
///
/// The route layer (`Curlew`) applies the same rule to what a provider adds to a route with a full URL.
package enum CredentialPolicy {
    /// The fields withheld whatever their indexing strategy.
    static let credentialFields: [HTTPField.Name] = [
        .authorization, .cookie, .proxyAuthorization, HTTPField.Name("X-Amz-Security-Token")!,
    ]

    /// Whether `field` is withheld from other origins.
    package static func isCredential(_ field: HTTPField) -> Bool {
        field.indexingStrategy == .disallow || credentialFields.contains(field.name)
    }

    /// Whether a request to `original` may carry its credentials to `target`: the same scheme, host and port
    /// (default ports made explicit, host names compared without case). Anything libcurl cannot parse is another
    /// origin.
    package static func mayCarryCredentials(from original: String, to target: String) -> Bool {
        guard let from = Origin(original), let to = Origin(target) else { return false }
        return from == to
    }

    /// A URL's scheme, host and port as libcurl's parser reads them: what credentials are tied to, and what an
    /// upload journal's records are about.
    package struct Origin: Equatable {
        let scheme: String
        let host: String
        let port: String

        /// Nil for a URL libcurl cannot parse or without a host.
        package init?(_ url: String) {
            guard let handle = curl_url() else { return nil }
            defer { curl_url_cleanup(handle) }
            guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
            func part(_ which: CURLUPart, _ flags: UInt32 = 0) -> String? {
                var pointer: UnsafeMutablePointer<CChar>?
                guard curl_url_get(handle, which, &pointer, flags) == CURLUE_OK, let pointer else { return nil }
                defer { curl_free(pointer) }
                return String(cString: pointer)
            }
            guard let scheme = part(CURLUPART_SCHEME), let host = part(CURLUPART_HOST),
                let port = part(CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT))
            else { return nil }
            self.scheme = scheme.lowercased()
            self.host = host.lowercased()
            self.port = port
        }

        /// `scheme://host:port`, the scheme and host lower-cased and the port always written: how ``PoolStatistics``
        /// names an origin.
        package var key: String { "\(scheme)://\(host):\(port)" }
    }
}
