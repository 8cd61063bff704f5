import Curlew
import CurlewEngine
import CurlewTesting
import Foundation
import HTTPTypes

/// The parts of httpbin the tests use, as `MockTransport` stubs answering what httpbin would:
/// `/anything…`, `/get`, `/post`, `/put`, `/patch`, `/delete` (echo), `/status/N`, `/base64/VALUE` and
/// `/basic-auth/USER/PASSWORD`.
enum HTTPBinMock {
    static let baseURL = "http://httpbin.mock"

    static func transport() -> MockTransport {
        MockTransport(stubs: [
            Stub(matching: { _ in true }, respond: { request, _ in answer(request) })
        ])
    }

    static func answer(_ request: CurlewRequest) -> StubResponse {
        let (_, path) = urlParts(request.url)
        if path.hasPrefix("/status/"), let code = Int(path.dropFirst("/status/".count)) {
            let body = code == 418 ? "\n    -=[ teapot ]=-\n" : ""
            return .text(body, status: HTTPResponse.Status(code: code))
        }
        if path.hasPrefix("/base64/") {
            let encoded = String(path.dropFirst("/base64/".count))
            let decoded = Data(base64Encoded: encoded.removingPercentEncoding ?? encoded).map { Array($0) } ?? []
            return StubResponse(status: .ok, headers: ["Content-Type": "text/html; charset=utf-8"], body: decoded)
        }
        if path.hasPrefix("/basic-auth/") {
            let parts = path.split(separator: "/")
            let expected = "Basic " + Data("\(parts[1]):\(parts[2])".utf8).base64EncodedString()
            if request.headerFields[.authorization] == expected {
                return .json(["authenticated": true, "user": .string(String(parts[1]))])
            }
            return StubResponse(status: .unauthorized, headers: ["WWW-Authenticate": "Basic realm=\"Fake Realm\""])
        }
        return .json(echo(request))
    }

    static func echo(_ request: CurlewRequest) -> JSONValue {
        let (query, _) = urlParts(request.url)
        var headers: [String: JSONValue] = ["Host": .string(host(of: request.url))]
        for field in request.headerFields {
            // Repeated fields arrive joined with commas, as werkzeug shows them.
            let name = titleCased(field.name.rawName)
            headers[name] = .string(headers[name]?.string.map { $0 + "," + field.value } ?? field.value)
        }
        var body: [UInt8] = []
        if let bytes = request.body?.bytes { body = bytes }
        var formFields: [String: JSONValue] = [:]
        var files: [String: JSONValue] = [:]
        if let form = request.body?.multipart {
            for part in form.parts {
                guard let bytes = part.content.bytes else { continue }
                let text = JSONValue.string(String(decoding: bytes, as: UTF8.self))
                if part.fileName == nil { formFields[part.name] = text } else { files[part.name] = text }
            }
        }
        let text = String(decoding: body, as: UTF8.self)
        let contentType = request.headerFields[.contentType] ?? ""
        let isForm = contentType.hasPrefix("application/x-www-form-urlencoded")
        let json: JSONValue =
            contentType.hasPrefix("application/json")
            ? ((try? JSONDecoder().decode(JSONValue.self, from: Data(body))) ?? .null) : .null
        return [
            "method": .string(request.method.rawValue),
            "url": .string(request.url),
            "args": pairs(query),
            "form": isForm ? pairs(text) : .object(formFields),
            "files": .object(files),
            "data": isForm ? "" : .string(text),
            "json": json,
            "headers": .object(headers),
        ]
    }

    /// werkzeug's MultiDict as httpbin prints it: one value as a string, repeated keys as a list.
    static func pairs(_ encoded: String) -> JSONValue {
        var result: [String: JSONValue] = [:]
        for pair in encoded.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = decode(String(parts[0]))
            let value = JSONValue.string(parts.count > 1 ? decode(String(parts[1])) : "")
            switch result[key] {
            case nil: result[key] = value
            case .array(let values)?: result[key] = .array(values + [value])
            case let existing?: result[key] = [existing, value]
            }
        }
        return .object(result)
    }

    private static func decode(_ text: String) -> String {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? text
    }

    private static func urlParts(_ url: String) -> (query: String, path: String) {
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? Substring(url)
        let pathAndQuery = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
        let query =
            pathAndQuery.firstIndex(of: "?").map { String(pathAndQuery[pathAndQuery.index(after: $0)...]) } ?? ""
        return (query, String(pathAndQuery.prefix { $0 != "?" }))
    }

    private static func host(of url: String) -> String {
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? Substring(url)
        return String(afterScheme.prefix { $0 != "/" && $0 != "?" })
    }

    private static func titleCased(_ name: String) -> String {
        name.split(separator: "-", omittingEmptySubsequences: false).map {
            $0.prefix(1).uppercased() + $0.dropFirst().lowercased()
        }
        .joined(separator: "-")
    }
}
