import CLibCurl

/// The socket of each of a loop's connections, keyed by its addresses and ports (what libcurl's pre-request callback
/// says of a connection), and the requests each has carried. Every new connection is registered when its first
/// request goes out, whether or not that request is checked, so a live connection's entry is its own. Loop-only.
///
/// Entries are dropped when their descriptor carries a new connection (a descriptor names one socket at a time, so
/// the earlier connection is closed): the registry holds at most one connection per descriptor number however many
/// addresses and ports a long-lived client meets. Keyed by addresses and ports alone, it grew by a connection for
/// every peer address a client ever reached.
final class ConnectionRegistry {
    private struct Connection {
        /// -1 for a connection whose socket the engine did not see opened: counted, never checked.
        var socket: Int32
        /// Requests sent on it, counted only for a client with ``CurlewClient/Configuration/maximumUsesPerConnection``.
        var uses = 0
        /// Whether a response came back on it in HTTP/1: a request that allowed HTTP/2 (https with ALPN) found a
        /// server that does not speak it, so the connection is checked before reuse as any HTTP/1 one is.
        var carriesHTTP1 = false
    }

    @exclusivity(unchecked) private var connections: [Int: Connection] = [:]
    /// The key of the newest connection each descriptor carried.
    @exclusivity(unchecked) private var keysOfSockets: [Int32: Int] = [:]

    /// How many connections the registry holds (for its tests).
    var count: Int { connections.count }

    /// A connection's key: both ports, and a hash of both addresses above them (Linux gives one local port to
    /// connections with different peers, so the ports alone can name two live connections).
    @inline(__always)
    static func key(
        remoteAddress: UnsafePointer<CChar>?, localAddress: UnsafePointer<CChar>?, remotePort: Int32, localPort: Int32
    ) -> Int {
        Int(curlew_connection_key(remoteAddress, localAddress, remotePort, localPort))
    }

    /// `socket` carries the new connection `key`. The connection the descriptor carried before is forgotten, unless
    /// another descriptor has taken over its key since.
    func register(_ socket: Int32, for key: Int) {
        if let earlierKey = keysOfSockets.updateValue(key, forKey: socket), earlierKey != key,
            connections[earlierKey]?.socket == socket
        {
            connections[earlierKey] = nil
        }
        connections[key, default: Connection(socket: socket)].socket = socket
        connections[key]?.carriesHTTP1 = false
    }

    /// A response came back in HTTP/1 on connection `key`, whose requests could have negotiated HTTP/2.
    func noteSpeaksHTTP1(_ key: Int) {
        connections[key]?.carriesHTTP1 = true
    }

    /// Whether connection `key` is known to speak HTTP/1 from a response on it (``noteSpeaksHTTP1(_:)``).
    @inline(__always)
    func carriesHTTP1(_ key: Int) -> Bool {
        connections[key]?.carriesHTTP1 ?? false
    }

    /// Counts a request about to go out on connection `key` and returns how many it has carried with this one; a
    /// new connection starts again at one (its ports may be an earlier, closed connection's).
    func countUse(of key: Int, isNewConnection: Bool) -> Int {
        guard !isNewConnection, let connection = connections[key] else {
            connections[key, default: Connection(socket: -1)].uses = 1
            return 1
        }
        connections[key]?.uses = connection.uses + 1
        return connection.uses + 1
    }

    /// The socket to check before a request goes out on the pooled connection `key`, or nil when it is unknown.
    /// Every reuse is checked, however soon after the last response: a server's own back-to-back writes (a
    /// response, then stray bytes microseconds later) land exactly in the gap a time window would leave. Whether
    /// the loop has seen the connection's last request end does not matter either: libcurl pools a finished
    /// transfer's connection and hands it to a waiting transfer within one `curl_multi_perform`, before the loop
    /// reads the first one's completion (`make soak` found fake responses answering requests in that gap).
    @inline(__always)
    func socketToCheck(for key: Int) -> Int32? {
        guard let socket = connections[key]?.socket, socket >= 0 else { return nil }
        return socket
    }
}
