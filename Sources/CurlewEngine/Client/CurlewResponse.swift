public import HTTPTypes

/// A complete response: status, header fields, the collected body and the transfer's metrics.
public struct CurlewResponse: Sendable {
    /// The status of the final response (after redirects).
    public let status: HTTPResponse.Status
    /// The collected body, decompressed if the server compressed it and decompression is enabled.
    public let body: [UInt8]
    /// Timings, sizes and connection facts of the transfer.
    public let metrics: TransferMetrics
    /// The URL of the final response: the request's URL, or where redirects led.
    public let url: String

    /// The final response's header block as received, parsed on access.
    let rawHeaders: [UInt8]

    /// Creates a response that did not come from the network: for mock transports and tests.
    public init(
        status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: [UInt8] = [],
        metrics: TransferMetrics = TransferMetrics(), url: String
    ) {
        var block = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
        for field in headerFields { block += "\(field.name.rawName): \(field.value)\r\n" }
        self.init(status: status, rawHeaders: Array((block + "\r\n").utf8), body: body, metrics: metrics, url: url)
    }

    init(status: HTTPResponse.Status, rawHeaders: [UInt8], body: [UInt8], metrics: TransferMetrics, url: String) {
        self.status = status
        self.rawHeaders = rawHeaders
        self.body = body
        self.metrics = metrics
        self.url = url
    }

    /// The final response's header fields. Names compare case-insensitively.
    ///
    /// Parsed from the raw header block on each access, so a hot loop that never looks at headers pays
    /// nothing for them; keep the value if you read it often.
    public var headerFields: HTTPFields {
        ResponseHeaderParser.fields(from: rawHeaders)
    }

    /// The final response's head as swift-http-types describes it: status and header fields.
    public var head: HTTPResponse {
        HTTPResponse(status: status, headerFields: headerFields)
    }

    /// The value of the header field named `name` (any case), repeated fields joined as HTTP allows; `nil` if
    /// there is none or `name` is not a valid field name.
    public func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headerFields[$0] }
    }
}

/// Per-transfer facts from libcurl, gathered when the transfer completes.
public struct TransferMetrics: Sendable, Hashable {
    /// The protocol version of the final response.
    ///
    /// An enum, unlike the request's ``CurlewClient/HTTPVersion`` (see the README's "API stability"): it names
    /// every version libcurl reports (`CURLINFO_HTTP_VERSION`), and ``unknown`` stands for anything else.
    public enum HTTPVersion: String, Sendable, Hashable {
        /// HTTP/1.0.
        case http1_0
        /// HTTP/1.1.
        case http1_1
        /// HTTP/2.
        case http2
        /// HTTP/3.
        case http3
        /// No response arrived (libcurl reports none), or a version not listed above.
        case unknown
    }

    /// From submission to the transfer being handed to libcurl (the engine's own queueing).
    public var queued: Duration
    /// Name resolution, from the start of the transfer.
    public var dnsLookup: Duration
    /// TCP connected, from the start.
    public var connected: Duration
    /// TLS handshake done, from the start (zero without TLS).
    public var tlsHandshakeDone: Duration
    /// First response byte, from the start.
    public var firstByte: Duration
    /// The whole transfer, from the start, including redirects.
    public var total: Duration
    /// Whether an existing connection was reused (no new connection was opened).
    public var reusedConnection: Bool
    /// The HTTP version of the final response.
    public var httpVersion: HTTPVersion
    /// Request body bytes sent, as on the wire: a chunked body (a stream of unknown length, a compressed body)
    /// counts its chunk framing too.
    public var bytesSent: Int64
    /// Response body bytes as they came over the wire (before decompression; `body.count` is the decoded size).
    public var bytesReceived: Int64
    /// Response header bytes received.
    public var headerBytesReceived: Int
    /// Redirects followed.
    public var redirectCount: Int
    /// The local port of the connection, which identifies it on loopback.
    public var localPort: Int
    /// How many times the request went out again on a fresh connection because the pooled one it was given was
    /// dead or unusable (closed, reset, idle-closed, GOAWAY'd, or holding bytes no request asked for) before any
    /// byte of a response arrived: 0 or 1. The timings and sizes above are those of the last attempt.
    public var freshConnectionRetries: Int
    /// Whether a redirect took the request to another origin than its URL's (scheme, host and port), even if a
    /// later one led back: from that redirect on, the request went without its credentials (`Authorization`,
    /// `Cookie` and the other fields the engine withholds from other origins), so a `401` at the end says nothing of
    /// them.
    public var leftRequestedOrigin: Bool

    /// Creates metrics; every value defaults to zero (for mock transports and tests).
    public init(
        queued: Duration = .zero, dnsLookup: Duration = .zero, connected: Duration = .zero,
        tlsHandshakeDone: Duration = .zero, firstByte: Duration = .zero, total: Duration = .zero,
        reusedConnection: Bool = false, httpVersion: HTTPVersion = .unknown, bytesSent: Int64 = 0,
        bytesReceived: Int64 = 0, headerBytesReceived: Int = 0, redirectCount: Int = 0, localPort: Int = 0,
        freshConnectionRetries: Int = 0, leftRequestedOrigin: Bool = false
    ) {
        self.queued = queued
        self.dnsLookup = dnsLookup
        self.connected = connected
        self.tlsHandshakeDone = tlsHandshakeDone
        self.firstByte = firstByte
        self.total = total
        self.reusedConnection = reusedConnection
        self.httpVersion = httpVersion
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.headerBytesReceived = headerBytesReceived
        self.redirectCount = redirectCount
        self.localPort = localPort
        self.freshConnectionRetries = freshConnectionRetries
        self.leftRequestedOrigin = leftRequestedOrigin
    }
}

/// Parses an HTTP/1-style header block ("Name: value\r\n" lines after a status line).
enum ResponseHeaderParser {
    static func fields(from raw: [UInt8]) -> HTTPFields {
        var fields = HTTPFields()
        var lineStart = 0
        var isFirstLine = true
        var index = 0
        while index < raw.count {
            if raw[index] == UInt8(ascii: "\n") {
                var lineEnd = index
                if lineEnd > lineStart, raw[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
                if isFirstLine {
                    isFirstLine = false
                } else if lineEnd > lineStart {
                    append(raw[lineStart..<lineEnd], to: &fields)
                }
                lineStart = index + 1
            }
            index += 1
        }
        return fields
    }

    private static func append(_ line: ArraySlice<UInt8>, to fields: inout HTTPFields) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        guard let name = HTTPField.Name(String(decoding: line[line.startIndex..<colon], as: UTF8.self)) else {
            return
        }
        var valueStart = colon + 1
        var valueEnd = line.endIndex
        while valueStart < valueEnd, line[valueStart] == UInt8(ascii: " ") || line[valueStart] == UInt8(ascii: "\t") {
            valueStart += 1
        }
        while valueEnd > valueStart, line[valueEnd - 1] == UInt8(ascii: " ") || line[valueEnd - 1] == UInt8(ascii: "\t")
        {
            valueEnd -= 1
        }
        fields.append(HTTPField(name: name, value: line[valueStart..<valueEnd]))
    }
}
