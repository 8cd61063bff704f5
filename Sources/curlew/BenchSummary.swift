import Foundation

/// The bench result as printed, in text or JSON. Field names are part of the command's interface (README).
struct BenchSummary: Encodable {
    struct Latency: Encodable {
        var p50: Double
        var p90: Double
        var p99: Double
        var p99_9: Double
        var max: Double
        var mean: Double
        var min: Double
    }

    struct EmbeddedServer: Encodable {
        var requests: Int
        var connections: Int
    }

    var url: String
    var method: String
    var connections: Int
    var loops: Int
    var requests: Int
    var succeeded: Int
    var failed: Int
    var failures: [String: Int]
    var statusCodes: [String: Int]
    var durationSeconds: Double
    var requestsPerSecond: Double
    var latencyMicroseconds: Latency
    /// "intended" with --rate (measured from the scheduled send time), "actual" otherwise.
    var latencyFrom: String
    var rate: Double?
    var bytesSent: Int64
    var bytesReceived: Int64
    var connectionsOpened: Int
    /// Requests the engine sent once more on a fresh connection (a pooled one was closed, reset, GOAWAY'd or had
    /// stray bytes): not failures, but a sign of how the server treats connections.
    var freshConnectionRetries: Int
    var interrupted = false
    var embeddedServer: EmbeddedServer?

    init(result: BenchResult, plan: BenchPlan, url: String, method: String, loops: Int) {
        let tally = result.tally
        let histogram = tally.histogram
        let hasSamples = histogram.totalCount > 0
        self.url = url
        self.method = method
        self.connections = plan.connections
        self.loops = loops
        self.requests = tally.requests
        self.succeeded = tally.succeeded
        self.failed = tally.requests - tally.succeeded
        self.failures = tally.failures
        self.statusCodes = Dictionary(
            uniqueKeysWithValues: tally.statusCounts.enumerated().filter { $0.element > 0 }.map { (String($0.offset), $0.element) })
        self.durationSeconds = result.elapsed.seconds
        self.requestsPerSecond = result.elapsed > .zero ? Double(tally.requests) / result.elapsed.seconds : 0
        func percentile(_ value: Double) -> Double { hasSamples ? Double(histogram.valueAtPercentile(value)) : 0 }
        self.latencyMicroseconds = Latency(
            p50: percentile(50), p90: percentile(90), p99: percentile(99), p99_9: percentile(99.9),
            max: hasSamples ? Double(histogram.max) : 0, mean: hasSamples ? (histogram.mean * 10).rounded() / 10 : 0,
            min: hasSamples ? Double(histogram.min) : 0)
        self.latencyFrom = plan.rate == nil ? "actual" : "intended"
        self.rate = plan.rate
        self.bytesSent = tally.bytesSent
        self.bytesReceived = tally.bytesReceived
        self.connectionsOpened = tally.connectionsOpened
        self.freshConnectionRetries = tally.freshConnectionRetries
    }

    var text: String {
        let latency = latencyMicroseconds
        var lines: [String] = []
        func row(_ label: String, _ value: String) { lines.append(label.padding(toLength: 14, withPad: " ", startingAt: 0) + value) }
        row("requests", "\(formatCount(requests)) (\(formatCount(succeeded)) succeeded, \(formatCount(failed)) failed)\(interrupted ? ", interrupted" : "")")
        row("duration", String(format: "%.2f s", durationSeconds))
        row("requests/s", formatCount(Int(requestsPerSecond.rounded())))
        row(
            "latency",
            "p50 \(formatLatency(microseconds: latency.p50))  p90 \(formatLatency(microseconds: latency.p90))  "
                + "p99 \(formatLatency(microseconds: latency.p99))  p99.9 \(formatLatency(microseconds: latency.p99_9))")
        row("", "max \(formatLatency(microseconds: latency.max))  mean \(formatLatency(microseconds: latency.mean))"
            + (rate == nil ? "" : "  (from intended send times)"))
        row("status codes", statusCodes.isEmpty ? "none" : statusCodes.sorted { $0.key < $1.key }.map { "\($0.key): \(formatCount($0.value))" }.joined(separator: ", "))
        row("failures", failures.isEmpty ? "none" : failures.sorted { $0.key < $1.key }.map { "\($0.key): \(formatCount($0.value))" }.joined(separator: ", "))
        row("bytes", "sent \(formatBytes(bytesSent)), received \(formatBytes(bytesReceived))")
        row(
            "connections",
            "\(formatCount(connectionsOpened)) opened"
                + (freshConnectionRetries == 0
                    ? "" : ", \(formatCount(freshConnectionRetries)) requests retried on a fresh connection"))
        if let embeddedServer {
            row("server", "embedded server counted \(formatCount(embeddedServer.requests)) requests on \(formatCount(embeddedServer.connections)) connections")
        }
        return lines.joined(separator: "\n")
    }
}
