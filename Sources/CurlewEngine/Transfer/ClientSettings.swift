import CLibCurl
import Foundation
import HTTPTypes

/// The client's configuration as each transfer reads it: field by field from a shared object, so a request
/// does not copy (and retain and release every string of) the whole configuration.
final class ClientSettings: Sendable {
    let timeouts: CurlewClient.Timeouts
    let redirects: CurlewClient.Redirects
    let httpVersion: CurlewClient.HTTPVersion
    let decompression: CurlewClient.Decompression
    /// The `Accept-Encoding` list: the codings the engine decodes (``ContentCoding/available``), computed once
    /// (handing libcurl "" made it rebuild the list of every decoder it has on each transfer, about a microsecond
    /// per request).
    let acceptEncoding: String
    let maxResponseBodySize: Int
    let expectContinue: CurlewClient.ExpectContinue
    let userAgent: String?
    /// `nil` when every TLS setting is the default, so plain requests skip them all.
    let tls: CurlewClient.TLSConfiguration?
    let proxy: CurlewClient.Proxy
    let maxConnectionsPerHost: Int?
    let maxConnectionsTotal: Int?
    let maxCachedConnectionsPerLoop: Int
    /// `CURLOPT_MAXAGE_CONN` and `CURLOPT_MAXLIFETIME_CONN`, in whole seconds (lifetime 0: no limit).
    let maxConnectionIdleAgeSeconds: Int
    let maxConnectionLifetimeSeconds: Int
    let maxConcurrentStreamsPerConnection: Int
    let reusesConnections: Bool
    /// `nil` when connections carry any number of requests, so nothing is counted.
    let maximumUsesPerConnection: Int?
    let unixSocketPath: String?
    let localAddress: String?
    /// `nil` when every DNS setting is libcurl's default, so plain requests skip them all.
    let dns: DNSOptions?
    /// `connectTo` as the list libcurl reads, built once: every transfer of the client points at it, and it is
    /// freed with the settings, which outlive every transfer and easy handle of the client.
    nonisolated(unsafe) let connectToList: UnsafeMutablePointer<curl_slist>?
    let capabilities: CurlGlobal.Capabilities
    /// Whether the engine peeks a pooled HTTP/1 connection before a request is written on it: where libcurl does
    /// not refuse one with input pending itself (before 8.0; docs/design/0016-libcurl-versions.md).
    let checksPooledConnectionsBeforeWriting: Bool
    /// Whether the loop's ``ConnectionRegistry`` keeps this client's connections: for the check of pooled
    /// connections or for counting each connection's requests.
    var usesConnectionRegistry: Bool { checksPooledConnectionsBeforeWriting || maximumUsesPerConnection != nil }
    /// `CURLEW_LIBCURL_VERBOSE=1` in the environment turns on libcurl's own trace (to stderr) for every transfer.
    let libcurlVerbose: Bool
    /// The process-wide share handle (DNS cache, TLS sessions), or for a client that keeps cookies one of its own
    /// that also holds them; libcurl locks it through the shim's mutexes.
    nonisolated(unsafe) let share: UnsafeMutableRawPointer?
    /// Whether requests use libcurl's cookie engine on the client's own share handle.
    let storesCookies: Bool

    init(configuration: CurlewClient.Configuration) {
        CurlGlobal.ensureInitialized()
        timeouts = configuration.timeouts
        redirects = configuration.redirects
        httpVersion = configuration.httpVersion
        decompression = configuration.decompression
        acceptEncoding = ContentCoding.acceptEncoding
        maxResponseBodySize = configuration.maxResponseBodySize
        expectContinue = configuration.expectContinue
        userAgent = configuration.userAgent
        tls = configuration.tls == CurlewClient.TLSConfiguration() ? nil : configuration.tls
        proxy = configuration.proxy
        maxConnectionsPerHost = configuration.maxConnectionsPerHost
        maxConnectionsTotal = configuration.maxConnectionsTotal
        maxCachedConnectionsPerLoop = configuration.maxCachedConnectionsPerLoop
        maxConnectionIdleAgeSeconds = max(Int(configuration.maxConnectionIdleAge.components.seconds), 1)
        maxConnectionLifetimeSeconds =
            configuration.maxConnectionLifetime.map {
                max(Int(clamping: $0.components.seconds), 1)
            } ?? 0
        maxConcurrentStreamsPerConnection = configuration.maxConcurrentStreamsPerConnection
        reusesConnections = configuration.reusesConnections
        maximumUsesPerConnection = configuration.maximumUsesPerConnection.map { max($0, 1) }
        unixSocketPath = configuration.unixSocketPath
        localAddress = configuration.localAddress
        dns = configuration.dns == CurlewClient.DNSConfiguration() ? nil : DNSOptions(configuration.dns)
        connectToList = configuration.connectTo.reduce(nil) { Transfer.appending($1, to: $0) }
        capabilities = CurlGlobal.capabilities
        checksPooledConnectionsBeforeWriting = !capabilities.libcurl.refusesPooledConnectionsWithPendingInput
        libcurlVerbose = ProcessInfo.processInfo.environment["CURLEW_LIBCURL_VERBOSE"] == "1"
        storesCookies = configuration.storesCookies
        share = configuration.storesCookies ? CurlGlobal.makeCookieShare() : CurlGlobal.share
    }

    /// The DNS settings as libcurl takes them; nil fields are libcurl's defaults.
    struct DNSOptions: Sendable {
        let cacheTimeoutSeconds: Int?
        let shufflesAddresses: Bool
        let happyEyeballsMilliseconds: Int?

        init(_ dns: CurlewClient.DNSConfiguration) {
            cacheTimeoutSeconds = dns.cacheLifetime.map {
                // Rounded up, so a sub-second lifetime still caches; never -1, which libcurl reads as "forever".
                let nanoseconds = $0.saturatingNanoseconds
                let seconds = nanoseconds / 1_000_000_000 + (nanoseconds % 1_000_000_000 == 0 ? 0 : 1)
                return Int(min(seconds, UInt64(Int32.max)))
            }
            shufflesAddresses = dns.shufflesAddresses
            happyEyeballsMilliseconds = dns.happyEyeballsTimeout.map {
                curlMilliseconds(fromNanoseconds: $0.saturatingNanoseconds)
            }
        }
    }

    /// Whether the engine peeks the pooled connection before a request to `url` is written on it: HTTP/1 only
    /// (an HTTP/2 connection has frames of its own waiting, which libcurl reads), on a libcurl that does not check.
    func checksPooledConnection(beforeWritingTo url: String, version: CurlewClient.HTTPVersion) -> Bool {
        checksPooledConnectionsBeforeWriting && version.isHTTP1Only(for: url)
    }

    deinit {
        if let connectToList { curl_slist_free_all(connectToList) }
        // Every easy handle of the client is gone by now: the settings outlive them.
        if storesCookies, let share { curl_share_cleanup(share) }
    }
}
