import Foundation

/// A real WsgiDAV (PyPI) under hypercorn on a loopback port: a WebDAV server that follows RFC 4918 where nginx's
/// module does not. A PUT into a folder that does not exist fails with 409 Conflict, and MKCOL makes folders, as
/// Apache's mod_dav, sabre/dav and IIS do (`Tests/servers/webdav_app.py`). `/dav-strict/` serves
/// ``scratchDirectory``; the other ``DavTarget/Location``s serve the same folder with MKCOL forbidden, failing once,
/// or racing the client. Shared by every test in the process; needs `pip install wsgidav hypercorn`.
public final class WsgiDAVServer: Sendable {
    public let port: Int
    /// The folder behind every WsgiDAV ``DavTarget/Location``.
    public let scratchDirectory: String
    /// Every request as one line, `METHOD STATUS PATH` (the path percent-encoded), as nginx's ``NginxServer/davLog``.
    public let log: AccessLogIndex
    private let process: SupervisedProcess

    /// `http://127.0.0.1:port`
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    private init(port: Int, scratchDirectory: String, log: AccessLogIndex, process: SupervisedProcess) {
        self.port = port
        self.scratchDirectory = scratchDirectory
        self.log = log
        self.process = process
    }

    private static let startup = StartOnce { try await WsgiDAVServer.start() }

    /// The process-wide instance, started on the first call.
    public static func shared() async throws -> WsgiDAVServer {
        try await startup.value
    }

    private static func start() async throws -> WsgiDAVServer {
        let directory = try TemporaryDirectory.make(prefix: "curlew-wsgidav")
        do {
            let root = directory + "/root"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let logPath = directory + "/access.log"
            let process = try await SupervisedProcess.launch(
                name: "wsgidav",
                program: [
                    "/usr/bin/env", "CURLEW_WEBDAV_ROOT=\(root)", "CURLEW_WEBDAV_LOG=\(logPath)",
                    "{python}", "-m", "hypercorn", "--bind", "fd://{fd0}", "--workers", "1",
                    ServerScripts.directory + "/webdav_app.py:app",
                ],
                listen: 1,
                stderrPath: directory + "/stderr.log",
                cleanupDirectory: directory
            )
            let port = process.ports[0]
            do {
                try await process.waitUntilReady { Probe.acceptsConnections(port: port) }
            } catch let exited as ServerExited {
                throw TestSupportError("\(exited)\nhint: `pip install wsgidav hypercorn` for \(ServerScripts.python)")
            }
            return WsgiDAVServer(
                port: port, scratchDirectory: root, log: AccessLogIndex(path: logPath, uriField: 2), process: process)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }
}
