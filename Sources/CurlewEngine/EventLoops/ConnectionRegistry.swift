/// The socket of each of a loop's HTTP/1 connections, keyed by its local and remote ports (what libcurl's
/// pre-request callback says of a connection), and whether it sits in the pool. Entries are replaced when a new
/// connection takes the same ports and never removed: a pooled connection's entry is valid while it is pooled, and
/// stale entries are bounded by the port space. Loop-only.
final class ConnectionRegistry {
    struct Entry {
        let socket: Int32
        /// No request runs on the connection: libcurl pooled it after its last response.
        var isPooled = false
    }

    @exclusivity(unchecked) private var entries: [Int: Entry] = [:]

    @inline(__always)
    static func key(localPort: Int32, remotePort: Int32) -> Int {
        Int(localPort) << 16 | Int(remotePort & 0xFFFF)
    }

    func register(_ socket: Int32, for key: Int) { entries[key] = Entry(socket: socket) }

    /// The socket to check before a request goes out on the pooled connection `key`, or nil when it is unknown
    /// (or not pooled). Every reuse is checked, however soon after the last response: a server's own back-to-back
    /// writes (a response, then stray bytes microseconds later) land exactly in the gap a time window would leave.
    @inline(__always)
    func socketToCheck(for key: Int) -> Int32? {
        guard let entry = entries[key], entry.isPooled else { return nil }
        return entry.socket
    }

    /// A request on the connection `key` ended.
    @inline(__always)
    func requestEnded(on key: Int) {
        entries[key]?.isPooled = true
    }

    /// A request starts on the connection `key`.
    @inline(__always)
    func requestStarted(on key: Int) {
        entries[key]?.isPooled = false
    }
}
