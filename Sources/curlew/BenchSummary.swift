import CurlewSharding
import Foundation

/// The bench result as printed, in text or JSON. Field names are part of the command's interface (README).
struct BenchSummary: Codable {
    struct Latency: Codable {
        var p50: Double
        var p90: Double
        var p99: Double
        var p99_9: Double
        var max: Double
        var mean: Double
        var min: Double
    }

    /// One line of a targets file and what it got.
    struct Target: Codable {
        var method: String
        var url: String
        var requests: Int
        var failed: Int
    }

    struct EmbeddedServer: Codable {
        var requests: Int
        var connections: Int
    }

    var url: String
    var method: String
    var connections: Int
    var loops: Int
    /// How the loops drove libcurl: "poll" or "socket-action" (`--loop-driver`, or chosen by connections per loop).
    var loopDriver: String?
    var requests: Int
    var succeeded: Int
    var failed: Int
    var failures: [String: Int]
    var statusCodes: [String: Int]
    var durationSeconds: Double
    var requestsPerSecond: Double
    var latencyMicroseconds: Latency
    /// "intended" with --rate or rate stages (measured from the scheduled send time), "actual" otherwise.
    var latencyFrom: String
    var rate: Double?
    /// `--stages` as given.
    var stages: String?
    /// Per target of a `--targets` file, in the file's order; nil for a single URL.
    var targets: [Target]?
    /// Every `--threshold`, evaluated.
    var thresholds: [BenchThresholdResult] = []
    /// The exit status the command ends with (see `curlew bench --help`).
    var exitStatus: Int32 = 0
    /// `--hdr-log` and `--report`, where given.
    var hdrLog: String?
    var report: String?
    var bytesSent: Int64
    var bytesReceived: Int64
    var connectionsOpened: Int
    /// Requests the engine sent once more on a fresh connection (a pooled one was closed, reset, GOAWAY'd or had
    /// stray bytes): not failures, but a sign of how the server treats connections.
    var freshConnectionRetries: Int
    var interrupted = false
    var embeddedServer: EmbeddedServer?
    /// This process's part of a sharded run (nil for a whole run) and the run's id.
    var shard: ShardAssignment?
    var runId: String?
    /// `curlew merge`: how many shards' results this summary adds up.
    var shardsMerged: Int?
    /// When the load started (seconds since 1970), and the `--start-at` time it was meant to start at.
    var startedAt: Double?
    var startAt: Double?
    /// `--output-dir` files only: what `curlew merge` needs beyond the summary.
    var run: BenchRunRecord?

    /// The figures thresholds are evaluated against.
    static func measurements(of result: BenchResult) -> BenchMeasurements {
        let tally = result.tally
        let histogram = tally.histogram
        var statusCounts: [Int: Int] = [:]
        for code in tally.statusCounts.indices where tally.statusCounts[code] > 0 {
            statusCounts[code] = tally.statusCounts[code]
        }
        return BenchMeasurements(
            requests: tally.requests, failed: tally.failed, statusCounts: statusCounts,
            requestsPerSecond: result.elapsed > .zero ? Double(tally.requests) / result.elapsed.seconds : 0,
            latencyMicroseconds: { metric in
                guard histogram.totalCount > 0 else { return nil }
                switch metric {
                case .percentile(let percentile): return Double(histogram.valueAtPercentile(percentile))
                case .mean: return histogram.mean
                case .max: return Double(histogram.max)
                case .min: return Double(histogram.min)
                default: return nil
                }
            })
    }

    init(result: BenchResult, plan: BenchPlan, url: String, method: String, loops: Int) {
        self.init(
            result: result, url: url, method: method, connections: plan.connections, loops: loops,
            latencyFromIntendedTime: plan.latencyFromIntendedTime, rate: plan.rate,
            targets: plan.targets.count > 1 ? plan.targets.map { ($0.method.rawValue, $0.url) } : nil)
    }

    /// - Parameter targets: method and URL of each target of a targets file, nil for a single URL.
    init(
        result: BenchResult, url: String, method: String, connections: Int, loops: Int, latencyFromIntendedTime: Bool,
        rate: Double?, targets: [(method: String, url: String)]?
    ) {
        let tally = result.tally
        let histogram = tally.histogram
        let hasSamples = histogram.totalCount > 0
        self.url = url
        self.method = method
        self.connections = connections
        self.loops = loops
        self.requests = tally.requests
        self.succeeded = tally.succeeded
        self.failed = tally.requests - tally.succeeded
        self.failures = tally.failures
        self.statusCodes = Dictionary(
            uniqueKeysWithValues: tally.statusCounts.enumerated().filter { $0.element > 0 }.map {
                (String($0.offset), $0.element)
            })
        self.durationSeconds = result.elapsed.seconds
        self.requestsPerSecond = result.elapsed > .zero ? Double(tally.requests) / result.elapsed.seconds : 0
        func percentile(_ value: Double) -> Double { hasSamples ? Double(histogram.valueAtPercentile(value)) : 0 }
        self.latencyMicroseconds = Latency(
            p50: percentile(50), p90: percentile(90), p99: percentile(99), p99_9: percentile(99.9),
            max: hasSamples ? Double(histogram.max) : 0, mean: hasSamples ? (histogram.mean * 10).rounded() / 10 : 0,
            min: hasSamples ? Double(histogram.min) : 0)
        self.latencyFrom = latencyFromIntendedTime ? "intended" : "actual"
        if let targets, tally.targetRequests.count == targets.count {
            self.targets = targets.indices.map { index in
                Target(
                    method: targets[index].method, url: targets[index].url,
                    requests: tally.targetRequests[index], failed: tally.targetFailures[index])
            }
        }
        self.rate = rate
        self.bytesSent = tally.bytesSent
        self.bytesReceived = tally.bytesReceived
        self.connectionsOpened = tally.connectionsOpened
        self.freshConnectionRetries = tally.freshConnectionRetries
    }

    var text: String {
        let latency = latencyMicroseconds
        var lines: [String] = []
        func row(_ label: String, _ value: String) {
            lines.append(label.padding(toLength: 14, withPad: " ", startingAt: 0) + value)
        }
        if let placement = ShardAssignment.summaryRow(shard: shard, runId: runId, shardsMerged: shardsMerged) {
            row(placement.label, placement.value)
        }
        row(
            "requests",
            "\(formatCount(requests)) (\(formatCount(succeeded)) succeeded, \(formatCount(failed)) failed)\(interrupted ? ", interrupted" : "")"
        )
        row("duration", String(format: "%.2f s", durationSeconds))
        row("requests/s", formatCount(Int(requestsPerSecond.rounded())))
        row(
            "latency",
            "p50 \(formatLatency(microseconds: latency.p50))  p90 \(formatLatency(microseconds: latency.p90))  "
                + "p99 \(formatLatency(microseconds: latency.p99))  p99.9 \(formatLatency(microseconds: latency.p99_9))"
        )
        row(
            "",
            "max \(formatLatency(microseconds: latency.max))  mean \(formatLatency(microseconds: latency.mean))"
                + (latencyFrom == "intended" ? "  (from intended send times)" : ""))
        row(
            "status codes",
            statusCodes.isEmpty
                ? "none"
                : statusCodes.sorted { $0.key < $1.key }.map { "\($0.key): \(formatCount($0.value))" }.joined(
                    separator: ", "))
        row(
            "failures",
            failures.isEmpty
                ? "none"
                : failures.sorted { $0.key < $1.key }.map { "\($0.key): \(formatCount($0.value))" }.joined(
                    separator: ", "))
        row("bytes", "sent \(formatBytes(bytesSent)), received \(formatBytes(bytesReceived))")
        row(
            "connections",
            "\(formatCount(connectionsOpened)) opened"
                + (freshConnectionRetries == 0
                    ? "" : ", \(formatCount(freshConnectionRetries)) requests retried on a fresh connection"))
        if let targets {
            let width = min(targets.map { $0.method.count + 1 + $0.url.count }.max() ?? 0, 60)
            for (index, target) in targets.enumerated() {
                let name = (target.method + " " + target.url).padding(toLength: width, withPad: " ", startingAt: 0)
                row(
                    index == 0 ? "targets" : "",
                    "\(name)  \(formatCount(target.requests)) requests, \(formatCount(target.failed)) failed")
            }
        }
        if let embeddedServer {
            row(
                "server",
                "embedded server counted \(formatCount(embeddedServer.requests)) requests on \(formatCount(embeddedServer.connections)) connections"
            )
        }
        for (index, result) in thresholds.enumerated() {
            let actual = BenchThreshold.format(result.actual, unit: result.unit)
            row(
                index == 0 ? "thresholds" : "",
                "\(result.passed ? "passed" : "FAILED")  \(result.threshold)  (measured \(actual))")
        }
        if let hdrLog { row("hdr log", hdrLog) }
        if let report { row("report", report) }
        switch exitStatus {
        case BenchExitStatus.everyRequestFailed: lines.append("every request failed: exit status \(exitStatus)")
        case BenchExitStatus.thresholdFailed: lines.append("a threshold failed: exit status \(exitStatus)")
        default: break
        }
        return lines.joined(separator: "\n")
    }
}
