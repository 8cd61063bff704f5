/// A libcurl version as the library reports it at run time (`curl_version_info`), and every behaviour of the
/// engine that depends on it. A binary can meet another `libcurl.so` than the headers it was compiled with, so
/// nothing here reads the compile-time `LIBCURL_VERSION_NUM`. The reasons, per version, are in
/// `docs/design/0016-libcurl-versions.md`.
package struct LibcurlVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// `0xXXYYZZ`, as `curl_version_info_data.version_num`.
    package let number: UInt32

    package init(number: UInt32) { self.number = number }

    package init(_ major: UInt32, _ minor: UInt32, _ patch: UInt32) {
        number = major << 16 | minor << 8 | patch
    }

    package var major: UInt32 { number >> 16 & 0xFF }
    package var minor: UInt32 { number >> 8 & 0xFF }
    package var patch: UInt32 { number & 0xFF }

    /// The libcurl this process runs on.
    package static var running: LibcurlVersion { CurlGlobal.capabilities.libcurl }

    package var description: String { "\(major).\(minor).\(patch)" }

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.number < rhs.number }

    /// The oldest libcurl whose API the engine needs: `CURLOPT_PREREQFUNCTION` (the connection check before a
    /// request is written, and the credential rule on redirects) and `CURLOPT_MAXLIFETIME_CONN` came in 7.80.0.
    /// Ubuntu 22.04 (7.81.0) is the oldest common server distribution it covers; RHEL 9 (7.76.1) is not covered.
    package static let oldestSupported = LibcurlVersion(7, 80, 0)

    /// Whether the engine runs on this version at all.
    package var isSupported: Bool { self >= Self.oldestSupported }

    /// Why a client cannot run on this version, or nil when it can.
    package var unsupportedReason: String? {
        isSupported
            ? nil
            : "libcurl \(self) is older than \(Self.oldestSupported), the oldest Curlew supports "
                + "(it needs CURLOPT_PREREQFUNCTION and CURLOPT_MAXLIFETIME_CONN)"
    }

    /// libcurl before 8.0.0 stacks a second HTTP/2 layer on a reused h2c prior-knowledge connection, so every
    /// request after the first fails (curl#10634, fixed in 8.0.0). Before 8.0 each h2c request gets a connection
    /// of its own.
    package var reusesPriorKnowledgeHTTP2Connections: Bool { self >= LibcurlVersion(8, 0, 0) }

    /// Connections per event loop above which the socket-action driver (epoll, a multi handle per 64 transfers)
    /// makes more requests per second than the poll driver, as `curlew bench` picks by default. Measured with
    /// S8-scale (Benchmarks/results/session7-libcurl-versions.md): on 7.88.1 the poll driver is ahead or even up to
    /// 256 connections (63.6 k against 62.8 k requests/s at 128, 57.9 k against 58.3 k at 256) and behind from 512
    /// (46.8 k against 50.3 k); on 8.14.1, whose poll loop pays more per connection open, it is ahead at 64
    /// (61.9 k against 58.5 k) and behind from 128 (52.2 k against 54.9 k; at 256, 43.8 k against 52.9 k).
    package var socketActionDriverAboveConnectionsPerLoop: Int { self >= LibcurlVersion(8, 0, 0) ? 64 : 256 }

    /// From 8.0.0 libcurl itself refuses a pooled connection with input pending (or a FIN, or an error) each time it
    /// picks it for a transfer ("Connection has input pending, not reusable"), closes it and takes another, in the
    /// same call that then writes the request. The engine's own peek before the write, one system call per reused
    /// HTTP/1 connection, is needed only before 8.0, where libcurl reuses such a connection.
    package var refusesPooledConnectionsWithPendingInput: Bool { self >= LibcurlVersion(8, 0, 0) }
}
