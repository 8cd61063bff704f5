import CLibCurl
import CurlewEngine
import Foundation

/// `CurlewRequest(url:)` against libcurl's own parser, the one that decides where a request goes.
///
/// - A URL Curlew accepts is one libcurl parses to http or https, and to the host and port Swift's parser reads:
///   a check a caller makes on `URLComponents` (an allow-list, an SSRF guard) is a check of where libcurl connects.
/// - A URL Curlew refuses is refused with a `CurlewError` of code `invalidRequest` or `protocolNotAllowed`.
enum URLValidationProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        let url = String(decoding: bytes, as: UTF8.self)
        do {
            _ = try CurlewRequest(url: url)
        } catch let error as CurlewError {
            if error.code == .invalidRequest || error.code == .protocolNotAllowed { return nil }
            return "\(url.debugDescription) refused with \(error.code), not invalidRequest or protocolNotAllowed"
        } catch {
            return "\(url.debugDescription) refused with \(type(of: error)), not a CurlewError"
        }
        guard let libcurl = LibcurlURLParts(url) else {
            return "\(url.debugDescription) accepted, but libcurl's parser refuses it"
        }
        guard libcurl.scheme == "http" || libcurl.scheme == "https" else {
            return "\(url.debugDescription) accepted, but libcurl reads the scheme \(libcurl.scheme.debugDescription)"
        }
        guard let swift = URLComponents(string: url), let swiftScheme = swift.scheme?.lowercased() else {
            return "\(url.debugDescription) accepted, but URLComponents cannot parse it"
        }
        guard swiftScheme == libcurl.scheme else {
            return "\(url.debugDescription): Swift reads the scheme \(swiftScheme), libcurl \(libcurl.scheme)"
        }
        let swiftPort = swift.port ?? (swiftScheme == "https" ? 443 : 80)
        guard swiftPort == libcurl.port else {
            return "\(url.debugDescription): Swift reads port \(swiftPort), libcurl port \(libcurl.port)"
        }
        return nil
    }
}

/// The scheme and port libcurl's URL API reads (default ports filled in).
private struct LibcurlURLParts {
    var scheme: String
    var port: Int

    init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        func part(_ which: CURLUPart, flags: UInt32 = 0) -> String? {
            var pointer: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, which, &pointer, flags) == CURLUE_OK, let pointer else { return nil }
            defer { curl_free(pointer) }
            return String(cString: pointer)
        }
        guard let scheme = part(CURLUPART_SCHEME),
            let portText = part(CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)),
            let port = Int(portText)
        else { return nil }
        self.scheme = scheme.lowercased()
        self.port = port
    }
}
