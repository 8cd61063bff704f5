import Foundation

/// A real hypercorn (PyPI), the second HTTP/2 implementation the engine is tested against, on two loopback ports:
/// HTTP/2 over TLS (ALPN, with the nginx test CA's certificate) and cleartext HTTP/2 with prior knowledge (h2c).
/// Unlike nginx it ends connections on its own: a GOAWAY after `keep_alive_max_requests` requests (1,000, its
/// default) and a close after `keep_alive_timeout` seconds idle (here 2 s instead of its default 5 s, so idle-gap
/// tests wait less). Every request is counted in its access log, one line each. Shared by every test in the
/// process; needs `pip install hypercorn`.
public final class HypercornServer: Sendable {
    public let tlsPort: Int
    public let h2cPort: Int
    /// PEM of the CA that signed the server certificate.
    public let caFile: String
    /// One line per request served (`METHOD PATH STATUS`).
    public let accessLogPath: String
    /// The seconds an idle connection stays open.
    public static let keepAliveTimeoutSeconds = 2
    private let process: SupervisedProcess

    /// `https://127.0.0.1:tlsPort`
    public var httpsBaseURL: String { "https://127.0.0.1:\(tlsPort)" }
    /// `http://127.0.0.1:h2cPort`
    public var h2cBaseURL: String { "http://127.0.0.1:\(h2cPort)" }

    private init(tlsPort: Int, h2cPort: Int, caFile: String, accessLogPath: String, process: SupervisedProcess) {
        self.tlsPort = tlsPort
        self.h2cPort = h2cPort
        self.caFile = caFile
        self.accessLogPath = accessLogPath
        self.process = process
    }

    private static let startup = StartOnce { try await HypercornServer.start() }

    /// The process-wide instance, started on the first call.
    public static func shared() async throws -> HypercornServer {
        try await startup.value
    }

    /// Requests in the access log so far.
    public func requestsServed() -> Int {
        guard let log = try? String(contentsOfFile: accessLogPath, encoding: .utf8) else { return 0 }
        return log.split(separator: "\n").count
    }

    private static func start() async throws -> HypercornServer {
        let started = try await SupervisedProcess.launchWithTestCertificates(
            name: "hypercorn", folderPrefix: "curlew-hypercorn", listen: 2, installHint: "`pip install hypercorn`"
        ) { directory, certificates in
            [
                // keep_alive_max_requests stays at hypercorn's default (1,000): the GOAWAY the tests cross.
                "{python}", "-m", "hypercorn", "--keep-alive", String(keepAliveTimeoutSeconds),
                "--access-logfile", directory + "/access.log", "--access-logformat", "%(m)s %(U)s %(s)s",
                "--bind", "fd://{fd0}", "--insecure-bind", "fd://{fd1}",
                "--certfile", certificates + "/server.pem", "--keyfile", certificates + "/server.key",
                "--workers", "1",
                ServerScripts.directory + "/hypercorn_app.py:app",
            ]
        }
        return HypercornServer(
            tlsPort: started.process.ports[0], h2cPort: started.process.ports[1], caFile: started.caFile,
            accessLogPath: started.directory + "/access.log", process: started.process)
    }
}
