import Glibc

/// One multi handle's account of its connections, for ``PoolStatistics``: every socket libcurl opened, under the
/// origin of the request it was opened for, and the running totals per origin. Loop-only.
///
/// A connection is recorded when libcurl opens its socket (once per connection, not per request). Closes are found
/// when a snapshot is taken rather than by a close callback on every request: a recorded socket whose descriptor no
/// longer names the same socket (`fstat` fails, or another inode holds the number) has been closed.
final class ConnectionBook {
    private struct OpenSocket {
        let origin: String
        let device: UInt64
        let inode: UInt64
    }

    @exclusivity(unchecked) private var open: [Int32: OpenSocket] = [:]
    @exclusivity(unchecked) private var totals: [String: PoolStatistics.Counts] = [:]

    /// libcurl opened `socket` for a request to `origin`.
    func opened(_ socket: Int32, origin: String) {
        var status = stat()
        guard fstat(socket, &status) == 0 else { return }
        if let earlier = open[socket] { totals[earlier.origin, default: .init()].connectionsClosed += 1 }
        open[socket] = OpenSocket(origin: origin, device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        totals[origin, default: .init()].connectionsOpened += 1
    }

    /// A request to `origin` is being sent again on a fresh connection.
    func retriedOnFreshConnection(origin: String) {
        totals[origin, default: .init()].retriesOnFreshConnection += 1
    }

    /// Drops the sockets closed since the last look, counting them closed.
    private func forgetClosedSockets() {
        var status = stat()
        for (socket, entry) in open {
            let same =
                fstat(socket, &status) == 0 && UInt64(status.st_dev) == entry.device
                && UInt64(status.st_ino) == entry.inode
            if !same {
                open[socket] = nil
                totals[entry.origin, default: .init()].connectionsClosed += 1
            }
        }
    }

    /// Adds this multi handle's connection counts to `counts`: the totals, and the sockets open now per origin.
    func addConnectionCounts(to counts: inout [String: PoolStatistics.Counts]) {
        forgetClosedSockets()
        for (origin, total) in totals {
            counts[origin, default: .init()].connectionsOpened += total.connectionsOpened
            counts[origin, default: .init()].connectionsClosed += total.connectionsClosed
            counts[origin, default: .init()].retriesOnFreshConnection += total.retriesOnFreshConnection
        }
        for entry in open.values { counts[entry.origin, default: .init()].connectionsOpen += 1 }
    }
}
