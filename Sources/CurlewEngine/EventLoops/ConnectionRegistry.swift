import CLibCurl

/// The socket of each of a loop's connections, keyed by its addresses and ports (what libcurl's pre-request callback
/// says of a connection). Entries are replaced when a new connection takes the same addresses and ports and never
/// removed: a live connection's entry is its own (every new connection is registered when its first request goes
/// out, whether or not that request is checked), and stale entries are bounded by the port space. Loop-only.
final class ConnectionRegistry {
    @exclusivity(unchecked) private var sockets: [Int: Int32] = [:]
    /// Requests sent on each connection, kept only for a client with
    /// ``CurlewClient/Configuration/maximumUsesPerConnection``; bounded by the port space like ``sockets``.
    @exclusivity(unchecked) private var uses: [Int: Int] = [:]

    /// A connection's key: both ports, and a hash of both addresses above them (Linux gives one local port to
    /// connections with different peers, so the ports alone can name two live connections).
    @inline(__always)
    static func key(
        remoteAddress: UnsafePointer<CChar>?, localAddress: UnsafePointer<CChar>?, remotePort: Int32, localPort: Int32
    ) -> Int {
        Int(curlew_connection_key(remoteAddress, localAddress, remotePort, localPort))
    }

    func register(_ socket: Int32, for key: Int) { sockets[key] = socket }

    /// Counts a request about to go out on connection `key` and returns how many it has carried with this one; a
    /// new connection starts again at one (its ports may be an earlier, closed connection's).
    func countUse(of key: Int, isNewConnection: Bool) -> Int {
        let count = isNewConnection ? 1 : (uses[key] ?? 0) + 1
        uses[key] = count
        return count
    }

    /// The socket to check before a request goes out on the pooled connection `key`, or nil when it is unknown.
    /// Every reuse is checked, however soon after the last response: a server's own back-to-back writes (a
    /// response, then stray bytes microseconds later) land exactly in the gap a time window would leave. Whether
    /// the loop has seen the connection's last request end does not matter either: libcurl pools a finished
    /// transfer's connection and hands it to a waiting transfer within one `curl_multi_perform`, before the loop
    /// reads the first one's completion (`make soak` found fake responses answering requests in that gap).
    @inline(__always)
    func socketToCheck(for key: Int) -> Int32? {
        sockets[key]
    }
}
