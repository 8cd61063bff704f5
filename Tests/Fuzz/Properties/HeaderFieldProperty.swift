import HTTPTypes

@testable import CurlewEngine

/// Header fields, by every way a caller can give them (`addHeader`, `setHeader`, `init(headers:)`, http-types'
/// `HTTPFields`), against the lines libcurl is handed: nothing Curlew accepts puts CR, LF or NUL on the wire, or
/// a field under another name than the caller's, a caller's `Content-Length` or `Transfer-Encoding` at all, or
/// `Proxy-Authorization` anywhere but in the lines for proxies.
enum HeaderFieldProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let name = input.text()
        let value = input.text()
        var requests: [(way: String, request: CurlewRequest)] = []
        guard var added = try? CurlewRequest(url: "http://127.0.0.1/") else { return "the base URL is refused" }
        var set = added
        if (try? added.addHeader(name, value)) != nil { requests.append(("addHeader", added)) }
        if (try? set.setHeader(name, value)) != nil { requests.append(("setHeader", set)) }
        if let request = try? CurlewRequest(url: "http://127.0.0.1/", headers: [(name, value)]) {
            requests.append(("init(headers:)", request))
        }
        if let fieldName = HTTPField.Name(name) {
            var fields = HTTPFields()
            fields.append(HTTPField(name: fieldName, value: value))
            if let request = try? CurlewRequest(url: "http://127.0.0.1/", headerFields: fields) {
                requests.append(("HTTPFields", request))
            }
        }
        // The engine frames the body itself: these never go out as given. A proxy's credentials go to proxies only.
        let isFraming = ["content-length", "transfer-encoding"].contains(name.lowercased())
        let isForProxies = name.lowercased() == "proxy-authorization"
        for (way, request) in requests {
            var lines: [String] = []
            request.headerFields.forEachRequestHeaderLine(withholdingCredentials: input.byte() & 1 == 1) {
                lines.append($0)
            }
            if (isFraming || isForProxies) && !lines.isEmpty {
                return "\(way)(\(name.debugDescription), …) sends the field to the server: \(lines)"
            }
            var proxyLines: [String] = []
            request.headerFields.forEachProxyHeaderLine { proxyLines.append($0) }
            if !isForProxies && !proxyLines.isEmpty {
                return "\(way)(\(name.debugDescription), …) sends the field to a proxy: \(proxyLines)"
            }
            for line in lines + proxyLines {
                if line.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) {
                    return "\(way)(\(name.debugDescription), \(value.debugDescription)) sends \(line.debugDescription)"
                }
                let sentName = line.utf8.prefix { $0 != UInt8(ascii: ":") && $0 != UInt8(ascii: ";") }
                if String(decoding: sentName, as: UTF8.self).lowercased() != name.lowercased() {
                    return "\(way)(\(name.debugDescription), …) sends the field as \(line.debugDescription)"
                }
            }
        }
        return nil
    }
}
