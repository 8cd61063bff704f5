import CLibCurl

@testable import CurlewEngine

/// The gzip request body (`bodyCompression`) against zlib's inflate: any bytes at any level, read in any chunk
/// sizes, inflate back to the same bytes, and the gzip stream ends where the body ends.
enum GzipProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let level = input.number(below: 11) - 1
        let chunkSeed = input.byte()
        let original = input.rest()
        let source: GzipBodySource
        switch GzipBodySource.open(MemoryBodySource(original), level: level) {
        case .success(let opened): source = opened
        case .failure(let error): return "level \(level) refused: \(error)"
        }
        var compressed: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 512)
        var round = 0
        reading: while true {
            // Chunk sizes from 1 to 512 bytes, varied per read from the seed.
            let size = 1 + (Int(chunkSeed) &* 31 &+ round &* 17) % chunk.count
            round += 1
            let result = chunk.withUnsafeMutableBytes {
                source.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<size]))
            }
            switch result {
            case .bytes(let count): compressed += chunk[..<count]
            case .end: break reading
            case .pause: return "a body of bytes paused"
            case .abort(let error): return "compressing failed: \(error)"
            }
            if round > 1_000_000 { return "the gzip stream never ends" }
        }
        switch inflateGzip(compressed) {
        case .success(let inflated) where inflated == original: return nil
        case .success(let inflated): return "\(original.count) bytes inflate to \(inflated.count) different bytes"
        case .failure(let message): return "zlib cannot inflate the body of \(original.count) bytes: \(message)"
        }
    }

    private enum Inflated {
        case success([UInt8])
        case failure(String)
    }

    /// zlib's inflate with the gzip wrapper, requiring the stream to end exactly at the last byte.
    private static func inflateGzip(_ compressed: [UInt8]) -> Inflated {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure("inflateInit2")
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var input = compressed
        return input.withUnsafeMutableBufferPointer { inputBuffer -> Inflated in
            stream.next_in = inputBuffer.baseAddress
            stream.avail_in = UInt32(inputBuffer.count)
            while true {
                let status = buffer.withUnsafeMutableBufferPointer { outputBuffer -> Int32 in
                    stream.next_out = outputBuffer.baseAddress
                    stream.avail_out = UInt32(outputBuffer.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                output += buffer[..<(buffer.count - Int(stream.avail_out))]
                if status == Z_STREAM_END {
                    return stream.avail_in == 0 ? .success(output) : .failure("\(stream.avail_in) bytes after the end")
                }
                if status != Z_OK { return .failure("inflate returned \(status)") }
                if stream.avail_in == 0 && stream.avail_out != 0 { return .failure("the stream stops before its end") }
            }
        }
    }
}
