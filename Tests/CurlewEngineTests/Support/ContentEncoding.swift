import CLibCurl
import Glibc

@testable import CurlewEngine

/// Encoders for the decoder's tests: zlib's deflate (as gzip, zlib-wrapped or raw) and zstd's one-shot compressor,
/// borrowed from the libzstd libcurl brought into the process.
enum ContentEncoding {
    /// `windowBits` as zlib takes them: 31 for gzip, 15 for zlib's wrapper, -15 for raw deflate.
    static func deflate(_ bytes: [UInt8], windowBits: Int32) -> [UInt8] {
        var stream = z_stream()
        let started = deflateInit2_(
            &stream, 6, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
            Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK)
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(bytes.count))) + 64)
        var input = bytes
        let status = input.withUnsafeMutableBufferPointer { source in
            output.withUnsafeMutableBufferPointer { destination in
                stream.next_in = source.baseAddress
                stream.avail_in = UInt32(source.count)
                stream.next_out = destination.baseAddress
                stream.avail_out = UInt32(destination.count)
                return CLibCurl.deflate(&stream, Z_FINISH)
            }
        }
        precondition(status == Z_STREAM_END)
        let produced = Int(stream.total_out)
        deflateEnd(&stream)
        return Array(output[..<produced])
    }

    static func gzip(_ bytes: [UInt8]) -> [UInt8] { deflate(bytes, windowBits: 31) }

    private typealias ZstdCompress =
        @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeRawPointer?, Int, Int32) -> Int
    private typealias ZstdBound = @convention(c) (Int) -> Int

    /// One zstd frame; nil when libzstd is not in the process.
    static func zstd(_ bytes: [UInt8]) -> [UInt8]? {
        guard let compressSymbol = dlsym(nil, "ZSTD_compress"), let boundSymbol = dlsym(nil, "ZSTD_compressBound")
        else { return nil }
        let compress = unsafeBitCast(compressSymbol, to: ZstdCompress.self)
        let bound = unsafeBitCast(boundSymbol, to: ZstdBound.self)
        var output = [UInt8](repeating: 0, count: bound(bytes.count))
        let produced = output.withUnsafeMutableBytes { destination in
            bytes.withUnsafeBytes { source in
                compress(destination.baseAddress, destination.count, source.baseAddress, source.count, 3)
            }
        }
        precondition(produced > 0 && produced <= output.count)
        return Array(output[..<produced])
    }

    /// "hello hello hello hello" as brotli (quality 11), made once with the reference encoder: no brotli encoder is
    /// in the process.
    static let brotliHello: [UInt8] = [
        27, 22, 0, 248, 141, 148, 110, 222, 68, 85, 134, 150, 108, 32, 111, 33, 79, 28, 224, 56,
    ]

    /// A body that compresses well but not to nothing: counters and words, with some noise.
    static func sampleBody(size: Int, seed: UInt64 = 1) -> [UInt8] {
        var generator = seed
        var body: [UInt8] = []
        body.reserveCapacity(size + 32)
        while body.count < size {
            generator = generator &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            body += "record \(body.count) value \(generator >> 48);".utf8
        }
        return Array(body[..<size])
    }

    /// Feeds `pieces` to a decoding for `coding` as libcurl's write callback would, into a sink that takes
    /// everything; returns what the sink got and the failure found at the end of the body (nil when whole).
    static func decode(_ coding: ResponseCoding, pieces: [[UInt8]]) throws -> (body: [UInt8], failureAtEnd: String?) {
        guard let decoding = ResponseBodyDecoding(coding) else { return (Array(pieces.joined()), nil) }
        var body: [UInt8] = []
        for piece in pieces {
            let answer = try piece.withUnsafeBytes { bytes in
                try decoding.receive(bytes) { decoded in
                    body += decoded
                    return decoded.count
                }
            }
            precondition(answer == piece.count, "a sink that takes everything never pauses")
        }
        return (body, decoding.failureAtEndOfBody?.detail)
    }

    /// `bytes` in pieces of `size` (the last one shorter).
    static func pieces(_ bytes: [UInt8], size: Int) -> [[UInt8]] {
        stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
    }
}
