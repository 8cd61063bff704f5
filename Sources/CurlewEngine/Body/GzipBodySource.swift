import CLibCurl

/// Compresses another source on the fly with zlib's deflate and the gzip wrapper, in constant memory: a
/// fixed input buffer, output written straight into libcurl's buffer.
final class GzipBodySource: BodySource {
    private let inner: any BodySource
    private let level: Int32
    private var stream = z_stream()
    private var isInitialized = false
    private let input: UnsafeMutableRawBufferPointer
    private var innerEnded = false
    private var finished = false

    private static let inputCapacity = 64 * 1024

    private init(inner: any BodySource, level: Int32) {
        self.inner = inner
        self.level = level
        self.input = .allocate(byteCount: Self.inputCapacity, alignment: 16)
    }

    deinit {
        if isInitialized { deflateEnd(&stream) }
        input.deallocate()
        inner.close()
    }

    static func open(_ inner: any BodySource, level: Int) -> Result<GzipBodySource, CurlewError> {
        let source = GzipBodySource(inner: inner, level: Int32(max(-1, min(level, 9))))
        if let error = source.initializeDeflate() { return .failure(error) }
        return .success(source)
    }

    private func initializeDeflate() -> CurlewError? {
        // windowBits 15 + 16 asks zlib for the gzip wrapper; memLevel 8 is zlib's default.
        let status = deflateInit2_(
            &stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)
        )
        guard status == Z_OK else {
            return .requestBody("zlib could not start compressing (deflateInit2: \(status))")
        }
        isInitialized = true
        return nil
    }

    /// Compressed sizes are not known in advance: the body goes out chunked (HTTP/1.1) or as DATA frames (HTTP/2).
    var length: Int64? { nil }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyReadResult {
        if finished { return .end }
        stream.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.avail_out = uInt(min(buffer.count, Int(UInt32.max)))
        while stream.avail_out > 0 {
            if stream.avail_in == 0 && !innerEnded {
                switch inner.read(into: input) {
                case .bytes(let count):
                    stream.next_in = input.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.avail_in = uInt(count)
                case .end:
                    innerEnded = true
                case .pause:
                    let produced = buffer.count - Int(stream.avail_out)
                    return produced > 0 ? .bytes(produced) : .pause
                case .abort(let error):
                    return .abort(error)
                }
            }
            let status = deflate(&stream, innerEnded ? Z_FINISH : Z_NO_FLUSH)
            if status == Z_STREAM_END {
                finished = true
                break
            }
            guard status == Z_OK || status == Z_BUF_ERROR else {
                return .abort(.requestBody("zlib failed while compressing (deflate: \(status))"))
            }
        }
        let produced = buffer.count - Int(stream.avail_out)
        stream.next_out = nil
        stream.avail_out = 0
        return produced > 0 ? .bytes(produced) : (finished ? .end : .pause)
    }

    func rewind() -> CurlewError? {
        if let error = inner.rewind() { return error }
        deflateReset(&stream)
        stream.avail_in = 0
        stream.next_in = nil
        innerEnded = false
        finished = false
        return nil
    }

    func setWaker(_ waker: BodyWaker?) { inner.setWaker(waker) }

    func close() { inner.close() }
}
