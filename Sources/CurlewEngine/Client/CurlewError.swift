import CLibCurl
import Glibc

/// The one error the engine throws, except for task cancellation, which throws `CancellationError`.
///
/// Switch on ``code`` to decide what to do; ``curlCode`` and ``curlMessage`` keep libcurl's own
/// words for logs and bug reports.
public struct CurlewError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which timeout fired.
    ///
    /// A struct rather than an enum, so that timeouts (a first-byte or a send timeout, say) can be added without
    /// breaking a caller's `switch`. ``name`` is stable; it ends ``Code/name`` of a timeout (`"timeout.idle"`).
    public struct TimeoutKind: Sendable, Hashable, CustomStringConvertible {
        /// `"connect"`, `"waitingForConnection"`, `"total"` or `"idle"`: the static member's name.
        public let name: String

        private init(name: String) { self.name = name }

        /// Establishing the connection (DNS, TCP, TLS) took longer than ``Timeouts/connect``, counted from
        /// submission (for a retry on a fresh connection or a redirect's request, from the retry or the redirect).
        public static let connect = TimeoutKind(name: "connect")
        /// The request waited for a free connection for longer than ``Timeouts/connect``, the bound on getting a
        /// connection: every connection its event loop's share of
        /// ``CurlewClient/Configuration/maxConnectionsPerHost`` and ``CurlewClient/Configuration/maxConnectionsTotal``
        /// allows was busy (or an HTTP/2 connection it may share was still being opened). That request never reached
        /// a server; one it followed (a redirect) did, which ``CurlewError/metrics`` shows (`redirectCount`,
        /// `headerBytesReceived`).
        public static let waitingForConnection = TimeoutKind(name: "waitingForConnection")
        /// The whole request, counted from submission, took longer than ``Timeouts/total``.
        public static let total = TimeoutKind(name: "total")
        /// No byte moved in either direction for longer than ``Timeouts/idle``.
        public static let idle = TimeoutKind(name: "idle")

        public var description: String { name }
    }

    /// The failures a caller handles differently.
    ///
    /// A struct rather than an enum, so that kinds of failure can be added without breaking a caller's `switch`
    /// (which therefore ends in `default`): match with `==`, `switch` or `if error.code == .tls`.
    /// ``name`` is stable and is what logs (`error.type`), trace spans and `curlew bench`'s JSON print.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Hashable {
            case invalidRequest
            case protocolNotAllowed
            case dnsFailure
            case connectionRefused
            case connectFailed
            case timeout(TimeoutKind)
            case tls
            case tlsPinnedKeyMismatch
            case proxy
            case tooManyRedirects
            case bodyTooLarge
            case requestBodyFailed
            case requestBodyNotReplayable
            case downloadFailed
            case connectionClosed
            case invalidResponse
            case http2
            case cancelled
            case clientShutdown
            case unsupportedLibcurl
            case transport
        }

        private let kind: Kind

        private init(_ kind: Kind) { self.kind = kind }

        /// The request could not be sent as given: malformed URL, a host that parsers disagree on,
        /// CR/LF/NUL in a header, a bad option value.
        public static let invalidRequest = Code(.invalidRequest)
        /// The URL (or a redirect) uses a scheme other than http or https.
        public static let protocolNotAllowed = Code(.protocolNotAllowed)
        /// The host name (or the proxy's) could not be resolved.
        public static let dnsFailure = Code(.dnsFailure)
        /// The server actively refused the connection.
        public static let connectionRefused = Code(.connectionRefused)
        /// The connection could not be established for another reason (unreachable, reset during connect).
        public static let connectFailed = Code(.connectFailed)
        /// A timeout fired; which one is attached.
        public static func timeout(_ kind: TimeoutKind) -> Code { Code(.timeout(kind)) }
        /// TLS failed: handshake (no common TLS version, say), certificate verification, hostname mismatch, bad CA
        /// or client certificate. A pinned public key that does not match is ``tlsPinnedKeyMismatch``.
        public static let tls = Code(.tls)
        /// The server's public key is none of ``CurlewClient/TLSConfiguration/pinnedPublicKeys``: the connection
        /// was closed before anything was sent.
        public static let tlsPinnedKeyMismatch = Code(.tlsPinnedKeyMismatch)
        /// The proxy refused the request: wrong or missing credentials (a SOCKS5 authentication failure, or an
        /// HTTP proxy's 407 to CONNECT), or a target it would not connect to; the detail says which.
        public static let proxy = Code(.proxy)
        /// More redirects than allowed.
        public static let tooManyRedirects = Code(.tooManyRedirects)
        /// The response body (after decompression) exceeded the configured limit.
        public static let bodyTooLarge = Code(.bodyTooLarge)
        /// The request body could not be read, or changed while it was sent (a file that is unreadable, shrank,
        /// grew, changed or was deleted). Nothing was sent as if it were complete.
        public static let requestBodyFailed = Code(.requestBodyFailed)
        /// The request had to be sent again (a 307/308 redirect, an authentication retry, a second execution)
        /// but its body is a one-shot stream that was already (partly) sent.
        public static let requestBodyNotReplayable = Code(.requestBodyNotReplayable)
        /// A download could not be written to its destination file.
        public static let downloadFailed = Code(.downloadFailed)
        /// The connection closed or was reset before the response was complete,
        /// or the server sent fewer bytes than it announced.
        public static let connectionClosed = Code(.connectionClosed)
        /// The server sent something that is not valid HTTP, or a body whose content coding is broken, cut short or
        /// followed by stray bytes.
        public static let invalidResponse = Code(.invalidResponse)
        /// An HTTP/2 framing or stream error.
        public static let http2 = Code(.http2)
        /// The transfer was cancelled by the client shutting down.
        public static let cancelled = Code(.cancelled)
        /// The client was already shut down when the request was submitted.
        public static let clientShutdown = Code(.clientShutdown)
        /// The libcurl the process runs on is older than the oldest Curlew supports
        /// (``CurlewClient/oldestSupportedLibcurlVersion``); the detail names both versions. Every request of
        /// such a client fails with it; ``CurlewClient/requireSupportedLibcurl()`` tells at start-up.
        public static let unsupportedLibcurl = Code(.unsupportedLibcurl)
        /// Any other libcurl failure; see ``CurlewError/curlCode``.
        public static let transport = Code(.transport)

        /// Which timeout fired, for ``timeout(_:)`` codes; nil for every other.
        public var timeoutKind: TimeoutKind? {
            if case .timeout(let kind) = self.kind { kind } else { nil }
        }

        /// The stable name: the static member's name (`"connectionRefused"`), and for a timeout `"timeout."` and
        /// its kind (`"timeout.idle"`).
        public var name: String {
            switch kind {
            case .invalidRequest: "invalidRequest"
            case .protocolNotAllowed: "protocolNotAllowed"
            case .dnsFailure: "dnsFailure"
            case .connectionRefused: "connectionRefused"
            case .connectFailed: "connectFailed"
            case .timeout(let kind): "timeout.\(kind.name)"
            case .tls: "tls"
            case .tlsPinnedKeyMismatch: "tlsPinnedKeyMismatch"
            case .proxy: "proxy"
            case .tooManyRedirects: "tooManyRedirects"
            case .bodyTooLarge: "bodyTooLarge"
            case .requestBodyFailed: "requestBodyFailed"
            case .requestBodyNotReplayable: "requestBodyNotReplayable"
            case .downloadFailed: "downloadFailed"
            case .connectionClosed: "connectionClosed"
            case .invalidResponse: "invalidResponse"
            case .http2: "http2"
            case .cancelled: "cancelled"
            case .clientShutdown: "clientShutdown"
            case .unsupportedLibcurl: "unsupportedLibcurl"
            case .transport: "transport"
            }
        }

        public var description: String { name }
    }

    /// What went wrong, for matching.
    public let code: Code
    /// libcurl's `CURLcode`, when libcurl reported the failure.
    public let curlCode: Int?
    /// libcurl's detailed message (its error buffer, or `curl_easy_strerror`).
    public let curlMessage: String?
    /// The operating system's `errno` libcurl saw last (`CURLINFO_OS_ERRNO`), when non-zero.
    public let osErrno: Int32?
    /// A human-readable explanation from Curlew.
    public let detail: String
    /// How far the transfer got before it failed (connection opened or reused, bytes each way, timings); `nil`
    /// when it failed before reaching libcurl (an invalid request, a client shut down, an unreadable body).
    public var metrics: TransferMetrics?

    public init(
        code: Code, detail: String, curlCode: Int? = nil, curlMessage: String? = nil, osErrno: Int32? = nil
    ) {
        self.code = code
        self.detail = detail
        self.curlCode = curlCode
        self.curlMessage = curlMessage
        self.osErrno = osErrno
    }

    public var description: String {
        var text = "CurlewError.\(code): \(detail)"
        if let curlCode { text += " (curl \(curlCode)" + (curlMessage.map { ": \($0)" } ?? "") + ")" }
        if let osErrno { text += " [errno \(osErrno)]" }
        return text
    }

    static func invalidRequest(_ detail: String) -> CurlewError {
        CurlewError(code: .invalidRequest, detail: detail)
    }

    /// The detail of a ``TimeoutKind/waitingForConnection`` timeout, whether the engine or libcurl saw it first.
    static let waitingForConnectionDetail =
        "waited longer than the connect timeout for a free connection (every connection its event loop's share of "
        + "maxConnectionsPerHost and maxConnectionsTotal allows was busy, or an HTTP/2 one was still being opened)"
}

extension CurlewError {
    /// Maps a libcurl result to the case a caller acts on.
    ///
    /// - Parameters:
    ///   - lastStatus: the status of the last response received (0 if none), which tells a refused
    ///     redirect (a 3xx) from a reply libcurl could not read as HTTP at all; libcurl reports both as
    ///     `CURLE_UNSUPPORTED_PROTOCOL`.
    ///   - proxyConnectStatus: an HTTP proxy's answer to CONNECT (0 if none): libcurl reports a refused tunnel as a
    ///     receive error.
    static func fromCurl(
        _ result: CURLcode, message: String?, osErrno: Int32, timeoutKind: TimeoutKind, lastStatus: Int = 0,
        proxyConnectStatus: Int = 0
    ) -> CurlewError {
        let code: Code
        let detail: String
        switch result {
        case _ where proxyConnectStatus == 407:
            (code, detail) = (.proxy, "the proxy refused the credentials (407 to CONNECT)")
        case _ where proxyConnectStatus >= 300:
            (code, detail) = (.proxy, "the proxy refused the tunnel (\(proxyConnectStatus) to CONNECT)")
        case CURLE_PROXY:
            (code, detail) = (.proxy, "the proxy refused the request (SOCKS: credentials, or the target)")
        case CURLE_UNSUPPORTED_PROTOCOL where lastStatus == 0:
            (code, detail) = (.invalidResponse, "the server's reply is not HTTP/1.x or HTTP/2")
        case CURLE_UNSUPPORTED_PROTOCOL:
            (code, detail) = (.protocolNotAllowed, "only http and https are allowed, also on redirects")
        case CURLE_URL_MALFORMAT, CURLE_BAD_FUNCTION_ARGUMENT:
            (code, detail) = (.invalidRequest, "libcurl rejected the request")
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            (code, detail) = (.dnsFailure, "could not resolve host")
        case CURLE_COULDNT_CONNECT:
            if osErrno == ECONNREFUSED {
                (code, detail) = (.connectionRefused, "connection refused")
            } else {
                (code, detail) = (.connectFailed, "could not connect")
            }
        case CURLE_INTERFACE_FAILED:
            (code, detail) = (.connectFailed, "could not bind to the local address or interface")
        case CURLE_OPERATION_TIMEDOUT where timeoutKind == .waitingForConnection:
            (code, detail) = (.timeout(timeoutKind), waitingForConnectionDetail)
        case CURLE_OPERATION_TIMEDOUT:
            (code, detail) = (.timeout(timeoutKind), "\(timeoutKind.name) timeout")
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED, CURLE_SSL_CRL_BADFILE,
            CURLE_SSL_CLIENTCERT:
            (code, detail) = (.tls, "TLS failed")
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            (code, detail) = (.tlsPinnedKeyMismatch, "the server's public key matches none of the pinned keys")
        case CURLE_TOO_MANY_REDIRECTS:
            (code, detail) = (.tooManyRedirects, "too many redirects")
        case CURLE_FILESIZE_EXCEEDED:
            (code, detail) = (.bodyTooLarge, "the announced response body exceeds the limit")
        case CURLE_PARTIAL_FILE:
            (code, detail) = (.connectionClosed, "the server closed the connection before sending the whole body")
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING:
            (code, detail) = (.connectionClosed, "the connection was closed or reset")
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            (code, detail) = (.invalidResponse, "the server's reply is not valid HTTP")
        case CURLE_HTTP2, CURLE_HTTP2_STREAM:
            (code, detail) = (.http2, "HTTP/2 error")
        default:
            (code, detail) = (.transport, "transfer failed")
        }
        let curlText = message.flatMap { $0.isEmpty ? nil : $0 } ?? String(cString: curl_easy_strerror(result))
        return CurlewError(
            code: code, detail: detail, curlCode: Int(result.rawValue), curlMessage: curlText,
            osErrno: osErrno == 0 ? nil : osErrno)
    }
}

extension CurlewError {
    func with(_ metrics: TransferMetrics) -> CurlewError {
        var error = self
        error.metrics = metrics
        return error
    }
}
