import CLibCurl

/// A request body opened for one transfer: the source the read callback pulls from.
final class OpenedBody {
    private let source: any BodySource
    /// The header fields the body implies (`Content-Type` of a form, `Content-Encoding`), unless the
    /// request sets them itself.
    let impliedContentType: String?
    let contentEncoding: String?
    private var isClosed = false

    private init(source: any BodySource, impliedContentType: String?, contentEncoding: String?) {
        self.source = source
        self.impliedContentType = impliedContentType
        self.contentEncoding = contentEncoding
    }

    deinit { close() }

    /// The exact length, or `nil` for a body sent chunked.
    var length: Int64? { source.length }

    /// Opens a body for a transfer; a body that cannot be sent as asked fails here, before anything is sent.
    static func open(
        _ body: CurlewRequest.Body, compression: CurlewRequest.BodyCompression?
    )
        -> Result<OpenedBody, CurlewError>
    {
        let opened: Result<(any BodySource, String?), CurlewError>
        switch body.storage {
        case .bytes(let bytes):
            opened = .success((MemoryBodySource(bytes), nil))
        case .file(let file):
            opened = FileBodySource.open(file).map { ($0, nil) }
        case .stream(let stream):
            opened = StreamBodySource.open(stream).map { ($0, nil) }
        case .multipart(let form):
            opened = MultipartBodySource.open(form).map { ($0, $0.contentType) }
        }
        return opened.flatMap { source, contentType in
            guard let compression else {
                return .success(OpenedBody(source: source, impliedContentType: contentType, contentEncoding: nil))
            }
            switch compression.algorithm {
            case .gzip(let level):
                switch GzipBodySource.open(source, level: level) {
                case .success(let gzip):
                    return .success(OpenedBody(source: gzip, impliedContentType: contentType, contentEncoding: "gzip"))
                case .failure(let error):
                    // A claimed stream must release its writer and producer.
                    source.close()
                    return .failure(error)
                }
            }
        }
    }

    /// Whether reading may be slow enough (a disk, a producer) that libcurl should ask for bigger chunks.
    static func benefitsFromLargeBuffer(_ body: CurlewRequest.Body) -> Bool {
        if case .bytes = body.storage { return false }
        return true
    }

    /// Copies the next bytes into libcurl's buffer (`capacity` > 0).
    @inline(__always)
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> BodyReadResult {
        source.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity))
    }

    /// Rewinds for a 307/308 redirect, an authentication retry or a retry on a fresh connection; returns why not.
    func rewind(to offset: Int64) -> CurlewError? {
        guard offset == 0 else {
            return .requestBody("libcurl asked to resume the body at byte \(offset), which Curlew does not do")
        }
        return source.rewind()
    }

    func setWaker(_ waker: BodyWaker?) { source.setWaker(waker) }

    /// Closes descriptors the engine opened and stops producers. Safe to call more than once.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        source.setWaker(nil)
        source.close()
    }
}

extension CurlewRequest.Body {
    /// The bytes this body puts on the wire with `compression`: read through the same encoder a transfer uses (the
    /// compressed size is known no other way), in constant memory. Nil for a stream, which can be read only once.
    ///
    /// For checks after the fact, such as whether a server holds what a killed upload was sending: the engine's
    /// deflate output depends only on the bytes and the level, so the same body compresses to the same length.
    package func encodedLength(compression: CurlewRequest.BodyCompression?) throws(CurlewError) -> Int64? {
        if case .stream = storage { return nil }
        let body = try OpenedBody.open(self, compression: compression).get()
        defer { body.close() }
        let capacity = 64 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var total: Int64 = 0
        while true {
            switch body.read(into: buffer, capacity: capacity) {
            case .bytes(let count): total += Int64(count)
            case .end: return total
            case .pause: throw .requestBody("the body paused while its length was measured")
            case .abort(let error): throw error
            }
        }
    }
}
