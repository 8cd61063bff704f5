public import HTTPTypes

/// A `multipart/form-data` body (RFC 7578), encoded part by part while it is sent.
///
/// Parts keep the order they were appended in. Nothing is encoded up front: headers are written as the
/// transfer reaches each part, files are read with `pread` and streams are pulled as the network drains, so
/// peak memory does not depend on the size of the files. When every part's size is known (text, data and
/// files), the request announces the exact `Content-Length`, which servers and object stores that refuse chunked
/// uploads require; with a stream of unknown length among the parts it goes out chunked.
///
/// ```swift
/// var form = MultipartForm()
/// form.append(value: "holiday", forKey: "album")
/// form.append(fileAt: "/photos/beach.jpg", forKey: "image", mimeType: "image/jpeg")
/// let request = try CurlewRequest(method: .post, url: url, body: .multipart(form))
/// ```
///
/// Names and file names may hold any character: `"`, CR and LF are percent-encoded (`%22`, `%0D`, `%0A`) as
/// browsers do and form parsers expect, a backslash is escaped as `\\` (a quoted-pair), and non-ASCII
/// characters go out as UTF-8.
public struct MultipartForm: Sendable {
    /// One part of a form.
    public struct Part: Sendable {
        /// Where a part's bytes come from.
        ///
        /// A struct rather than an enum, so that sources can be added without breaking a caller's `switch`. Make one
        /// with ``bytes(_:)``, ``file(_:)`` or ``stream(_:)``; read it back with the property of the same name,
        /// which is `nil` for the other kinds.
        public struct Content: Sendable {
            /// The package's exhaustive view of the source, for the engine and the curl renderer.
            package enum Storage: Sendable {
                case bytes([UInt8])
                case file(FileBody)
                case stream(RequestBodyStream)
            }

            package let storage: Storage

            init(_ storage: Storage) { self.storage = storage }

            /// Bytes in memory.
            public static func bytes(_ bytes: [UInt8]) -> Content { Content(.bytes(bytes)) }

            /// A file's bytes, read while they are sent; its size counts towards `Content-Length`.
            public static func file(_ file: FileBody) -> Content { Content(.file(file)) }

            /// A one-shot stream; with an unknown length the form goes out chunked.
            public static func stream(_ stream: RequestBodyStream) -> Content { Content(.stream(stream)) }

            /// The bytes of a ``bytes(_:)`` part; `nil` for every other kind.
            public var bytes: [UInt8]? {
                if case .bytes(let bytes) = storage { bytes } else { nil }
            }

            /// The file of a ``file(_:)`` part; `nil` for every other kind.
            public var file: FileBody? {
                if case .file(let file) = storage { file } else { nil }
            }

            /// The stream of a ``stream(_:)`` part; `nil` for every other kind.
            public var stream: RequestBodyStream? {
                if case .stream(let stream) = storage { stream } else { nil }
            }
        }

        /// The form field's name.
        public var name: String
        /// The file name the server sees, if the part is a file.
        public var fileName: String?
        /// The part's `Content-Type`, if any.
        public var contentType: String?
        /// Further header fields of the part.
        public var headerFields: HTTPFields
        /// The part's bytes.
        public var content: Content

        /// Creates a part.
        public init(
            name: String, fileName: String? = nil, contentType: String? = nil, headerFields: HTTPFields = [:],
            content: Content
        ) {
            self.name = name
            self.fileName = fileName
            self.contentType = contentType
            self.headerFields = headerFields
            self.content = content
        }
    }

    /// The parts, in the order they are sent.
    public var parts: [Part] = []
    /// The boundary between parts. A generated boundary is 128 random bits and is replaced if it occurs in
    /// an in-memory part; a boundary given to ``init(boundary:)`` must not occur in any part.
    public private(set) var boundary: String
    let boundaryIsGenerated: Bool

    /// Creates an empty form.
    ///
    /// - Parameter boundary: a fixed boundary (1 to 70 characters from RFC 2046's set), or `nil` for a
    ///   random one. A request with an invalid boundary fails with ``CurlewError/Code/invalidRequest``.
    public init(boundary: String? = nil) {
        self.boundary = boundary ?? Self.randomBoundary()
        self.boundaryIsGenerated = boundary == nil
    }

    /// Whether the form can be sent more than once: true unless a part is a stream.
    public var isReplayable: Bool {
        !parts.contains { part in
            if case .stream = part.content.storage { return true }
            return false
        }
    }

    /// The `Content-Type` header value of the form, with its boundary. Curlew sets it on requests with this form; a
    /// caller who sets it themselves should read it after adding the last part, since the append methods replace a
    /// generated boundary that a part contains. A request whose `Content-Type` names another boundary fails with
    /// ``CurlewError/Code/invalidRequest`` rather than sending a form no server can read.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Appends a text field.
    public mutating func append(value: String, forKey name: String, headerFields: HTTPFields = [:]) {
        appendInMemory(Part(name: name, headerFields: headerFields, content: .bytes(Array(value.utf8))))
    }

    /// Appends a part whose bytes are known now, and replaces a generated boundary they contain at once, so that
    /// ``boundary`` and ``contentType`` already say what will be sent.
    private mutating func appendInMemory(_ part: Part) {
        parts.append(part)
        guard boundaryIsGenerated, case .bytes(let bytes) = part.content.storage,
            bytes.contains(subsequence: Array(boundary.utf8))
        else { return }
        for _ in 0..<8 {
            boundary = Self.randomBoundary()
            if !Self.inMemoryParts(of: parts, contain: boundary) { return }
        }
    }

    static func inMemoryParts(of parts: [Part], contain boundary: String) -> Bool {
        let needle = Array(boundary.utf8)
        return parts.contains { part in
            if case .bytes(let bytes) = part.content.storage { return bytes.contains(subsequence: needle) }
            return false
        }
    }

    /// Appends bytes in memory, as a file part if `fileName` is given.
    public mutating func append(
        data: [UInt8], forKey name: String, fileName: String? = nil, mimeType: String? = nil,
        headerFields: HTTPFields = [:]
    ) {
        appendInMemory(
            Part(
                name: name, fileName: fileName, contentType: mimeType ?? fileName.map { _ in Self.defaultFileType },
                headerFields: headerFields, content: .bytes(data)))
    }

    /// Appends a file from disk, streamed when the transfer reaches it.
    ///
    /// - Parameters:
    ///   - fileName: the name the server sees; the path's last component by default.
    ///   - mimeType: `application/octet-stream` by default.
    public mutating func append(
        fileAt path: String, forKey name: String, fileName: String? = nil, mimeType: String? = nil,
        headerFields: HTTPFields = [:]
    ) {
        let lastComponent = PercentEncoding.segments(of: path, omittingEmpty: true).last.map(String.init) ?? path
        append(
            file: .path(path), forKey: name, fileName: fileName ?? lastComponent, mimeType: mimeType,
            headerFields: headerFields)
    }

    /// Appends a file body (a path or descriptor, with offset and length), streamed when the transfer reaches it.
    public mutating func append(
        file: FileBody, forKey name: String, fileName: String, mimeType: String? = nil, headerFields: HTTPFields = [:]
    ) {
        parts.append(
            Part(
                name: name, fileName: fileName, contentType: mimeType ?? Self.defaultFileType,
                headerFields: headerFields, content: .file(file)))
    }

    /// Appends a one-shot stream, pulled when the transfer reaches it.
    public mutating func append(
        stream: RequestBodyStream, forKey name: String, fileName: String? = nil, mimeType: String? = nil,
        headerFields: HTTPFields = [:]
    ) {
        parts.append(
            Part(
                name: name, fileName: fileName, contentType: mimeType ?? fileName.map { _ in Self.defaultFileType },
                headerFields: headerFields, content: .stream(stream)))
    }

    static let defaultFileType = "application/octet-stream"

    static func randomBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = Array("0123456789abcdef".utf8)
        var characters = Array("curlew-".utf8)
        for _ in 0..<32 { characters.append(hex[Int(generator.next(upperBound: UInt8(16)))]) }
        return String(decoding: characters, as: UTF8.self)
    }

    /// RFC 2046: 1 to 70 characters of `bchars`, not ending in a space.
    static func isValidBoundary(_ boundary: String) -> Bool {
        let allowed = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? ".utf8)
        let bytes = Array(boundary.utf8)
        return (1...70).contains(bytes.count) && bytes.allSatisfy(allowed.contains) && bytes.last != UInt8(ascii: " ")
    }

    /// The quoted-string form of a name or file name in `Content-Disposition`.
    static func quoted(_ value: String) -> String {
        var escaped = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": escaped += "%22"
            case "\r": escaped += "%0D"
            case "\n": escaped += "%0A"
            case "\\": escaped += "\\\\"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }

    /// A part's header block, from its delimiter line to the blank line before its content.
    static func header(of part: Part, boundary: String, isFirst: Bool) -> [UInt8] {
        var text = isFirst ? "--\(boundary)\r\n" : "\r\n--\(boundary)\r\n"
        text += "Content-Disposition: form-data; name=\(quoted(part.name))"
        if let fileName = part.fileName { text += "; filename=\(quoted(fileName))" }
        text += "\r\n"
        if let contentType = part.contentType { text += "Content-Type: \(contentType)\r\n" }
        for field in part.headerFields where field.name != .contentDisposition && field.name != .contentType {
            text += "\(field.name.rawName): \(field.value)\r\n"
        }
        return Array((text + "\r\n").utf8)
    }

    static func closingDelimiter(boundary: String, isEmpty: Bool) -> [UInt8] {
        Array((isEmpty ? "--\(boundary)--\r\n" : "\r\n--\(boundary)--\r\n").utf8)
    }
}

/// A form as the read callback sees it: a sequence of segments (headers in memory, part contents), each
/// opened when the transfer reaches it.
final class MultipartBodySource: BodySource {
    private enum Segment {
        case memory([UInt8])
        case file(FileBodySource.Measured)
        case stream(StreamBodySource)
    }

    private let segments: [Segment]
    let length: Int64?
    /// The boundary finally used (a generated one may have been replaced).
    let boundary: String
    private var index = 0
    private var current: (any BodySource)?
    private var waker: BodyWaker?

    private init(segments: [Segment], length: Int64?, boundary: String) {
        self.segments = segments
        self.length = length
        self.boundary = boundary
    }

    deinit { close() }

    var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Measures every file, claims every stream and fixes the boundary, before anything is sent.
    static func open(_ form: MultipartForm) -> Result<MultipartBodySource, CurlewError> {
        var boundary = form.boundary
        guard MultipartForm.isValidBoundary(boundary) else {
            return .failure(.invalidRequest("invalid multipart boundary \(boundary.debugDescription)"))
        }
        // Only parts added to `parts` directly can still contain a generated boundary here.
        var attempts = 0
        while MultipartForm.inMemoryParts(of: form.parts, contain: boundary) {
            guard form.boundaryIsGenerated, attempts < 8 else {
                return .failure(.invalidRequest("the multipart boundary occurs in the content of a part"))
            }
            boundary = MultipartForm.randomBoundary()
            attempts += 1
        }

        // A content type is written into the part's header as given: CR, LF or NUL in it would end that header
        // and start another (found by `make fuzz`).
        if let part = form.parts.first(where: { part in
            part.contentType?.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 } ?? false
        }) {
            return .failure(
                .invalidRequest("the content type of part \(part.name.debugDescription) contains CR, LF or NUL"))
        }

        var segments: [Segment] = []
        var length: Int64? = 0
        var claimed: [StreamBodySource] = []
        func add(_ bytes: [UInt8]) {
            segments.append(.memory(bytes))
            length = length.map { $0 + Int64(bytes.count) }
        }
        for (position, part) in form.parts.enumerated() {
            add(MultipartForm.header(of: part, boundary: boundary, isFirst: position == 0))
            switch part.content.storage {
            case .bytes(let bytes):
                add(bytes)
            case .file(let file):
                switch FileBodySource.measure(file) {
                case .success(let measured):
                    segments.append(.file(measured))
                    length = length.map { $0 + measured.length }
                case .failure(let error):
                    for stream in claimed { stream.close() }
                    return .failure(error)
                }
            case .stream(let stream):
                switch StreamBodySource.open(stream) {
                case .success(let source):
                    claimed.append(source)
                    segments.append(.stream(source))
                    length = length.flatMap { total in source.length.map { total + $0 } }
                case .failure(let error):
                    for stream in claimed { stream.close() }
                    return .failure(error)
                }
            }
        }
        add(MultipartForm.closingDelimiter(boundary: boundary, isEmpty: form.parts.isEmpty))
        return .success(MultipartBodySource(segments: segments, length: length, boundary: boundary))
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyReadResult {
        // Fill libcurl's buffer across segments: libcurl sends what one call returns, and a form of many small
        // parts would otherwise go out in packets of a header line each.
        var filled = 0
        while filled < buffer.count {
            guard let source = currentSource() else {
                if case .abort(let error) = openFailure { return .abort(error) }
                return filled > 0 ? .bytes(filled) : .end
            }
            switch source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...])) {
            case .bytes(let count):
                filled += count
            case .end:
                source.close()
                current = nil
                index += 1
            case .pause:
                return filled > 0 ? .bytes(filled) : .pause
            case .abort(let error):
                return .abort(error)
            }
        }
        return .bytes(filled)
    }

    private var openFailure: BodyReadResult?

    /// The source of the segment being sent, opened on first use; `nil` after the last one or on failure.
    private func currentSource() -> (any BodySource)? {
        if let current { return current }
        guard index < segments.count, openFailure == nil else { return nil }
        let source: any BodySource
        switch segments[index] {
        case .memory(let bytes):
            source = MemoryBodySource(bytes)
        case .file(let measured):
            switch FileBodySource.open(measured) {
            case .success(let file): source = file
            case .failure(let error):
                openFailure = .abort(error)
                return nil
            }
        case .stream(let stream):
            stream.setWaker(waker)
            source = stream
        }
        current = source
        return source
    }

    func rewind() -> CurlewError? {
        for segment in segments {
            if case .stream(let stream) = segment, let error = stream.rewind() { return error }
        }
        if let current, !(current is StreamBodySource) { current.close() }
        current = nil
        index = 0
        openFailure = nil
        return nil
    }

    func setWaker(_ waker: BodyWaker?) {
        self.waker = waker
        for segment in segments {
            if case .stream(let stream) = segment { stream.setWaker(waker) }
        }
    }

    func close() {
        current?.close()
        current = nil
        for segment in segments {
            if case .stream(let stream) = segment { stream.close() }
        }
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        let first = needle[0]
        var start = 0
        while start <= count - needle.count {
            guard let candidate = self[start...(count - needle.count)].firstIndex(of: first) else { return false }
            if self[candidate..<(candidate + needle.count)].elementsEqual(needle) { return true }
            start = candidate + 1
        }
        return false
    }
}

extension MultipartForm {
    /// The exact size of the encoded form, which a request with it announces as `Content-Length`: `nil` when a
    /// stream part has no declared length or a file part cannot be opened. File parts are opened, measured and
    /// closed; stream parts are not read.
    public var encodedLength: Int64? {
        var total: Int64 = 0
        for (position, part) in parts.enumerated() {
            total += Int64(MultipartForm.header(of: part, boundary: boundary, isFirst: position == 0).count)
            switch part.content.storage {
            case .bytes(let bytes):
                total += Int64(bytes.count)
            case .file(let file):
                guard case .success(let measured) = FileBodySource.measure(file) else { return nil }
                total += measured.length
            case .stream(let stream):
                guard let length = stream.length else { return nil }
                total += length
            }
        }
        return total + Int64(MultipartForm.closingDelimiter(boundary: boundary, isEmpty: parts.isEmpty).count)
    }
}
