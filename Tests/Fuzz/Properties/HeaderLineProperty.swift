@testable import CurlewEngine

/// The response header-line classifier (`HeaderLine.classify`, run on every header line libcurl hands over)
/// against a plain reading of RFC 9110: the status line, the end of a block, `Content-Length` (one number, or a
/// list of the same number, §8.6), `Transfer-Encoding`, `Content-Encoding` and a `Location` with a value, with field
/// names compared case-insensitively and nothing else.
enum HeaderLineProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        // libcurl hands over whole lines, CRLF included: a line never holds a LF before its end.
        if bytes.contains(0x0A) { return nil }
        let line = bytes + [0x0D, 0x0A]
        let classified = line.withUnsafeBytes { HeaderLine.classify($0) }
        let expected = reference(line)
        guard classified == expected else {
            return "\(String(decoding: line, as: UTF8.self).debugDescription) is \(classified), not \(expected)"
        }
        return nil
    }

    private static func reference(_ line: [UInt8]) -> HeaderLine {
        let content = Array(line.dropLast(2))
        if content.isEmpty { return .endOfBlock }
        if content.starts(with: Array("HTTP/".utf8)) { return .statusLine }
        if let value = value(of: "content-length", in: content) { return .contentLength(length(value)) }
        if value(of: "transfer-encoding", in: content) != nil { return .transferEncoding }
        if value(of: "content-encoding", in: content) != nil { return .contentEncoding }
        // A value, read as neither libcurl could read it as empty: up to the first CR, LF or NUL, not only spaces,
        // tabs, vertical tabs and form feeds.
        if let value = value(of: "location", in: content),
            value.prefix(while: { ![0x0D, 0x0A, 0x00].contains($0) }).contains(where: {
                ![0x20, 0x09, 0x0B, 0x0C].contains($0)
            })
        {
            return .location
        }
        return .otherField
    }

    /// The bytes after `name:` when the line's field name is `name` in any case; nil otherwise.
    private static func value(of name: String, in content: [UInt8]) -> ArraySlice<UInt8>? {
        let name = Array(name.utf8)
        guard content.count > name.count, content[name.count] == UInt8(ascii: ":") else { return nil }
        for (byte, expected) in zip(content, name) {
            let folded = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
            if folded != expected { return nil }
        }
        return content[(name.count + 1)...]
    }

    /// `1*DIGIT`, or a comma-separated list of the same `1*DIGIT`, with optional whitespace around each; nil for
    /// anything else and for numbers beyond Int64.
    private static func length(_ value: ArraySlice<UInt8>) -> Int64? {
        var result: Int64?
        for element in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            // A stray CR counts as whitespace, as libcurl's own reading of the value does.
            let isSpace = { (byte: UInt8) in
                byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            }
            let digits = element.drop(while: isSpace).reversed().drop(while: isSpace).reversed()
            guard !digits.isEmpty, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let number = Int64(String(decoding: digits, as: UTF8.self))
            else { return nil }
            if let result, result != number { return nil }
            result = number
        }
        return result
    }
}
