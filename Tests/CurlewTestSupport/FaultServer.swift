import Foundation

/// The fault-injecting server of `make soak` (`Tests/servers/fault_server.py`): HTTP/1.1 in cleartext and HTTP/2
/// over TLS (ALPN, with a throwaway test CA), both from one Python process on two loopback ports. Every path is
/// `/<kind>/<request id>/<size>`; the kinds (normal responses, resets, stalls, truncations, stray bytes, GOAWAYs)
/// and the body every complete response carries are described in the script. Needs `pip install hypercorn` (for
/// its `h2` package) and openssl. Unlike the shared test servers, each instance is its own process, stopped by
/// ``stop()`` (or by the supervisor when this process exits, however it dies).
public final class FaultServer: Sendable {
    /// The cleartext HTTP/1.1 port.
    public let http1Port: Int
    /// The HTTP/2-over-TLS port (ALPN `h2` only).
    public let http2Port: Int
    /// PEM of the CA that signed the server certificate.
    public let caFile: String
    private let process: SupervisedProcess

    /// `http://127.0.0.1:http1Port`
    public var http1BaseURL: String { "http://127.0.0.1:\(http1Port)" }
    /// `https://127.0.0.1:http2Port`
    public var http2BaseURL: String { "https://127.0.0.1:\(http2Port)" }

    private init(http1Port: Int, http2Port: Int, caFile: String, process: SupervisedProcess) {
        self.http1Port = http1Port
        self.http2Port = http2Port
        self.caFile = caFile
        self.process = process
    }

    /// The body a complete response to `requestID` with `size` bytes carries: records `"<id>@<offset>;"` back to
    /// back, cut at `size` bytes, as the script's `body_for` makes it. A body of another request, out of order, cut
    /// short or with stray bytes never equals it.
    public static func body(requestID: String, size: Int) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(size + requestID.utf8.count + 12)
        while body.count < size {
            body += "\(requestID)@\(body.count);".utf8
        }
        body.removeLast(body.count - size)
        return body
    }

    /// Starts a server on two fresh loopback ports and waits until both accept connections.
    public static func start() async throws -> FaultServer {
        let started = try await SupervisedProcess.launchWithTestCertificates(
            name: "fault server", folderPrefix: "curlew-fault-server", listen: 2,
            installHint: "`pip install hypercorn` (for h2)"
        ) { _, certificates in
            [
                "{python}", ServerScripts.directory + "/fault_server.py", "{fd0}", "{fd1}",
                certificates + "/server.pem", certificates + "/server.key",
            ]
        }
        let ports = started.process.ports
        return FaultServer(http1Port: ports[0], http2Port: ports[1], caFile: started.caFile, process: started.process)
    }

    /// Stops the server (SIGTERM to its supervisor, which stops the script by its process group) and waits for it.
    public func stop() {
        process.terminate()
    }
}
