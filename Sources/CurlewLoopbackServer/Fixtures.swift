public import NIOCore

extension LoopbackServer {
    /// The exact body of `GET /small` (and of `/delay/MS` and `/freeze/MS`): 100 printable ASCII bytes.
    ///
    /// It contains no quotes, `$` or newlines so that it can also be embedded verbatim in an
    /// nginx `return 200 "..."` directive, which lets tests compare both servers byte for byte.
    public static let smallBody: String = {
        let unit = "curlew-small-body-0123456789-"
        let repeated = String(repeating: unit, count: 100 / unit.count + 1)
        return String(repeated.prefix(100))
    }()

    /// The exact body of `GET /json`: a deterministic JSON array of about 10 KB.
    ///
    /// Objects carry `id`, `name`, `tags` and `score`; the score is written with one decimal
    /// digit from integer arithmetic so the document never depends on float formatting.
    public static let jsonBody: String = {
        let tagPool = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
        var items: [String] = []
        items.reserveCapacity(150)
        for id in 1...150 {
            let tags = (0..<(1 + id % 3)).map { "\"\(tagPool[(id + $0 * 3) % tagPool.count])\"" }
            let scaled = (id * 7919) % 1000
            let name = "item-" + String(repeating: "0", count: max(0, 4 - String(id).count)) + String(id)
            items.append(
                "{\"id\":\(id),\"name\":\"\(name)\",\"tags\":[\(tags.joined(separator: ","))],\"score\":\(scaled / 10).\(scaled % 10)}"
            )
        }
        return "[\n" + items.joined(separator: ",\n") + "\n]\n"
    }()

    /// The byte at `offset` of every `GET /bytes/N` body.
    ///
    /// 251 is prime, so the pattern does not line up with power-of-two chunk or buffer sizes and
    /// a misplaced or duplicated chunk shows up as a mismatch.
    @inlinable
    public static func patternByte(at offset: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: offset % 251)
    }
}

/// A 64-bit FNV-1a checksum, as returned by the loopback server's `/upload` route.
///
/// FNV-1a (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`; for each byte
/// `hash = (hash ^ byte) &* prime`) stands in for SHA-256 because no crypto package is a
/// dependency; it is enough to catch lost, duplicated or reordered upload bytes.
public struct FNV1a64: Sendable, Hashable {
    /// The checksum of all bytes fed so far.
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    /// A checksum of zero bytes (the FNV offset basis).
    public init() {}

    /// Feeds raw memory, the fast path for large bodies.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var hash = self.value
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        self.value = hash
    }

    /// Feeds any byte sequence.
    public mutating func update(_ bytes: some Sequence<UInt8>) {
        let handled: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            self.update(UnsafeRawBufferPointer(buffer))
        }
        if handled == nil {
            for byte in bytes {
                self.value = (self.value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            }
        }
    }

    /// Feeds the readable bytes of a buffer without consuming them.
    public mutating func update(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { self.update($0) }
    }

    /// The checksum as 16 lowercase hex digits, the format `/upload` reports.
    public var hexDigest: String {
        let hex = String(self.value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// The `/bytes/N` pattern laid out once, long enough that any chunk of at most
/// `maximumChunk` bytes starting at any phase is a zero-copy slice of it.
enum BytePattern {
    static let maximumChunk = 64 * 1024

    static let buffer: ByteBuffer = {
        let length = maximumChunk + 251
        var buffer = ByteBufferAllocator().buffer(capacity: length)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { pointer in
            for index in 0..<length {
                pointer[index] = LoopbackServer.patternByte(at: index)
            }
            return length
        }
        return buffer
    }()

    /// The pattern bytes for body offsets `offset ..< offset + length`.
    static func slice(offset: Int, length: Int) -> ByteBuffer {
        precondition(length <= maximumChunk)
        return buffer.getSlice(at: buffer.readerIndex + offset % 251, length: length)!
    }
}

enum JSONText {
    /// Quotes a string as a JSON string literal.
    static func quoted(_ string: String) -> String {
        var out = "\""
        out.reserveCapacity(string.utf8.count + 2)
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
        return out
    }
}
