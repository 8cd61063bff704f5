import CLibCurl

/// A request body opened for one transfer: the source the read callback pulls from, and why it stopped.
final class OpenedBody {
    private let source: any BodySource
    /// The header fields the body implies (`Content-Type` of a form, `Content-Encoding`), unless the
    /// request sets them itself.
    let impliedContentType: String?
    let contentEncoding: String?
    /// Why the body stopped, when the read or seek callback failed the transfer.
    private(set) var failure: CurlewError?
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
        switch body {
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
        if case .bytes = body { return false }
        return true
    }

    /// Copies the next bytes into libcurl's buffer; returns the count, 0 at the end, `CURL_READFUNC_PAUSE`
    /// or `CURL_READFUNC_ABORT`.
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        guard capacity > 0 else { return 0 }
        switch source.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity)) {
        case .bytes(let count): return count
        case .end: return 0
        case .pause: return Int(CURL_READFUNC_PAUSE)
        case .abort(let error):
            failure = error
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// Rewinds for a 307/308 redirect or an authentication retry.
    func seek(to offset: Int64) -> Bool {
        guard offset == 0 else {
            failure = .requestBody("libcurl asked to resume the body at byte \(offset), which Curlew does not do")
            return false
        }
        if let error = source.rewind() {
            failure = error
            return false
        }
        return true
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
