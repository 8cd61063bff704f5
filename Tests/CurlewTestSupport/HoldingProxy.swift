import Foundation

/// A reverse proxy in front of a test server (`Tests/servers/hold_proxy.py`) that makes the worst moment of a crash
/// happen on purpose: a write the upstream answered 2xx but whose response the client never sees. The proxy passes
/// every other exchange on; for the first request whose `"METHOD TARGET"` matches `hold`, it appends `stored METHOD TARGET`
/// to ``markerPath`` and holds the response until the client goes away (later ones pass). A test waits for that line
/// (``waitForStored(_:timeout:)``), then kills the client, and lets a re-run through with ``stopHolding()``. Each
/// instance is its own process, stopped by ``stop()``.
public final class HoldingProxy: Sendable {
    /// The port the client talks to.
    public let port: Int
    /// Where the proxy appends `stored …` and `replayed KEY` lines.
    public let markerPath: String
    private let process: SupervisedProcess

    /// `http://127.0.0.1:port`
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    private init(port: Int, markerPath: String, process: SupervisedProcess) {
        self.port = port
        self.markerPath = markerPath
        self.process = process
    }

    /// Starts a proxy to `127.0.0.1:upstreamPort` on a fresh loopback port.
    /// - Parameters:
    ///   - hold: a Python regular expression searched in `"METHOD TARGET"` of each request.
    ///   - honouringIdempotencyKeys: keeps the first 2xx response per `Idempotency-Key` and answers a repeat of the
    ///     key with it without forwarding it (logged `replayed KEY`): the store side of the IETF httpapi draft.
    ///   - holdingEveryMatch: holds every matching write the upstream answered 2xx, not only the first (each logged
    ///     `stored …`), so a client with several connections cannot go on past the held one on another.
    ///   - onlyPaths: narrows the matches to requests whose path (percent-decoded, without the query) is one of
    ///     these: one shard's files among shards that share a destination.
    ///   - passingFirst: passes this many matching writes before it holds any.
    public static func start(
        upstreamPort: Int, hold: String, honouringIdempotencyKeys: Bool = false, holdingEveryMatch: Bool = false,
        onlyPaths: Set<String>? = nil, passingFirst: Int = 0
    ) async throws -> HoldingProxy {
        let directory = try TemporaryDirectory.make(prefix: "curlew-hold-proxy")
        let markerPath = directory + "/marker.log"
        guard FileManager.default.createFile(atPath: markerPath, contents: nil) else {
            throw TestSupportError("cannot create \(markerPath)")
        }
        var narrowing: [String] = []
        if let onlyPaths {
            let pathsFile = directory + "/only-paths.txt"
            try onlyPaths.sorted().joined(separator: "\n").write(toFile: pathsFile, atomically: true, encoding: .utf8)
            narrowing += ["--only-targets", pathsFile]
        }
        if passingFirst > 0 { narrowing += ["--pass-first", String(passingFirst)] }
        let process = try await SupervisedProcess.launch(
            name: "holding proxy",
            program: [
                "{python}", ServerScripts.directory + "/hold_proxy.py", "{fd0}", String(upstreamPort), markerPath, hold,
            ]
                + (honouringIdempotencyKeys ? ["--idempotency"] : [])
                + (holdingEveryMatch ? ["--hold-every-match"] : []) + narrowing,
            listen: 1,
            stderrPath: directory + "/stderr.log",
            cleanupDirectory: directory
        )
        let port = process.ports[0]
        try await process.waitUntilReady { Probe.acceptsConnections(port: port) }
        return HoldingProxy(port: port, markerPath: markerPath, process: process)
    }

    /// The marker file's lines.
    public func markers() -> [String] {
        ((try? String(contentsOfFile: markerPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Waits (bounded) until the upstream has answered 2xx to a held request whose line contains `fragment`, and
    /// returns that line.
    @discardableResult
    public func waitForStored(_ fragment: String = "", timeout: Duration = .seconds(60)) async throws -> String {
        try await waitUntil(timeout: timeout, "the proxy to hold a stored write matching \(fragment)") {
            markers().contains { $0.hasPrefix("stored ") && $0.contains(fragment) }
        }
        return markers().first { $0.hasPrefix("stored ") && $0.contains(fragment) }!
    }

    /// The requests held so far (their `stored …` lines).
    public func storedCount() -> Int {
        markers().count { $0.hasPrefix("stored ") }
    }

    /// Holds the requests whose `METHOD target` matches `pattern` from now on, in place of the pattern it started
    /// with: a test that kills a client several times holds other writes each round on the one proxy address its
    /// journal is bound to. Written whole before it is read (a rename), so a request never sees half a pattern.
    public func hold(_ pattern: String) throws {
        let staged = markerPath + ".hold.new"
        try pattern.write(toFile: staged, atomically: false, encoding: .utf8)
        guard rename(staged, markerPath + ".hold") == 0 else {
            throw TestSupportError("cannot rename \(staged): errno \(errno)")
        }
    }

    /// Holds nothing more from now on (connections already held stay held): the run that follows a killed client
    /// goes through.
    public func stopHolding() throws {
        guard FileManager.default.createFile(atPath: markerPath + ".release", contents: nil) else {
            throw TestSupportError("cannot create \(markerPath).release")
        }
    }

    /// Stops the proxy (SIGTERM to its supervisor) and waits for it.
    public func stop() {
        process.terminate()
    }
}
