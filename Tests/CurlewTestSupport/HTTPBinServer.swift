import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A real httpbin (Flask app under gunicorn) on 127.0.0.1, shared by every test in the process.
///
/// Started on first use and stopped when the test process exits. The listening socket is bound
/// by the supervisor on port 0 and handed to gunicorn (`--bind fd://N`), so parallel test runs
/// never race for a port. Needs `pip install httpbin gunicorn` (httpbin pulls in `brotlicffi`,
/// which `/brotli` needs).
public final class HTTPBinServer: Sendable {
    /// The TCP port gunicorn serves on.
    public let port: Int
    private let process: SupervisedProcess

    /// `http://127.0.0.1:PORT`
    public var baseURL: String { "http://127.0.0.1:\(self.port)" }

    private init(port: Int, process: SupervisedProcess) {
        self.port = port
        self.process = process
    }

    private static let startup = StartOnce { try await HTTPBinServer.start() }

    /// The process-wide instance, started on the first call; concurrent callers share one start, and a failed
    /// start is rethrown to every later caller.
    public static func shared() async throws -> HTTPBinServer {
        try await startup.value
    }

    private static func start() async throws -> HTTPBinServer {
        let directory = try TemporaryDirectory.make(prefix: "curlew-httpbin")
        do {
            return try await self.start(in: directory)
        } catch {
            // After a successful start the supervisor owns the directory; before, we do.
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    private static func start(in directory: String) async throws -> HTTPBinServer {
        let stderrPath = directory + "/stderr.log"
        let process = try await SupervisedProcess.launch(
            name: "httpbin (gunicorn)",
            program: [
                "{python}", "-m", "gunicorn",
                "--bind", "fd://{fd0}",
                // Threads rather than sync workers: tests hit /delay and /drip concurrently.
                "--workers", "2", "--worker-class", "gthread", "--threads", "8",
                // Long enough that connection-reuse tests see reuse, not idle closes.
                "--keep-alive", "30",
                "--timeout", "120",
                "--graceful-timeout", "2",
                "--log-level", "warning",
                "httpbin:app",
            ],
            listen: 1,
            stderrPath: stderrPath,
            cleanupDirectory: directory
        )
        let port = process.ports[0]
        do {
            try await process.waitUntilReady { Probe.httpStatus(port: port, path: "/get") == 200 }
        } catch let exited as ServerExited {
            throw TestSupportError("\(exited)\nhint: `pip install httpbin gunicorn` for \(ServerScripts.python)")
        }
        return HTTPBinServer(port: port, process: process)
    }
}

enum TemporaryDirectory {
    /// A fresh private directory `$TMPDIR/PREFIX-PID-XXXXXX` (default /tmp).
    ///
    /// Once a server runs, its supervisor deletes the directory; a test process that dies
    /// before that point leaves it behind, so directories of dead PIDs are swept here first.
    static func make(prefix: String) throws -> String {
        var base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        if base.hasSuffix("/") { base.removeLast() }
        self.sweepAbandoned(in: base, prefix: prefix)
        var template = Array("\(base)/\(prefix)-\(getpid())-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard created != nil else {
            throw TestSupportError("mkdtemp in \(base) failed: \(String(cString: strerror(errno)))")
        }
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    private static func sweepAbandoned(in base: String, prefix: String) {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: base) else { return }
        for entry in entries where entry.hasPrefix(prefix + "-") {
            let parts = entry.dropFirst(prefix.count + 1).split(separator: "-", maxSplits: 1)
            guard parts.count == 2, let pid = pid_t(parts[0]), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                try? FileManager.default.removeItem(atPath: base + "/" + entry)
            }
        }
    }
}
