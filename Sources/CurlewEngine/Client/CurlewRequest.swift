public import HTTPTypes
public import Logging

/// An HTTP request for the engine: a method, a validated URL, header fields and an optional body,
/// plus optional per-request overrides of the client's configuration.
///
/// Validation happens when the request is built, so a request value can be executed many times at no
/// further cost:
/// ```swift
/// var request = try CurlewRequest(method: .post, url: "http://127.0.0.1:8080/echo")
/// try request.addHeader("X-Trace", "abc")
/// request.body = .bytes(Array("hello".utf8))
/// let response = try await CurlewClient.shared.execute(request)
/// ```
public struct CurlewRequest: Sendable {
    /// The request body.
    ///
    /// A struct rather than an enum, so that kinds of body can be added without breaking a caller's `switch`.
    /// Make one with ``bytes(_:)``, ``file(_:)``, ``stream(_:)`` or ``multipart(_:)`` (`request.body = .bytes(data)`);
    /// read it back with the property of the same name, which is `nil` for the other kinds.
    public struct Body: Sendable {
        /// The package's view, for an exhaustive `switch` in the engine and the curl renderer: a single stored enum,
        /// so the struct costs nothing over the enum it wraps (no boxing, no extra indirection) on the send path.
        package enum Storage: Sendable {
            case bytes([UInt8])
            case file(FileBody)
            case stream(RequestBodyStream)
            case multipart(MultipartForm)
        }

        package let storage: Storage

        init(_ storage: Storage) { self.storage = storage }

        /// Bytes in memory, copied only into libcurl's send buffer as it asks for them.
        public static func bytes(_ bytes: [UInt8]) -> Body { Body(.bytes(bytes)) }

        /// A regular file's bytes, read with `pread` as libcurl asks for them: constant memory whatever the size,
        /// replayable for 307/308 redirects, and a ``CurlewError/Code/requestBodyFailed`` error instead of a short
        /// or mixed body if the file cannot be read or changes while it is sent.
        public static func file(_ file: FileBody) -> Body { Body(.file(file)) }

        /// Bytes produced while they are sent, with backpressure; one-shot. See ``RequestBodyStream``.
        public static func stream(_ stream: RequestBodyStream) -> Body { Body(.stream(stream)) }

        /// A `multipart/form-data` form, encoded part by part while it is sent; the request gets the form's
        /// `Content-Type` unless it sets one. See ``MultipartForm``.
        public static func multipart(_ form: MultipartForm) -> Body { Body(.multipart(form)) }

        /// The bytes of a ``bytes(_:)`` body; `nil` for every other kind.
        public var bytes: [UInt8]? {
            if case .bytes(let bytes) = storage { bytes } else { nil }
        }

        /// The file of a ``file(_:)`` body; `nil` for every other kind.
        public var file: FileBody? {
            if case .file(let file) = storage { file } else { nil }
        }

        /// The stream of a ``stream(_:)`` body; `nil` for every other kind.
        public var stream: RequestBodyStream? {
            if case .stream(let stream) = storage { stream } else { nil }
        }

        /// The form of a ``multipart(_:)`` body; `nil` for every other kind.
        public var multipart: MultipartForm? {
            if case .multipart(let form) = storage { form } else { nil }
        }
    }

    /// How the request body is compressed on the way out.
    public struct BodyCompression: Sendable, Hashable {
        enum Algorithm: Sendable, Hashable {
            case gzip(level: Int)
        }

        let algorithm: Algorithm

        /// gzip with zlib's deflate, streamed in constant memory, sent with `Content-Encoding: gzip`. The
        /// compressed size is not known in advance, so the body goes out chunked on HTTP/1.1.
        ///
        /// - Parameter level: 1 (fastest) to 9 (smallest); zlib's default is 6.
        public static func gzip(level: Int = 6) -> BodyCompression {
            BodyCompression(algorithm: .gzip(level: min(max(level, 0), 9)))
        }
    }

    /// The request method.
    public var method: HTTPRequest.Method
    /// The absolute URL, as validated: http or https, or `http+unix` / `https+unix` with a percent-encoded socket
    /// path as the host (`http+unix://%2Ftmp%2Fapp.sock/path`, AsyncHTTPClient's spelling), which sends the request to
    /// `localhost` over that Unix domain socket.
    public private(set) var url: String
    /// The http or https URL libcurl is given: ``url`` itself, or for an `http+unix` / `https+unix` URL the same
    /// request to `localhost`.
    private(set) var transferURL: String
    /// The socket path an `http+unix` or `https+unix` ``url`` names; nil for every other URL.
    private(set) var urlUnixSocketPath: String?
    /// The header fields to send. Use ``addHeader(_:_:)`` for strings from untrusted sources:
    /// it rejects CR, LF and NUL where `HTTPFields` would silently turn them into spaces. `Content-Length` and
    /// `Transfer-Encoding` are never sent as given: the engine frames the body itself (a stream of known size says
    /// so with ``RequestBodyStream/length``), as AsyncHTTPClient does, so a length that disagrees with the body
    /// cannot make its tail another request.
    public var headerFields: HTTPFields
    /// The body, if any.
    public var body: Body?
    /// Where this request logs its debug-level events, instead of the client's ``CurlewClient/Configuration/logger``.
    public var logger: Logger?
    /// Compresses the body on the fly (`Content-Encoding` is set unless the request sets it).
    public var bodyCompression: BodyCompression?
    /// Called with upload and download progress, on the transfer's event loop: keep it short and non-blocking
    /// (hand the value to a task or a stream, as ``progressUpdates()`` does). At most once per
    /// ``progressInterval``, plus a last call with ``TransferProgress/isComplete`` set when the transfer ends.
    public var onProgress: (@Sendable (TransferProgress) -> Void)?
    /// The least time between two ``onProgress`` calls.
    public var progressInterval: Duration = .milliseconds(100)

    /// Overrides ``CurlewClient/Configuration/timeouts`` for this request, field by field: setting
    /// `request.timeouts.total` keeps the client's connect and idle timeouts.
    public var timeouts = TimeoutOverrides()
    /// Overrides ``CurlewClient/Configuration/redirects`` for this request.
    public var redirects: CurlewClient.Redirects?
    /// Overrides ``CurlewClient/Configuration/httpVersion`` for this request.
    public var httpVersion: CurlewClient.HTTPVersion?
    /// Overrides ``CurlewClient/Configuration/maxResponseBodySize`` for this request.
    public var maxResponseBodySize: Int?
    /// Overrides ``CurlewClient/Configuration/decompression`` for this request.
    public var decompression: CurlewClient.Decompression?
    /// Overrides ``CurlewClient/Configuration/expectContinue`` for this request.
    public var expectContinue: CurlewClient.ExpectContinue?
    /// Sends this request over the Unix domain socket at this path instead of TCP (libcurl's
    /// `CURLOPT_UNIX_SOCKET_PATH`), overriding ``CurlewClient/Configuration/unixSocketPath``; the URL's host still
    /// goes out in `Host` and, for https, is what the server's certificate must name. An `http+unix` or
    /// `https+unix` ``url`` names its socket itself, which wins over this. A connection over a socket is reused
    /// only by requests to the same socket, never by TCP requests to the same host. Redirects follow over the
    /// same socket, whatever host they name.
    public var unixSocketPath: String?
    /// Makes this request's connection from this local address or interface, overriding
    /// ``CurlewClient/Configuration/localAddress`` (same syntax: `"host!127.0.0.2"`, `"if!eth0"`). One that differs
    /// from the client's gets a new connection, closed after the response: libcurl 8.x would otherwise hand it a
    /// pooled connection made from another address.
    public var localAddress: String?
    /// Caps how fast this request's body goes out, in bytes per second (libcurl's `CURLOPT_MAX_SEND_SPEED_LARGE`,
    /// averaged over the transfer); nil sends as fast as the connection allows.
    public var maxSendBytesPerSecond: Int64?

    /// Creates a request, validating the URL.
    ///
    /// - Throws: ``CurlewError`` with code ``CurlewError/Code/protocolNotAllowed`` for schemes other than
    ///   http, https, http+unix and https+unix, and ``CurlewError/Code/invalidRequest`` for malformed URLs, URLs with control
    ///   characters, and URLs whose host Swift's and libcurl's parsers read differently.
    public init(
        method: HTTPRequest.Method = .get, url: String, headerFields: HTTPFields = [:], body: Body? = nil
    ) throws {
        let validated = try URLValidation.validate(url)
        self.method = method
        self.url = url
        self.transferURL = validated.transferURL
        self.urlUnixSocketPath = validated.unixSocketPath
        self.headerFields = headerFields
        self.body = body
    }

    /// This request at another URL, validated as ``init(method:url:headerFields:body:)`` validates it, with every
    /// other setting as it was: the route layer takes a provider's credential parameters out of the URL of a request
    /// an interceptor moved to another origin, and a copy made field by field would drop a setting added later.
    package func replacingURL(with url: String) throws -> CurlewRequest {
        let validated = try URLValidation.validate(url)
        var request = self
        request.url = url
        request.transferURL = validated.transferURL
        request.urlUnixSocketPath = validated.unixSocketPath
        return request
    }

    /// A request whose URL was filled from a template another of whose URLs passed the full validation, with only
    /// the checks ``URLValidation/validateFilled(_:)`` keeps (see there what the caller must prove).
    package init(method: HTTPRequest.Method, filledURL url: String) throws {
        let validated = try URLValidation.validateFilled(url)
        self.method = method
        self.url = url
        self.transferURL = validated.transferURL
        self.urlUnixSocketPath = nil
        self.headerFields = [:]
        self.body = nil
    }

    /// Creates a request with header fields given as strings, each validated like ``addHeader(_:_:)``.
    public init(
        method: HTTPRequest.Method = .get, url: String, headers: [(String, String)], body: Body? = nil
    ) throws {
        try self.init(method: method, url: url, body: body)
        for (name, value) in headers {
            try addHeader(name, value)
        }
    }

    /// Creates a request from an http-types request head, so code written against swift-http-types moves over
    /// unchanged: the URL is `scheme://authority` followed by the head's path (query included), validated as
    /// ``init(method:url:headerFields:body:)`` does.
    ///
    /// - Throws: ``CurlewError/Code/invalidRequest`` if the head has no scheme, authority or path (an
    ///   `OPTIONS *` or `CONNECT` form), if its scheme is not one by RFC 3986's grammar (letters, digits, `+`, `-`,
    ///   `.`, a letter first), if its path does not start with `/` or its authority holds a `/`, `?` or
    ///   `#` (either would move the URL's host, port or user-info away from the head's authority:
    ///   path `@other:8080/` makes `authority` a user name), and the errors of
    ///   ``init(method:url:headerFields:body:)``.
    public init(_ head: HTTPRequest, body: Body? = nil) throws {
        guard let scheme = head.scheme, let authority = head.authority, let path = head.path else {
            throw CurlewError.invalidRequest("the request head needs a scheme, an authority and a path")
        }
        // A scheme by RFC 3986's grammar: anything else (`https://evil.example/#`) would carry a URL of its own.
        guard URLParts.isSchemeName(scheme) else {
            throw CurlewError.invalidRequest("the request head's scheme is not a scheme")
        }
        // By bytes: a combining mark after a delimiter fuses with it into another Character, but parsers read the byte.
        guard PercentEncoding.startsWithSlash(path) else {
            throw CurlewError.invalidRequest("the request head's path must start with \"/\"")
        }
        guard
            !authority.utf8.contains(where: {
                $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
            })
        else {
            throw CurlewError.invalidRequest("the request head's authority holds a \"/\", \"?\" or \"#\"")
        }
        try self.init(
            method: head.method, url: "\(scheme)://\(authority)\(path)", headerFields: head.headerFields, body: body)
    }

    /// The request's head as swift-http-types describes it: method, scheme, authority, path and header fields.
    public var head: HTTPRequest {
        // The URL was validated as an absolute http(s) URL; a fragment is never sent.
        let parts = URLParts(url)
        var path = String(parts.path + parts.query)
        if !PercentEncoding.startsWithSlash(path) { path = "/" + path }
        return HTTPRequest(
            method: method, scheme: parts.scheme.map(String.init), authority: String(parts.authority), path: path,
            headerFields: headerFields)
    }

    /// The value of the header field named `name` (any case), repeated fields joined as HTTP allows; `nil` if
    /// there is none or `name` is not a valid field name.
    public func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headerFields[$0] }
    }

    /// Appends a header field after checking it.
    ///
    /// - Throws: ``CurlewError/Code/invalidRequest`` if the name is not a valid HTTP token, or the value holds
    ///   CR, LF or NUL (header injection), instead of sending something else than what was asked.
    public mutating func addHeader(_ name: String, _ value: String) throws {
        headerFields.append(try Self.validatedField(name, value))
    }

    /// Sets a header field (replacing existing ones of that name) after the checks of ``addHeader(_:_:)``.
    public mutating func setHeader(_ name: String, _ value: String) throws {
        let field = try Self.validatedField(name, value)
        headerFields[field.name] = field.value
    }

    /// Sets a header field that is a secret (an API key, a token): marked never-indexed
    /// (`HTTPField.indexingStrategy = .disallow`), so it is withheld from a redirect to another origin as
    /// `Authorization` is, and logs redact it. Replaces every field of the same name.
    ///
    /// - Throws: ``CurlewError`` (`invalidRequest`) as ``setHeader(_:_:)`` does.
    public mutating func setCredentialHeader(_ name: String, _ value: String) throws {
        var field = try Self.validatedField(name, value)
        field.indexingStrategy = .disallow
        headerFields[fields: field.name] = [field]
    }

    /// A GET without body or header fields that overrides none of the client's settings: the request shape whose
    /// libcurl options are the same every time.
    var usesClientDefaultsForPlainGET: Bool {
        method == .get && body == nil && headerFields.isEmpty && timeouts.isEmpty && redirects == nil
            && httpVersion == nil && maxResponseBodySize == nil && decompression == nil && expectContinue == nil
            && onProgress == nil && maxSendBytesPerSecond == nil && unixSocketPath == nil && urlUnixSocketPath == nil
            && localAddress == nil
    }

    /// The Unix domain socket this request goes over for a client whose default is `clientDefault`, nil for TCP:
    /// the URL's own, else the request's, else the client's.
    @inline(__always)
    func effectiveUnixSocketPath(clientDefault: String?) -> String? {
        urlUnixSocketPath ?? unixSocketPath ?? clientDefault
    }

    /// Reports this request's progress as an `AsyncSequence`: installs an ``onProgress`` handler that feeds the
    /// returned stream (keeping only the newest value if the reader is behind) and finishes it when the transfer
    /// ends. Each call makes a new stream for the next execution of the request.
    public mutating func progressUpdates() -> AsyncStream<TransferProgress> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: TransferProgress.self, bufferingPolicy: .bufferingNewest(1))
        onProgress = { progress in
            continuation.yield(progress)
            if progress.isComplete { continuation.finish() }
        }
        return stream
    }

    static func validatedField(_ name: String, _ value: String) throws -> HTTPField {
        guard let fieldName = HTTPField.Name(name) else {
            throw CurlewError.invalidRequest("invalid header name \(name.debugDescription)")
        }
        if value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) {
            throw CurlewError.invalidRequest("header \(name) contains CR, LF or NUL")
        }
        return HTTPField(name: fieldName, value: value)
    }
}

/// Which bytes of a file a request sends.
public struct FileBody: Sendable, Hashable {
    enum Source: Sendable, Hashable {
        case path(String)
        case descriptor(Int32)
    }

    let source: Source
    /// Where the body starts in the file.
    public let offset: Int64
    /// How many bytes to send; `nil` sends everything from `offset` to the end as the file is when the
    /// transfer starts.
    public let length: Int64?

    /// The file at `path`, opened when the transfer starts and closed when it ends.
    public static func path(_ path: String, offset: Int64 = 0, length: Int64? = nil) -> FileBody {
        FileBody(source: .path(path), offset: offset, length: length)
    }

    /// The file's path, if the body names one (rather than a descriptor).
    public var path: String? {
        if case .path(let path) = source { return path }
        return nil
    }

    /// The caller's descriptor, if the body is one.
    public var descriptor: Int32? {
        if case .descriptor(let descriptor) = source { return descriptor }
        return nil
    }

    /// An open descriptor of a regular file. The caller keeps ownership: the engine neither moves its file
    /// offset (it uses `pread`) nor closes it, and the caller must keep it open until the response has arrived.
    public static func descriptor(_ descriptor: Int32, offset: Int64 = 0, length: Int64? = nil) -> FileBody {
        FileBody(source: .descriptor(descriptor), offset: offset, length: length)
    }
}

extension CurlewRequest.Body {
    /// The body's exact size, as a request announces it in `Content-Length` (before any compression): files are
    /// opened and measured, forms add up their encoded parts; `nil` for a stream without a declared length (or a
    /// form holding one) and for a file that cannot be opened. Streams are not read.
    public var knownLength: Int64? {
        switch storage {
        case .bytes(let bytes): Int64(bytes.count)
        case .file(let file): try? FileBodySource.measure(file).get().length
        case .stream(let stream): stream.length
        case .multipart(let form): form.encodedLength
        }
    }

    /// A stream announced as empty (`length: 0`).
    var announcedEmptyStream: RequestBodyStream? {
        if case .stream(let stream) = storage, stream.length == 0 { stream } else { nil }
    }

    /// Whether the body can be sent more than once: bytes, files and forms without stream parts.
    public var isReplayable: Bool {
        switch storage {
        case .bytes, .file: true
        case .stream: false
        case .multipart(let form): form.isReplayable
        }
    }
}

extension CurlewRequest {
    /// Per-request timeouts. Each field left `nil` inherits the client's value; `.some(nil)` (``noLimit``) lifts
    /// that limit for this request only.
    public struct TimeoutOverrides: Sendable, Hashable {
        /// A value that lifts a limit: `request.timeouts.total = TimeoutOverrides.noLimit`.
        public static let noLimit: Duration?? = .some(nil)

        /// Overrides ``CurlewClient/Timeouts/connect``.
        public var connect: Duration??
        /// Overrides ``CurlewClient/Timeouts/total``.
        public var total: Duration??
        /// Overrides ``CurlewClient/Timeouts/idle``.
        public var idle: Duration??

        /// Overrides the fields given; the others inherit the client's.
        public init(connect: Duration?? = nil, total: Duration?? = nil, idle: Duration?? = nil) {
            self.connect = connect
            self.total = total
            self.idle = idle
        }

        /// Overrides all three fields with `timeouts`' values.
        public init(_ timeouts: CurlewClient.Timeouts) {
            self.init(connect: .some(timeouts.connect), total: .some(timeouts.total), idle: .some(timeouts.idle))
        }

        /// Whether every field inherits.
        public var isEmpty: Bool { connect == nil && total == nil && idle == nil }

        /// The timeouts in force for a request of a client with `defaults`.
        public func applied(to defaults: CurlewClient.Timeouts) -> CurlewClient.Timeouts {
            CurlewClient.Timeouts(
                connect: connect ?? defaults.connect, total: total ?? defaults.total, idle: idle ?? defaults.idle)
        }
    }
}
