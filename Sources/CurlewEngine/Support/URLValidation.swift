import CLibCurl
import Foundation

/// Checks a URL before anything is sent: scheme, syntax, and that Swift and libcurl agree on the host.
///
/// A host the two parsers read differently (`http://a.example\@b.example/`, odd escapes, userinfo
/// tricks) is a request-smuggling and SSRF risk: the caller's checks see one host, libcurl connects to another.
enum URLValidation {
    static func validate(_ url: String) throws {
        CurlGlobal.ensureInitialized()
        if url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            throw CurlewError.invalidRequest("the URL contains spaces or control characters")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            throw CurlewError.invalidRequest("malformed URL \(url.debugDescription)")
        }
        guard scheme == "http" || scheme == "https" else {
            throw CurlewError(
                code: .protocolNotAllowed,
                detail: "scheme \(scheme.debugDescription) is not allowed, only http and https")
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
