/// Percent-encoding (RFC 3986) byte by byte in UTF-8, for the route layer's URLs and `curlew upload`'s object
/// names, signatures and journal.
///
/// It never depends on Foundation's character sets, whose `urlQueryAllowed` lets `&`, `=`, `+` and `/` through
/// unescaped (the bug Nikka and Konex shipped), and writes upper-case hex digits, as SigV4's canonical form needs.
package enum PercentEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// RFC 3986's unreserved characters: letters, digits, `-`, `.`, `_` and `~`.
    package static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Characters a path may carry as they are (RFC 3986 `pchar` plus `/`): sub-delims, `:` and `@` stay.
    private static func isAllowedInPath(_ byte: UInt8) -> Bool {
        if isUnreserved(byte) { return true }
        switch byte {
        case UInt8(ascii: "/"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","),
            UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"):
            return true
        default:
            return false
        }
    }

    /// Characters a query the user wrote by hand may carry as they are (`pchar`, `/` and `?`).
    private static func isAllowedInQuery(_ byte: UInt8) -> Bool {
        isAllowedInPath(byte) || byte == UInt8(ascii: "?")
    }

    /// Everything but the unreserved characters escaped, `/`, `?`, `#`, `%` and `+` included: a value that stands
    /// as one query key or value, one path segment, or one field of a SigV4 canonical request.
    package static func encodeComponent(_ text: some StringProtocol) -> String {
        encode(text, keeping: isUnreserved, keepingEscapes: false)
    }

    /// Encodes what a URL path may not hold (spaces, unicode, `?`, `#`), keeping `/` and `%XX` escapes the
    /// caller already made, so `"/user/\(id)"` works for ids of letters, digits, spaces and unicode, and
    /// pre-encoded paths are not encoded twice. A value that may hold `/`, `?` or `%` goes through
    /// ``encodeComponent(_:)``.
    package static func encodePath(_ path: String) -> String {
        encode(path, keeping: isAllowedInPath, keepingEscapes: true)
    }

    /// Encodes what a hand-written query may not hold, keeping its `&`, `=`, `?` and `%XX` escapes.
    package static func encodeQuery(_ query: String) -> String {
        encode(query, keeping: isAllowedInQuery, keepingEscapes: true)
    }

    /// A relative file path as URL path segments: each segment through ``encodeComponent(_:)``, so `#`, `?`, `%`,
    /// spaces, quotes and non-ASCII names reach the server as the same name; empty segments (`a//b`, a leading or
    /// trailing `/`) are dropped.
    package static func encodeEachSegment(of relativePath: String) -> String {
        segments(of: relativePath, omittingEmpty: true).map(encodeComponent).joined(separator: "/")
    }

    /// The path's segments, split at each `/` byte.
    ///
    /// Never split a path with `String.split(separator: "/")`: that splits Characters, and a `/` fused into one
    /// grapheme with a combining mark after it (`/\u{301}`) or a prepended mark before it (`\u{600}/`) is no
    /// separator there. `a\u{600}/../b` would keep its `..` hidden inside one segment, and a signer would encode
    /// the `/` as `%2F`, which the server reads as a separator.
    package static func segments(of path: some StringProtocol, omittingEmpty: Bool = false) -> [Substring] {
        String(path).utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: omittingEmpty).map {
            Substring($0)
        }
    }

    /// Whether the path's first byte is `/` (`hasPrefix("/")` compares Characters: `/\u{301}` is not `/`).
    package static func startsWithSlash(_ path: some StringProtocol) -> Bool {
        path.utf8.first == UInt8(ascii: "/")
    }

    /// The text with every `%XX` escape decoded; `nil` when an escape is incomplete or not hex, or the bytes are not
    /// UTF-8. `+` stays `+` (it is a space only in forms).
    package static func decode(_ encoded: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        var iterator = encoded.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func encode(
        _ text: some StringProtocol, keeping isKept: (UInt8) -> Bool, keepingEscapes: Bool
    ) -> String {
        if text.utf8.allSatisfy(isKept) { return String(text) }
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count * 3)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if isKept(byte) {
                output.append(byte)
            } else if keepingEscapes, byte == UInt8(ascii: "%"), index + 2 < bytes.count,
                hexValue(bytes[index + 1]) != nil, hexValue(bytes[index + 2]) != nil
            {
                output.append(byte)
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            }
            index += 1
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
