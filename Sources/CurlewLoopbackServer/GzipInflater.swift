import CLibCurl

/// Inflates a gzip stream fed in pieces and hashes what comes out, so `/upload` can prove that a compressed
/// request body decodes to exactly the bytes that were meant.
final class GzipInflater {
    private var stream = z_stream()
    private var output = [UInt8](repeating: 0, count: 64 * 1024)
    private(set) var count = 0
    private(set) var hash = FNV1a64()
    private(set) var isComplete = false
    private(set) var failure: String?

    init() {
        // 15 + 16: a gzip wrapper is required (a zlib or raw stream is an error).
        let status = inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        if status != Z_OK { failure = "inflateInit2 failed (\(status))" }
    }

    deinit { inflateEnd(&stream) }

    func feed(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, bytes.count > 0 else { return }
        if isComplete {
            failure = "bytes after the end of the gzip stream"
            return
        }
        stream.next_in = UnsafeMutablePointer(mutating: bytes.baseAddress!.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(bytes.count)
        let outputCapacity = output.count
        while stream.avail_in > 0 || stream.avail_out == 0 {
            let status = output.withUnsafeMutableBytes { buffer -> Int32 in
                stream.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(outputCapacity)
                return inflate(&stream, Z_NO_FLUSH)
            }
            let produced = outputCapacity - Int(stream.avail_out)
            output.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) }
            count += produced
            if status == Z_STREAM_END {
                isComplete = true
                if stream.avail_in > 0 { failure = "bytes after the end of the gzip stream" }
                break
            }
            guard status == Z_OK || (status == Z_BUF_ERROR && stream.avail_in == 0) else {
                failure = "inflate failed (\(status))"
                break
            }
            if stream.avail_in == 0 && stream.avail_out != 0 { break }
        }
        stream.next_in = nil
        stream.next_out = nil
    }
}
