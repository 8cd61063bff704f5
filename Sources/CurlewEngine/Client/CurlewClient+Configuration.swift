import CLibCurl
import Foundation
public import Logging
public import Tracing

extension CurlewClient {
    /// Everything a client is set up with. Per-request overrides live on ``CurlewRequest``.
    public struct Configuration: Sendable {
        /// Which event loop drives libcurl: a dedicated thread (``thread`` or ``thread(driver:)``) or a serial
        /// `DispatchQueue` (``dispatch``).
        ///
        /// A struct rather than an enum, so that loops and drivers can be added without breaking a caller's
        /// `switch`; ``threadDriver`` tells a thread loop's driver.
        public struct EventLoopKind: Sendable, Hashable, CustomStringConvertible {
            /// How a thread loop drives libcurl.
            public struct Driver: Sendable, Hashable, CustomStringConvertible {
                private let name: String

                private init(name: String) { self.name = name }

                /// `curl_multi_poll` and `curl_multi_perform`: the fastest up to a few hundred connections per loop.
                public static let poll = Driver(name: "poll")
                /// libcurl's socket API: `curl_multi_socket_action` for the sockets epoll reports,
                /// `CURLMOPT_TIMERFUNCTION` for the timer. A loop iteration then costs nothing per idle connection,
                /// where `curl_multi_perform` walks every transfer, and HTTP/1 transfers are spread over one libcurl
                /// multi handle per 64 in flight, since libcurl walks every connection of a multi handle on each
                /// request. Faster than ``poll`` beyond about 256 connections per loop on libcurl 7.x and 64 on 8.x
                /// (`docs/design/0011-socket-action-loop.md`, `docs/design/0016-libcurl-versions.md`).
                public static let socketAction = Driver(name: "socket-action")

                /// `"poll"` or `"socket-action"`.
                public var description: String { name }
            }

            private enum Kind: Hashable {
                case thread(Driver)
                case dispatch
            }

            private let kind: Kind

            private init(_ kind: Kind) { self.kind = kind }

            /// A dedicated thread per loop, which is also a Swift `TaskExecutor`, driving libcurl with `driver`.
            public static func thread(driver: Driver) -> EventLoopKind { EventLoopKind(.thread(driver)) }

            /// A dedicated thread per loop running `curl_multi_poll`, which is also a Swift `TaskExecutor`:
            /// ``thread(driver:)`` with ``Driver/poll``; see `docs/design/0001-event-loop.md`.
            public static let thread = EventLoopKind(.thread(.poll))

            /// A serial `DispatchQueue` per loop, which is also a Swift `TaskExecutor` (``CurlewClient/executors``):
            /// the socket-action driver's epoll set watched by one `DispatchSourceRead`, with one
            /// `DispatchSourceTimer` for libcurl's timers, for applications built around Dispatch. Tasks that prefer
            /// its executor run on the queue and send their next request with no hop, as on the thread loop
            /// (`docs/design/0020-dispatch-loop-one-source.md`). The default.
            public static let dispatch = EventLoopKind(.dispatch)

            /// The driver of a thread loop; nil for ``dispatch``.
            public var threadDriver: Driver? {
                if case .thread(let driver) = kind { driver } else { nil }
            }

            /// `"thread(poll)"`, `"thread(socket-action)"` or `"dispatch"`.
            public var description: String {
                switch kind {
                case .thread(let driver): "thread(\(driver))"
                case .dispatch: "dispatch"
                }
            }
        }

        /// Which event loop drives libcurl; ``EventLoopKind/dispatch`` unless set.
        public var eventLoop: EventLoopKind = .dispatch
        /// How many event loops (each with its own thread or queue and its own connection pool) share the load.
        /// Default: one per core.
        public var loopCount: Int = ProcessInfoCores.activeProcessorCount
        /// Connections kept open to one host, across all loops (each loop gets an equal share, rounded up).
        /// Requests beyond it wait for a free connection; that wait counts towards the total timeout.
        /// `nil` means no limit.
        public var maxConnectionsPerHost: Int? = 256
        /// Connections open in total, across all loops (shared the same way). `nil` means no limit.
        public var maxConnectionsTotal: Int? = nil
        /// The most HTTP/2 streams one connection carries; the server's own `SETTINGS_MAX_CONCURRENT_STREAMS`
        /// applies too. libcurl's default of 100 would open a new connection for every request beyond it.
        public var maxConcurrentStreamsPerConnection: Int = 1000
        /// Idle connections each loop keeps cached for reuse. With ``EventLoopKind/thread(driver:)`` with ``EventLoopKind/Driver/socketAction`` and
        /// connection limits above 64 per loop, a loop runs several multi handles (one per 64 transfers in flight)
        /// and each caches at least 64, as many as it runs, so a loop may keep up to 64 per multi handle in all.
        public var maxCachedConnectionsPerLoop: Int = 256
        /// The longest a connection may sit idle in the pool and still be reused (`CURLOPT_MAXAGE_CONN`, whole
        /// seconds, at least 1). libcurl does not watch pooled connections, so a server that closes idle ones sooner
        /// than this makes the next request find a dead connection. The default of 4 s stays under the shortest
        /// keep-alive timeouts in wide use (Apache httpd, Node.js and hypercorn close after 5 s); a request that
        /// still meets a dead connection goes out once more on a fresh one (see
        /// ``TransferMetrics/freshConnectionRetries``).
        public var maxConnectionIdleAge: Duration = .seconds(4)
        /// The longest any connection is reused after it was opened (`CURLOPT_MAXLIFETIME_CONN`, whole seconds);
        /// `nil` (the default) for no limit. A limit spreads long-running clients over a pool of servers behind one
        /// DNS name as its addresses change.
        public var maxConnectionLifetime: Duration? = nil
        /// The HTTP version requests ask for, unless a request says otherwise.
        public var httpVersion: HTTPVersion = .http2
        /// Timeouts, unless a request says otherwise.
        public var timeouts: Timeouts = Timeouts()
        /// Redirect handling, unless a request says otherwise.
        public var redirects: Redirects = Redirects()
        /// Response decompression, unless a request says otherwise.
        public var decompression: Decompression = .enabled
        /// The largest response body ``CurlewClient/execute(_:)`` collects, after decompression, unless a
        /// request says otherwise. Larger bodies fail with ``CurlewError/Code/bodyTooLarge``.
        public var maxResponseBodySize: Int = 64 * 1024 * 1024
        /// TLS settings; verification is on by default.
        public var tls: TLSConfiguration = TLSConfiguration()
        /// Proxy settings.
        public var proxy: Proxy = .environment
        /// Whether request bodies are announced with `Expect: 100-continue`, unless a request says otherwise.
        public var expectContinue: ExpectContinue = .disabled
        /// The `User-Agent` sent when a request sets none. `nil` (the default, as in libcurl and AsyncHTTPClient)
        /// sends none, which also spares every request a string copy and a formatted header line.
        public var userAgent: String? = nil
        /// Whether connections stay open for later requests (HTTP/1.1 keep-alive, HTTP/2 multiplexing). `false` opens
        /// a new connection for every request and closes it after the response (libcurl's `CURLOPT_FRESH_CONNECT`
        /// and `CURLOPT_FORBID_REUSE`), which is what a load test of connection setup wants.
        public var reusesConnections: Bool = true
        /// The most requests one connection carries before it is closed (AsyncHTTPClient's
        /// `maximumUsesPerConnection`); values below 1 count as 1. The engine counts the requests on each connection
        /// and has libcurl close it after the last one (`CURLOPT_FORBID_REUSE` on that transfer). HTTP/2 requests
        /// sent one after another are limited the same way; concurrent HTTP/2 streams are not: libcurl keeps a
        /// connection open while any stream is in use, and new streams may join it until the last one ends. Nor are
        /// Unix-socket connections, which report no ports to tell them apart; use ``maxConnectionLifetime`` there.
        /// `nil` (the default): no limit, and nothing is counted.
        public var maximumUsesPerConnection: Int? = nil
        /// Connects somewhere else than the URL says while keeping the URL's host for `Host`, TLS SNI and the
        /// certificate check: entries `HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT`, an empty field matching any host
        /// or port (libcurl's `CURLOPT_CONNECT_TO`). Reaches a virtual host, or one server of several behind a name,
        /// without DNS.
        public var connectTo: [String] = []
        /// Sends every request over the Unix domain socket at this path instead of TCP (libcurl's
        /// `CURLOPT_UNIX_SOCKET_PATH`), unless the request names a socket of its own
        /// (``CurlewRequest/unixSocketPath``, or an `http+unix` / `https+unix` URL). The URL's host still goes out
        /// in `Host` and, for https, is what the server's certificate must name. `nil` (the default): TCP.
        public var unixSocketPath: String? = nil
        /// The local address or network interface connections are made from (libcurl's `CURLOPT_INTERFACE`):
        /// `"host!127.0.0.2"` for an address (or a host name, resolved once), `"if!eth0"` for an interface, or a
        /// bare name libcurl tries as an interface, then as an address. A request can name its own
        /// (``CurlewRequest/localAddress``). `nil` (the default): the system picks. One that cannot be bound fails
        /// the request with ``CurlewError/Code/connectFailed``.
        public var localAddress: String? = nil
        /// How host names are resolved and connected to; libcurl's defaults unless set.
        public var dns: DNSConfiguration = DNSConfiguration()
        /// Whether the client keeps cookies: an in-memory store of its own (libcurl's cookie engine on a share
        /// handle of the client's), filled from `Set-Cookie` and sent back by libcurl's rules (domain, path,
        /// `Secure`, expiry), also across redirects, and never to a host the cookie was not set for. Read it with
        /// ``CurlewClient/cookies()``, empty it with ``CurlewClient/clearCookies()``. `false` (the default, as in
        /// AsyncHTTPClient): no cookie is kept or sent but those a request's own `Cookie` field carries.
        public var storesCookies: Bool = false
        /// The tracer that gets a client span per request (see ``CurlewClient``'s "Tracing"). `nil` (the default)
        /// takes the tracer bootstrapped with `InstrumentationSystem` when the client is created, if there is one;
        /// without one, requests pay nothing for tracing.
        public var tracer: (any Tracer)? = nil
        /// Where requests log their debug-level events (see ``CurlewClient``'s request logging), unless a request
        /// has a ``CurlewRequest/logger`` of its own. `nil` (the default) logs nothing and costs nothing.
        public var logger: Logger? = nil

        public init() {}
    }

    /// The HTTP version a request asks for.
    ///
    /// A struct rather than an enum, so that versions and modes (HTTP/3, HTTP/2 over TLS only) can be added without
    /// breaking a caller's `switch`. ``name`` is stable.
    public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
        /// The package's exhaustive view of the version, for the engine and the curl renderer.
        package enum Storage: Sendable, Hashable {
            case http1_1
            case http2
            case http2PriorKnowledge
        }

        package let storage: Storage

        private init(_ storage: Storage) { self.storage = storage }

        /// HTTP/1.1 only.
        public static let http1_1 = HTTPVersion(.http1_1)
        /// HTTP/2 negotiated with ALPN over TLS, HTTP/1.1 for cleartext and for servers without HTTP/2.
        public static let http2 = HTTPVersion(.http2)
        /// Cleartext HTTP/2 with prior knowledge (h2c). On libcurl older than 8.0, whose h2c connections break
        /// when reused, every h2c request gets a connection of its own (see `docs/design/0003-h2c.md`).
        public static let http2PriorKnowledge = HTTPVersion(.http2PriorKnowledge)

        /// The stable name: the static member's name (`"http1_1"`, `"http2"`, `"http2PriorKnowledge"`).
        public var name: String {
            switch storage {
            case .http1_1: "http1_1"
            case .http2: "http2"
            case .http2PriorKnowledge: "http2PriorKnowledge"
            }
        }

        public var description: String { name }
    }

    /// Connect, total and idle timeouts, kept in nanoseconds end to end and rounded up (never down) to
    /// libcurl's milliseconds.
    public struct Timeouts: Sendable, Hashable {
        /// Time to get a connection, counted from submission: waiting for a free one (when every connection
        /// ``maxConnectionsPerHost`` or ``maxConnectionsTotal`` allows is busy), then DNS, TCP and TLS for a new one.
        /// A request still waiting when it runs out fails with ``CurlewError/TimeoutKind/waitingForConnection``,
        /// one connecting with ``CurlewError/TimeoutKind/connect``. The same on every libcurl (7.88 would restart
        /// its own timer when the wait ends; the engine does not). `nil` means libcurl's default, 300 s, counted the
        /// same way. A retry on a fresh connection and a redirect libcurl follows get it again, counted from the retry
        /// or from the redirect's head (the redirect's body, which libcurl reads and drops, included).
        public var connect: Duration?
        /// Time for the whole request, counted from submission, including any wait for a free connection
        /// and every redirect. `nil` means none.
        public var total: Duration?
        /// Longest time with no byte moving in either direction once the request is on its way (waiting for a
        /// connection and connecting are bounded by the connect and total timeouts instead). Detected within a
        /// quarter period when the server never sends anything. `nil` means none.
        public var idle: Duration?

        public init(connect: Duration? = .seconds(10), total: Duration? = nil, idle: Duration? = .seconds(60)) {
            self.connect = connect
            self.total = total
            self.idle = idle
        }
    }

    /// Whether and how redirects are followed. Methods change the way curl changes them: a POST becomes a GET
    /// after 301, 302 and 303 unless ``keepPost`` says otherwise; other methods are kept.
    public struct Redirects: Sendable, Hashable {
        /// Statuses after which a POST stays a POST.
        public struct KeepPost: OptionSet, Sendable, Hashable {
            public let rawValue: Int
            public init(rawValue: Int) { self.rawValue = rawValue }
            public static let after301 = KeepPost(rawValue: 1)
            public static let after302 = KeepPost(rawValue: 2)
            public static let after303 = KeepPost(rawValue: 4)
        }

        /// Whether redirects are followed at all.
        public var follow: Bool
        /// The most redirects followed before ``CurlewError/Code/tooManyRedirects``.
        public var maximum: Int
        /// Statuses after which a POST stays a POST.
        public var keepPost: KeepPost

        public init(follow: Bool = true, maximum: Int = 10, keepPost: KeepPost = []) {
            self.follow = follow
            self.maximum = maximum
            self.keepPost = keepPost
        }

        /// Redirects are returned to the caller as they are.
        public static let disabled = Redirects(follow: false)
    }

    /// Transparent response decompression, by the engine itself.
    ///
    /// A body whose content coding ends before the body does (cut short by a server or a cache that framed it
    /// correctly), or has bytes after its end, fails with ``CurlewError/Code/invalidResponse`` instead of arriving
    /// shorter: libcurl's own decoders report such bodies as whole, so the engine turns them off and decodes.
    ///
    /// A struct rather than an enum, so that choices (a subset of encodings, say) can be added without breaking a
    /// caller's `switch`: compare with `==`, or read ``isEnabled`` and ``decodedSizeLimit``.
    public struct Decompression: Sendable, Hashable, CustomStringConvertible {
        /// The engine's exhaustive view of the choice.
        enum Storage: Sendable, Hashable {
            case disabled
            case enabled
            case enabledWithLimit(Int)
        }

        let storage: Storage

        private init(_ storage: Storage) { self.storage = storage }

        /// No `Accept-Encoding`; bodies arrive as sent.
        public static let disabled = Decompression(.disabled)
        /// Asks for gzip and deflate, and for br and zstd where the libcurl in use links their decoders (Debian's
        /// does), and decodes them; decoded bodies are bounded by the response body limit. Concatenated gzip members
        /// and zstd frames are one body; `deflate` may come with zlib's wrapper or raw. A coding the engine does not
        /// decode fails the request on its first body byte.
        public static let enabled = Decompression(.enabled)
        /// As ``enabled``, with a separate, smaller bound on the decoded size of content-encoded bodies,
        /// the guard against compression bombs.
        public static func enabledWithLimit(_ limit: Int) -> Decompression { Decompression(.enabledWithLimit(limit)) }

        /// Whether responses are decoded: false only for ``disabled``.
        public var isEnabled: Bool {
            if case .disabled = storage { false } else { true }
        }

        /// The bound on a content-encoded body's decoded size, for ``enabledWithLimit(_:)``; `nil` otherwise.
        public var decodedSizeLimit: Int? {
            if case .enabledWithLimit(let limit) = storage { limit } else { nil }
        }

        /// `"disabled"`, `"enabled"` or `"enabledWithLimit(N)"`.
        public var description: String {
            switch storage {
            case .disabled: "disabled"
            case .enabled: "enabled"
            case .enabledWithLimit(let limit): "enabledWithLimit(\(limit))"
            }
        }
    }

    /// TLS settings. Verification of the peer's certificate and host name is on by default.
    public struct TLSConfiguration: Sendable, Hashable {
        /// A PEM file of CA certificates to trust instead of the system's.
        public var caFile: String?
        /// A directory of hashed CA certificates to trust instead of the system's.
        public var caDirectory: String?
        /// A PEM client certificate for mutual TLS.
        public var clientCertificateFile: String?
        /// The PEM private key of the client certificate.
        public var clientKeyFile: String?
        /// The password of ``clientKeyFile``, if it is encrypted.
        public var clientKeyPassword: String?
        /// Whether the peer's certificate chain is verified. Turn off only for tests.
        public var verifyPeer: Bool = true
        /// Whether the certificate must name the host. Turn off only for tests.
        public var verifyHost: Bool = true
        /// The oldest TLS version a connection may use (`CURLOPT_SSLVERSION`); `nil`: the TLS library's own floor.
        /// A server that offers only older versions fails the request with ``CurlewError/Code/tls``.
        public var minimumVersion: TLSVersion?
        /// The newest TLS version offered (`CURLOPT_SSLVERSION`'s `CURL_SSLVERSION_MAX_*`); `nil`: the newest the
        /// TLS library has. Below ``minimumVersion``, every request fails with ``CurlewError/Code/invalidRequest``.
        public var maximumVersion: TLSVersion?
        /// Public keys the server's must be one of (`CURLOPT_PINNEDPUBLICKEY`), each `sha256//` followed by the
        /// base64 SHA-256 of a DER SubjectPublicKeyInfo:
        /// `openssl x509 -pubkey -noout -in cert.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`.
        /// Checked on every new connection, in addition to (not instead of) the certificate chain; a key that
        /// matches none fails the request with ``CurlewError/Code/tlsPinnedKeyMismatch``. Empty (the default):
        /// no pinning.
        public var pinnedPublicKeys: [String] = []
        /// CA certificates (PEM) to trust instead of the system's, from memory (`CURLOPT_CAINFO_BLOB`); takes the
        /// place of ``caFile`` when both are set.
        public var caCertificatesPEM: [UInt8]?
        /// A PEM client certificate for mutual TLS, from memory (`CURLOPT_SSLCERT_BLOB`), in place of
        /// ``clientCertificateFile``.
        public var clientCertificatePEM: [UInt8]?
        /// The PEM private key of the client certificate, from memory (`CURLOPT_SSLKEY_BLOB`), in place of
        /// ``clientKeyFile``; ``clientKeyPassword`` decrypts it if it is encrypted.
        public var clientKeyPEM: [UInt8]?

        public init(caFile: String? = nil, caDirectory: String? = nil) {
            self.caFile = caFile
            self.caDirectory = caDirectory
        }
    }

    /// How host names are resolved and their addresses tried. Every field left `nil` (or `false`) is libcurl's
    /// default, and a client with all defaults sets none of these options on its requests.
    public struct DNSConfiguration: Sendable, Hashable {
        /// How long a resolved name stays in the DNS cache (`CURLOPT_DNS_CACHE_TIMEOUT`, whole seconds, rounded
        /// up); `.zero` resolves every new connection's host afresh. The cache is the process's (shared by every
        /// client), and each request reads it with its own client's lifetime. `nil`: libcurl's 60 s.
        public var cacheLifetime: Duration?
        /// Whether the addresses a name resolves to are tried in random order rather than the resolver's
        /// (`CURLOPT_DNS_SHUFFLE_ADDRESSES`), spreading new connections over the hosts behind one name.
        public var shufflesAddresses: Bool
        /// How long the first address family (IPv6, usually) gets before the other is tried in parallel
        /// (Happy Eyeballs, RFC 8305; `CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS`). `nil`: libcurl's 200 ms.
        public var happyEyeballsTimeout: Duration?

        public init(
            cacheLifetime: Duration? = nil, shufflesAddresses: Bool = false, happyEyeballsTimeout: Duration? = nil
        ) {
            self.cacheLifetime = cacheLifetime
            self.shufflesAddresses = shufflesAddresses
            self.happyEyeballsTimeout = happyEyeballsTimeout
        }
    }

    /// A TLS protocol version, for ``TLSConfiguration/minimumVersion`` and ``TLSConfiguration/maximumVersion``.
    public struct TLSVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
        /// libcurl's `CURL_SSLVERSION_TLSv1_*` value; the maximum is this shifted left by 16.
        let curlValue: Int

        private init(curlValue: Int) { self.curlValue = curlValue }

        /// TLS 1.0.
        public static let v1_0 = TLSVersion(curlValue: Int(CURL_SSLVERSION_TLSv1_0))
        /// TLS 1.1.
        public static let v1_1 = TLSVersion(curlValue: Int(CURL_SSLVERSION_TLSv1_1))
        /// TLS 1.2.
        public static let v1_2 = TLSVersion(curlValue: Int(CURL_SSLVERSION_TLSv1_2))
        /// TLS 1.3.
        public static let v1_3 = TLSVersion(curlValue: Int(CURL_SSLVERSION_TLSv1_3))

        public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.curlValue < rhs.curlValue }

        /// `"TLSv1.0"` … `"TLSv1.3"`.
        public var description: String { "TLSv1.\(curlValue - Int(CURL_SSLVERSION_TLSv1_0))" }
    }

    /// Which proxy requests go through.
    ///
    /// A struct rather than an enum, so that kinds of proxy (SOCKS, HTTPS with its own TLS settings) can be added
    /// without breaking a caller's `switch`: compare with `==`, or read ``url`` and ``noProxy``.
    public struct Proxy: Sendable, Hashable, CustomStringConvertible {
        /// The engine's exhaustive view of the choice.
        enum Storage: Sendable, Hashable {
            case environment
            case none
            case url(String, noProxy: String?, credentials: Credentials?)
        }

        /// A user name and password for the proxy (libcurl's `CURLOPT_PROXYUSERNAME` and
        /// `CURLOPT_PROXYPASSWORD`): HTTP Basic for an HTTP proxy's CONNECT, RFC 1929 for SOCKS5. Given apart from
        /// the URL, they need no percent-encoding; neither is ever logged, traced or described.
        public struct Credentials: Sendable, Hashable, CustomStringConvertible {
            public var username: String
            public var password: String

            public init(username: String, password: String) {
                self.username = username
                self.password = password
            }

            /// `"Credentials(redacted)"`: never the user name or password.
            public var description: String { "Credentials(redacted)" }
        }

        let storage: Storage

        private init(_ storage: Storage) { self.storage = storage }

        /// libcurl's default: `http_proxy` (lower case only), `HTTPS_PROXY`/`https_proxy`, `ALL_PROXY`/`all_proxy`
        /// and `NO_PROXY`/`no_proxy` from the environment, read for every request. Credentials in a variable's
        /// URL are used. AsyncHTTPClient reads no environment; a client that must not be steered by it uses
        /// ``none`` or ``url(_:noProxy:credentials:)``.
        public static let environment = Proxy(.environment)
        /// No proxy, whatever the environment says.
        public static let none = Proxy(.none)
        /// This proxy URL, except for hosts in `noProxy` (a comma-separated list, as in `no_proxy`): `http://` (CONNECT
        /// for https targets, forwarding for http), `https://`, `socks5://` (names resolved locally), `socks5h://`
        /// (names resolved by the proxy), `socks4://`, `socks4a://`. `credentials` log in to it; so do credentials
        /// in the URL (percent-encoded). A proxy that refuses them fails the request with
        /// ``CurlewError/Code/proxy``. No environment variable applies, `NO_PROXY` included; a scheme libcurl does not
        /// take fails every request with ``CurlewError/Code/invalidRequest``.
        public static func url(_ url: String, noProxy: String? = nil, credentials: Credentials? = nil) -> Proxy {
            Proxy(.url(url, noProxy: noProxy, credentials: credentials))
        }

        /// The proxy URL of a ``url(_:noProxy:)`` proxy; `nil` for ``environment`` and ``none``.
        public var url: String? {
            if case .url(let url, _, _) = storage { url } else { nil }
        }

        /// The hosts a ``url(_:noProxy:)`` proxy is bypassed for; `nil` when none are given, and for the others.
        public var noProxy: String? {
            if case .url(_, let noProxy, _) = storage { noProxy } else { nil }
        }

        /// The credentials of a ``url(_:noProxy:credentials:)`` proxy given apart from its URL; `nil` otherwise.
        public var credentials: Credentials? {
            if case .url(_, _, let credentials) = storage { credentials } else { nil }
        }

        /// `"environment"`, `"none"` or `"url"`: the URL is left out, since a proxy URL may carry credentials.
        public var description: String {
            switch storage {
            case .environment: "environment"
            case .none: "none"
            case .url: "url"
            }
        }
    }

    /// `Expect: 100-continue` for request bodies. libcurl adds it by itself to large uploads and then waits up to a
    /// second for servers that never answer 100; Curlew sends it only when asked.
    ///
    /// A struct rather than an enum, so that policies (only above a body size, say) can be added without breaking a
    /// caller's `switch`: compare with `==`, or read ``timeout``.
    public struct ExpectContinue: Sendable, Hashable, CustomStringConvertible {
        /// The engine's exhaustive view of the choice.
        enum Storage: Sendable, Hashable {
            case disabled
            case enabled(timeout: Duration)
        }

        let storage: Storage

        private init(_ storage: Storage) { self.storage = storage }

        /// Never send `Expect: 100-continue`.
        public static let disabled = ExpectContinue(.disabled)
        /// Send it with every request body and wait at most `timeout` for the interim response.
        public static func enabled(timeout: Duration) -> ExpectContinue { ExpectContinue(.enabled(timeout: timeout)) }

        /// How long an ``enabled(timeout:)`` request waits for the interim response; `nil` for ``disabled``.
        public var timeout: Duration? {
            if case .enabled(let timeout) = storage { timeout } else { nil }
        }

        /// `"disabled"` or `"enabled(timeout: …)"`.
        public var description: String {
            switch storage {
            case .disabled: "disabled"
            case .enabled(let timeout): "enabled(timeout: \(timeout))"
            }
        }
    }
}

/// The number of cores this process may run on: its CPU affinity (`taskset`, cpusets), which
/// `ProcessInfo.activeProcessorCount` does not reflect on Linux.
enum ProcessInfoCores {
    static var activeProcessorCount: Int {
        let allowed = Int(curlew_allowed_cpu_count())
        return allowed > 0 ? allowed : max(1, ProcessInfo.processInfo.activeProcessorCount)
    }
}

extension CurlewClient.Configuration {
    /// The connections to one host each event loop may open: its equal share of ``maxConnectionsPerHost``, rounded
    /// up (nil: no limit). A request waits for a connection of its own loop's share, never another loop's.
    package var maxConnectionsPerHostPerLoop: Int? {
        MultiPartPlan.loopShare(of: maxConnectionsPerHost, loopCount: loopCount)
    }
}
