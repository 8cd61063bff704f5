import Foundation

/// HTTP/1.1 over TLS (ALPN offers only `http/1.1`) that leaves a fake response on a kept-alive connection 20 ms after
/// answering `GET /first`, or right behind the answer to `GET /held-first`, which waits for ``release()``
/// (`Tests/servers/tls_stray_server.py`); every other GET is answered `own:<target>`. For the
/// check of pooled connections when a request allowed HTTP/2 and the server chose HTTP/1.1. Its own process, stopped
/// by ``stop()`` (or by the supervisor when this process exits).
public final class TLSStrayServer: Sendable {
    public let port: Int
    /// PEM of the CA that signed the server certificate (for `127.0.0.1` and `localhost`).
    public let caFile: String
    private let logPath: String
    private let process: SupervisedProcess

    /// `https://127.0.0.1:port`
    public var baseURL: String { "https://127.0.0.1:\(port)" }

    private init(port: Int, caFile: String, logPath: String, process: SupervisedProcess) {
        self.port = port
        self.caFile = caFile
        self.logPath = logPath
        self.process = process
    }

    /// One request the server read: its connection (numbered from 0 in accept order), its place on that connection
    /// and its target.
    public struct LoggedRequest: Sendable, Equatable {
        public let connection: Int
        public let indexOnConnection: Int
        public let target: String
    }

    /// Every request read so far, in arrival order, from the server's log.
    public var requests: [LoggedRequest] {
        logLines(kind: "request").compactMap { fields in
            guard fields.count == 3, let connection = Int(fields[0]), let index = Int(fields[1]) else { return nil }
            return LoggedRequest(connection: connection, indexOnConnection: index, target: fields[2])
        }
    }

    /// Lets the server answer a held `/held-first` request (and any later one at once).
    public func release() {
        let path = (logPath as NSString).deletingLastPathComponent + "/release"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
    }

    /// Waits (bounded) until the fake response after the `/first` request `request` is written.
    public func waitForStray(after request: LoggedRequest, timeout: Duration = .seconds(10)) async throws {
        let expected = ["\(request.connection)", "\(request.indexOnConnection)"]
        try await waitUntil(timeout: timeout, "the server to write its stray bytes") {
            self.logLines(kind: "stray").contains(expected)
        }
    }

    private func logLines(kind: String) -> [[String]] {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            return fields.first == kind ? Array(fields.dropFirst()) : nil
        }
    }

    /// Starts a server on a fresh loopback port and waits until it accepts connections.
    public static func start() async throws -> TLSStrayServer {
        var logPath = ""
        let started = try await SupervisedProcess.launchWithTestCertificates(
            name: "TLS stray server", folderPrefix: "curlew-tls-stray", listen: 1
        ) { directory, certificates in
            logPath = directory + "/requests.log"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            return [
                "{python}", ServerScripts.directory + "/tls_stray_server.py", "{fd0}", certificates + "/server.pem",
                certificates + "/server.key", logPath,
            ]
        }
        return TLSStrayServer(
            port: started.process.ports[0], caFile: started.caFile, logPath: logPath, process: started.process)
    }

    /// Stops the server (SIGTERM to its supervisor) and waits for it.
    public func stop() {
        process.terminate()
    }
}

/// Runs `body` against a fresh ``TLSStrayServer`` and always stops it.
public func withTLSStrayServer<T>(
    isolation: isolated (any Actor)? = #isolation, _ body: (TLSStrayServer) async throws -> T
) async throws -> T {
    try await withStartedServer(start: { try await TLSStrayServer.start() }, shutdown: { $0.stop() }, body)
}
