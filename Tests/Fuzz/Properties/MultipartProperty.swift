import MultipartKit

@testable import CurlewEngine

/// The multipart encoder against multipart-kit's parser: random forms (names and file names with any character,
/// content types, empty and binary parts), read in random chunk sizes, come back as the same parts, and the
/// announced `Content-Length` is the number of bytes produced. A part description that cannot be sent as given
/// (a content type with CR, LF or NUL) is refused with `invalidRequest`, never sent as another header.
enum MultipartProperty {
    private struct PartCase {
        var name: String
        var fileName: String?
        var contentType: String?
        var data: [UInt8]
        var isTextField: Bool
    }

    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        var form = MultipartForm()
        var cases: [PartCase] = []
        for _ in 0..<input.number(below: 5) {
            let flags = input.byte()
            let name = input.text()
            if flags & 1 == 0 {
                let value = input.text()
                form.append(value: value, forKey: name)
                cases.append(PartCase(name: name, data: Array(value.utf8), isTextField: true))
            } else {
                let fileName = flags & 2 == 0 ? nil : input.text()
                let contentType = flags & 4 == 0 ? nil : input.text()
                let data = input.field()
                form.append(data: data, forKey: name, fileName: fileName, mimeType: contentType)
                cases.append(
                    PartCase(
                        name: name, fileName: fileName,
                        contentType: contentType ?? fileName.map { _ in MultipartForm.defaultFileType }, data: data,
                        isTextField: false))
            }
        }
        let source: MultipartBodySource
        switch MultipartBodySource.open(form) {
        case .success(let opened): source = opened
        case .failure(let error):
            let unsendable = cases.contains { $0.contentType.map(hasLineBreakOrNul) ?? false }
            return unsendable && error.code == .invalidRequest
                ? nil : "a form of \(cases.count) parts is refused: \(error)"
        }
        if let unsendable = cases.first(where: { $0.contentType.map(hasLineBreakOrNul) ?? false }) {
            return "a part with the content type \(unsendable.contentType!.debugDescription) is sent"
        }
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        reading: while true {
            let size = 1 + input.number(below: chunk.count)
            let result = chunk.withUnsafeMutableBytes {
                source.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<size]))
            }
            switch result {
            case .bytes(let count): body += chunk[..<count]
            case .end: break reading
            case .pause: return "a form of bytes paused"
            case .abort(let error): return "reading the form failed: \(error)"
            }
        }
        if source.length != Int64(body.count) {
            return "Content-Length \(source.length.map(String.init) ?? "unknown") announced, \(body.count) bytes sent"
        }
        // RFC 2046 wants at least one part, so parsers (multipart-kit among them) refuse an empty form; Curlew sends
        // the closing delimiter alone, which servers read as no fields.
        if cases.isEmpty {
            return body == Array("--\(source.boundary)--\r\n".utf8)
                ? nil : "an empty form is sent as \(body.count) bytes"
        }
        let parsed: [(headers: [(String, String)], body: [UInt8])]
        do {
            parsed = try parse(body, boundary: source.boundary)
        } catch {
            return "multipart-kit cannot parse the form: \(error)"
        }
        guard parsed.count == cases.count else { return "\(cases.count) parts sent, \(parsed.count) parsed" }
        for (index, (expected, part)) in zip(cases, parsed).enumerated() {
            if part.body != expected.data { return "part \(index): the content differs" }
            let names = part.headers.map { $0.0.lowercased() }.sorted()
            let expectedNames =
                (expected.contentType == nil ? ["content-disposition"] : ["content-disposition", "content-type"])
            if names != expectedNames { return "part \(index): headers \(names), not \(expectedNames)" }
            let disposition = part.headers.first { $0.0.lowercased() == "content-disposition" }!.1
            let expectedDisposition =
                "form-data; name=" + quotedAsDocumented(expected.name)
                + (expected.fileName.map { "; filename=" + quotedAsDocumented($0) } ?? "")
            if trimmed(disposition) != trimmed(expectedDisposition) {
                return
                    "part \(index): Content-Disposition \(disposition.debugDescription), not \(expectedDisposition.debugDescription)"
            }
            if let contentType = expected.contentType {
                let sent = part.headers.first { $0.0.lowercased() == "content-type" }!.1
                if trimmed(sent) != trimmed(contentType) {
                    return "part \(index): Content-Type \(sent.debugDescription), not \(contentType.debugDescription)"
                }
            }
        }
        return nil
    }

    private static func hasLineBreakOrNul(_ text: String) -> Bool {
        text.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    /// The documented encoding of a name in `Content-Disposition` (MultipartForm's DocC): `"`, CR and LF
    /// percent-encoded, a backslash as a quoted-pair, everything else as UTF-8; written here from that text, not
    /// taken from the encoder.
    private static func quotedAsDocumented(_ value: String) -> String {
        var result = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": result += "%22"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            case "\\": result += "\\\\"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    private static func trimmed(_ text: String) -> Substring {
        let isSpace = { (character: Character) in character == " " || character == "\t" }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return text[first...last]
    }

    private static func parse(
        _ body: [UInt8], boundary: String
    ) throws -> [(headers: [(String, String)], body: [UInt8])] {
        let parser = MultipartParser(boundary: boundary)
        var parts: [(headers: [(String, String)], body: [UInt8])] = []
        var headers: [(String, String)] = []
        var content: [UInt8] = []
        parser.onHeader = { name, value in headers.append((name, value)) }
        parser.onBody = { buffer in content += buffer.readBytes(length: buffer.readableBytes) ?? [] }
        parser.onPartComplete = {
            parts.append((headers, content))
            headers = []
            content = []
        }
        try parser.execute(body)
        return parts
    }
}
