import CLibCurl
import Foundation

/// Checks a URL before anything is sent: scheme, syntax, and that Swift and libcurl agree on the host.
///
/// A host the two parsers read differently (`http://a.example\@b.example/`, odd escapes, userinfo
/// tricks) is a request-smuggling and SSRF risk: the caller's checks see one host, libcurl connects to another.
///
/// The schemes admitted are `http` and `https`, and `http+unix` and `https+unix` as AsyncHTTPClient spells a
/// request over a Unix domain socket: the socket path percent-encoded as the host
/// (`http+unix://%2Ftmp%2Fnginx.sock/path`). libcurl never sees those two: it gets the same request to
/// `http(s)://localhost` and the socket path (`CURLOPT_UNIX_SOCKET_PATH`).
enum URLValidation {
    /// What a validated URL becomes for libcurl.
    struct Validated {
        /// The http or https URL libcurl is given.
        let transferURL: String
        /// The socket path of an `http+unix` or `https+unix` URL; nil for every other URL.
        let unixSocketPath: String?
    }

    /// The longest socket path the kernel takes (`sun_path` holds 108 bytes with the terminating NUL).
    static let maximumUnixSocketPathBytes = 107

    static func validate(_ url: String) throws -> Validated {
        if let validated = try validateUnixSocketURL(url) { return validated }
        try validateNetworkURL(url)
        return Validated(transferURL: url, unixSocketPath: nil)
    }

    /// An `http+unix` or `https+unix` URL's socket path and the http(s) URL to `localhost` that stands for it; nil
    /// for a URL of another scheme.
    private static func validateUnixSocketURL(_ url: String) throws -> Validated? {
        // A byte comparison first: Foundation's `range(of:)` here cost every request made ~3 % of a load test's
        // CPU (`curlew bench` with a `{{seq}}` template), and almost no URL is a socket's.
        guard startsWithUnixScheme(url) else { return nil }
        let parts = URLParts(url)
        guard let scheme = parts.scheme?.lowercased(), scheme == "http+unix" || scheme == "https+unix" else {
            return nil
        }
        let encodedPath = parts.authority
        guard !encodedPath.isEmpty, let socketPath = PercentEncoding.decode(encodedPath), !socketPath.isEmpty else {
            throw CurlewError.invalidRequest(
                "\(scheme) URLs name the socket path, percent-encoded, as their host (\(scheme)://%2Ftmp%2Fapp.sock/path)"
            )
        }
        if socketPath.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw CurlewError.invalidRequest("the socket path of \(scheme) URL contains control characters")
        }
        if socketPath.utf8.count > maximumUnixSocketPathBytes {
            throw CurlewError.invalidRequest(
                "the socket path is \(socketPath.utf8.count) bytes; Unix domain sockets take at most "
                    + "\(maximumUnixSocketPathBytes)")
        }
        let networkScheme = scheme == "http+unix" ? "http" : "https"
        let transferURL = "\(networkScheme)://localhost" + String(parts.url[parts.path.startIndex...])
        try validateNetworkURL(transferURL)
        return Validated(transferURL: transferURL, unixSocketPath: socketPath)
    }

    /// The checks a URL filled from a template needs once a URL of the same template passed ``validate(_:)``: no
    /// spaces or control characters, and the scheme http or https.
    ///
    /// Only for a caller that proves the rest cannot differ: the filled places lie after the authority and take
    /// only letters, digits and `-`, never completing a `%` escape, so both parsers read the same scheme and host
    /// as they did in the validated URL. Parsing costs more than the rest of making a request (two URL parsers,
    /// ~12 % of a load test's CPU with a `{{seq}}` template).
    static func validateFilled(_ url: String) throws -> Validated {
        if url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            throw CurlewError.invalidRequest("the URL contains spaces or control characters")
        }
        guard startsWith(url, oneOf: ["http://", "https://"]) else {
            // Not the URL itself: it may carry credentials.
            throw CurlewError(code: .protocolNotAllowed, detail: "a filled URL must be http or https")
        }
        return Validated(transferURL: url, unixSocketPath: nil)
    }

    /// Whether `url` starts with `http+unix://` or `https+unix://`, in any case.
    private static func startsWithUnixScheme(_ url: String) -> Bool {
        startsWith(url, oneOf: ["http+unix://", "https+unix://"])
    }

    /// Whether `url` starts with one of `schemes` (given in lower case), in any case.
    static func startsWith(_ url: some StringProtocol, oneOf schemes: [String]) -> Bool {
        schemes.contains { scheme in
            url.utf8.count >= scheme.utf8.count
                && zip(url.utf8, scheme.utf8).allSatisfy { byte, expected in
                    ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) == expected
                }
        }
    }

    private static func validateNetworkURL(_ url: String) throws {
        CurlGlobal.ensureInitialized()
        if url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            throw CurlewError.invalidRequest("the URL contains spaces or control characters")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            // Not named: where a URL does not parse, neither can a redaction find its password.
            throw CurlewError.invalidRequest("malformed URL (Foundation's URL parser refuses it)")
        }
        guard scheme == "http" || scheme == "https" else {
            throw CurlewError(
                code: .protocolNotAllowed,
                detail: "scheme \(scheme.debugDescription) is not allowed, only http, https, http+unix and https+unix")
        }
        guard let swiftHost = components.host, !swiftHost.isEmpty else {
            throw CurlewError.invalidRequest("the URL has no host")
        }
        let curlHost = try curlParsedHost(url)
        guard normalized(swiftHost) == normalized(curlHost) else {
            throw CurlewError.invalidRequest(
                "Swift reads the host as \(swiftHost.debugDescription) but libcurl as \(curlHost.debugDescription)")
        }
    }

    private static func curlParsedHost(_ url: String) throws -> String {
        guard let handle = curl_url() else { throw CurlewError.invalidRequest("out of memory parsing the URL") }
        defer { curl_url_cleanup(handle) }
        let setCode = curl_url_set(handle, CURLUPART_URL, url, 0)
        guard setCode == CURLUE_OK else {
            throw CurlewError.invalidRequest(
                "libcurl cannot parse the URL: \(String(cString: curl_url_strerror(setCode)))")
        }
        var hostPointer: UnsafeMutablePointer<CChar>?
        let getCode = curl_url_get(handle, CURLUPART_HOST, &hostPointer, 0)
        guard getCode == CURLUE_OK, let hostPointer else {
            throw CurlewError.invalidRequest("libcurl finds no host in the URL")
        }
        defer { curl_free(hostPointer) }
        return String(cString: hostPointer)
    }

    private static func normalized(_ host: String) -> String {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return PercentEncoding.decode(host) ?? host
    }
}
