/// Reads a fuzzer's bytes as a sequence of small decisions and fields, so one input describes a whole case
/// (a header's name and value, a form's parts) and small mutations of it make small changes to the case.
package struct FuzzInput {
    private let bytes: [UInt8]
    private var position = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var isExhausted: Bool { position >= bytes.count }

    /// The next byte, or 0 once the input is used up.
    package mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    /// A number in `0..<bound`.
    package mutating func number(below bound: Int) -> Int {
        precondition(bound > 0)
        return (Int(byte()) << 8 | Int(byte())) % bound
    }

    /// A field: a length byte, then that many bytes (fewer at the end of the input).
    package mutating func field() -> [UInt8] {
        let length = Int(byte())
        let end = min(bytes.count, position + length)
        defer { position = end }
        return position < end ? Array(bytes[position..<end]) : []
    }

    /// A field as text (invalid UTF-8 becomes U+FFFD).
    package mutating func text() -> String { String(decoding: field(), as: UTF8.self) }

    /// Everything not read yet.
    package mutating func rest() -> [UInt8] {
        defer { position = bytes.count }
        return position < bytes.count ? Array(bytes[position...]) : []
    }
}
