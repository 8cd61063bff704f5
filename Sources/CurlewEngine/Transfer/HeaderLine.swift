/// What one line handed to libcurl's header callback is, as far as the engine's decisions go: read from the
/// line's first bytes, so the common field costs one comparison.
enum HeaderLine: Equatable {
    /// `HTTP/…`: a new header block starts.
    case statusLine
    /// The empty line that ends a block.
    case endOfBlock
    /// `Content-Length`, with its value; nil when it is not one number (a list of equal numbers is one number,
    /// RFC 9110 §8.6).
    case contentLength(Int64?)
    /// `Transfer-Encoding`.
    case transferEncoding
    /// `Content-Encoding`.
    case contentEncoding
    /// `Location` with a value (libcurl ignores an empty one): a 3xx head with one is a redirect libcurl follows.
    case location
    /// Any other field (or a continuation line).
    case otherField

    @inline(__always)
    static func classify(_ line: UnsafeRawBufferPointer) -> HeaderLine {
        let count = line.count
        guard count > 0 else { return .endOfBlock }
        // libcurl's rule: a line whose first byte is CR or LF ends the head (`\rX\n` too); a short field such as
        // `X\n` does not.
        let first = line[0]
        if first == UInt8(ascii: "\r") || first == UInt8(ascii: "\n") { return .endOfBlock }
        if count <= 2 { return .otherField }
        let lowered = first | 0x20
        if lowered == UInt8(ascii: "h"), count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"),
            line[2] == UInt8(ascii: "T"), line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/")
        {
            return .statusLine
        }
        if lowered == UInt8(ascii: "c") {
            if hasNamePrefix(line, contentLengthName) {
                return .contentLength(parseLength(line, from: contentLengthName.utf8CodeUnitCount))
            }
            if hasNamePrefix(line, contentEncodingName) { return .contentEncoding }
        }
        if lowered == UInt8(ascii: "t"), hasNamePrefix(line, transferEncodingName) {
            return .transferEncoding
        }
        if lowered == UInt8(ascii: "l"), hasNamePrefix(line, locationName), hasValue(line, from: locationName) {
            return .location
        }
        return .otherField
    }

    // Static strings, not arrays: no lazy global to check and no bounds check per byte, for every C… and T… field.
    private static let contentLengthName: StaticString = "content-length:"
    private static let transferEncodingName: StaticString = "transfer-encoding:"
    private static let contentEncodingName: StaticString = "content-encoding:"
    private static let locationName: StaticString = "location:"

    /// The value of a `Content-Encoding` line (classified as ``contentEncoding``): after the colon, as sent.
    static func contentEncodingValue(_ line: UnsafeRawBufferPointer) -> String {
        String(decoding: line[contentEncodingName.utf8CodeUnitCount...], as: UTF8.self)
    }

    private static func hasNamePrefix(_ line: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        let count = name.utf8CodeUnitCount
        guard line.count > count else { return false }
        let expectedBytes = name.utf8Start
        for index in 0..<count {
            let byte = line[index]
            let expected = expectedBytes[index]
            if byte == expected { continue }
            // Only letters fold: `| 0x20` alone would also read 0x1A as ':' and CR as '-' (found by `make fuzz`).
            guard expected >= UInt8(ascii: "a"), expected <= UInt8(ascii: "z"), byte | 0x20 == expected else {
                return false
            }
        }
        return true
    }

    /// Whether anything but whitespace (space, HT, LF, VT, FF, CR) follows the field name `name` (matched by
    /// ``hasNamePrefix(_:_:)``) before the line's first CR, LF or NUL. Stricter than either libcurl: 7.88 skips
    /// leading whitespace, CR and LF included, before it looks for the end; 8.x cuts the value at the first CR or LF.
    /// A value one of them reads as empty is not counted, so a 3xx libcurl keeps as the final response is never taken
    /// for a redirect it follows.
    private static func hasValue(_ line: UnsafeRawBufferPointer, from name: StaticString) -> Bool {
        for byte in line[name.utf8CodeUnitCount...] {
            if byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") || byte == 0 { return false }
            if byte != UInt8(ascii: " ") && !(0x09...0x0D).contains(byte) { return true }
        }
        return false
    }

    /// The value after the colon: digits, optional whitespace around, possibly a comma-separated list of the same
    /// number.
    private static func parseLength(_ line: UnsafeRawBufferPointer, from start: Int) -> Int64? {
        var result: Int64?
        var current: Int64?
        var index = start
        func isSpace(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
                || byte == UInt8(ascii: "\n")
        }
        func finishElement() -> Bool {
            guard let value = current else { return false }
            if let result, result != value { return false }
            result = value
            current = nil
            return true
        }
        var sawDigitsEnded = false
        while index < line.count {
            let byte = line[index]
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                if sawDigitsEnded { return nil }
                let (times10, overflow1) = (current ?? 0).multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                if overflow1 || overflow2 { return nil }
                current = sum
            } else if byte == UInt8(ascii: ",") {
                guard finishElement() else { return nil }
                sawDigitsEnded = false
            } else if isSpace(byte) {
                if current != nil { sawDigitsEnded = true }
            } else {
                return nil
            }
            index += 1
        }
        return finishElement() ? result : nil
    }
}
