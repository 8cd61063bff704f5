import Foundation

/// An OTLP/HTTP metrics receiver (`Tests/servers/otlp_receiver.py`): every export it gets is decoded with the
/// OpenTelemetry project's own protobuf classes (PyPI `opentelemetry-proto`) and kept as one JSON line, read back with
/// ``exports()``. Each instance is its own process on a loopback port of its own, stopped by ``stop()``.
public final class OTLPReceiver: Sendable {
    /// One data point of an export, as the receiver decoded it.
    public struct Point: Decodable, Sendable {
        public let name: String
        /// `sum`, `gauge` or `histogram`.
        public let kind: String
        public let unit: String?
        public let attributes: [String: String]
        public let monotonic: Bool?
        /// `cumulative` or `delta` (sums and histograms).
        public let temporality: String?
        /// A sum's or a gauge's value.
        public let value: Double?
        /// A histogram's count, sum, bucket bounds and bucket counts (one more count than bounds).
        public let count: Int?
        public let sum: Double?
        public let bounds: [Double]?
        public let counts: [Int]?
    }

    /// One export request's metrics, with its resource's attributes; `error` when the body did not decode,
    /// `refused` (the status answered) when the receiver was started to refuse.
    public struct Export: Decodable, Sendable {
        public let path: String
        public let contentType: String?
        /// The request's `Authorization` header, as the receiver got it.
        public let authorization: String?
        public let refused: Int?
        public let resource: [String: String]?
        public let points: [Point]?
        public let error: String?

        /// The points named `name` whose attributes include all of `attributes`.
        public func points(_ name: String, _ attributes: [String: String] = [:]) -> [Point] {
            (points ?? []).filter { point in
                point.name == name && attributes.allSatisfy { point.attributes[$0.key] == $0.value }
            }
        }

        /// The sum of the values of ``points(_:_:)``.
        public func total(_ name: String, _ attributes: [String: String] = [:]) -> Double {
            points(name, attributes).reduce(0) { $0 + ($1.value ?? 0) }
        }
    }

    public let port: Int
    private let exportsPath: String
    private let process: SupervisedProcess

    /// `http://127.0.0.1:port`, the base URL a client appends `/v1/metrics` to.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    private init(port: Int, exportsPath: String, process: SupervisedProcess) {
        self.port = port
        self.exportsPath = exportsPath
        self.process = process
    }

    /// Starts a receiver on a fresh loopback port; with `status`, it answers every export with that status instead
    /// of taking it (a collector that refuses).
    public static func start(status: Int? = nil) async throws -> OTLPReceiver {
        let directory = try TemporaryDirectory.make(prefix: "curlew-otlp-receiver")
        let exportsPath = directory + "/exports.jsonl"
        guard FileManager.default.createFile(atPath: exportsPath, contents: nil) else {
            throw TestSupportError("cannot create \(exportsPath)")
        }
        let process = try await SupervisedProcess.launch(
            name: "OTLP receiver",
            program: ["{python}", ServerScripts.directory + "/otlp_receiver.py", "{fd0}", exportsPath]
                + (status.map { ["--status", String($0)] } ?? []),
            listen: 1,
            stderrPath: directory + "/stderr.log",
            cleanupDirectory: directory
        )
        let port = process.ports[0]
        do {
            try await process.waitUntilReady { Probe.acceptsConnections(port: port) }
        } catch let exited as ServerExited {
            throw TestSupportError("\(exited)\nhint: `pip install opentelemetry-proto` for \(ServerScripts.python)")
        }
        return OTLPReceiver(port: port, exportsPath: exportsPath, process: process)
    }

    /// Every export received so far, in the order they came.
    public func exports() throws -> [Export] {
        let text = (try? String(contentsOfFile: exportsPath, encoding: .utf8)) ?? ""
        // A line still being written (no newline yet) is left for the next read.
        let complete = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        return try complete.filter { !$0.isEmpty }.map { line in
            try JSONDecoder().decode(Export.self, from: Data(line.utf8))
        }
    }

    /// Stops the receiver (SIGTERM to its supervisor) and waits for it.
    public func stop() {
        process.terminate()
    }
}
