import CurlewEngine
package import CurlewSharding
import Foundation

/// The bench result as `curlew bench` prints it, in text or JSON, and as `--output-dir` records it for
/// `curlew merge`. Field names are part of the command's interface (README).
package struct BenchSummary: Codable {
    package struct Latency: Codable {
        package var p50: Double
        package var p90: Double
        package var p99: Double
        package var p99_9: Double
        package var max: Double
        package var mean: Double
        package var min: Double
    }

    /// One line of a targets file and what it got.
    package struct Target: Codable {
        package var method: String
        package var url: String
        package var requests: Int
        package var failed: Int
    }

    /// One `--check` and how often it held.
    package struct Check: Codable {
        package var check: String
        /// Responses it held for, and did not (transport failures are neither).
        package var passed: Int
        package var failed: Int
        /// `passed` in percent of the responses checked.
        package var passRate: Double

        package init(check: String, passed: Int, checked: Int) {
            self.check = check
            self.passed = passed
            self.failed = checked - passed
            self.passRate = checked > 0 ? Double(passed) / Double(checked) * 100 : 0
        }

        /// Checks as written, with the tally's counts.
        package static func list(_ checks: [String], tally: BenchTally) -> [Check]? {
            guard !checks.isEmpty else { return nil }
            return checks.indices.map { index in
                Check(
                    check: checks[index],
                    passed: index < tally.checkPasses.count ? tally.checkPasses[index] : 0,
                    checked: tally.checkedResponses)
            }
        }
    }

    package struct EmbeddedServer: Codable {
        package var requests: Int
        package var connections: Int

        package init(requests: Int, connections: Int) {
            self.requests = requests
            self.connections = connections
        }
    }

    package var url: String
    package var method: String
    package var connections: Int
    package var loops: Int
    /// How the loops drove libcurl: "poll" or "socket-action" (`--loop-driver`, or chosen by connections per loop), or
    /// "dispatch" (`--event-loop dispatch`).
    package var loopDriver: String?
    package var requests: Int
    package var succeeded: Int
    package var failed: Int
    package var failures: [String: Int]
    package var statusCodes: [String: Int]
    package var durationSeconds: Double
    package var requestsPerSecond: Double
    package var latencyMicroseconds: Latency
    /// "intended" with --rate or rate stages (measured from the scheduled send time), "actual" otherwise.
    package var latencyFrom: String
    package var rate: Double?
    /// `--stages` as given.
    package var stages: String?
    /// Per target of a `--targets` file, in the file's order; nil for a single URL.
    package var targets: [Target]?
    /// Every `--check`, in the order given; nil without checks.
    package var checks: [Check]?
    /// Every `--threshold`, evaluated.
    package var thresholds: [LoadThresholdResult] = []
    /// The exit status the command ends with (see `curlew bench --help`).
    package var exitStatus: Int32 = 0
    /// `--hdr-log` and `--report`, where given.
    package var hdrLog: String?
    package var report: String?
    package var bytesSent: Int64
    package var bytesReceived: Int64
    package var connectionsOpened: Int
    /// Requests the engine sent once more on a fresh connection (a pooled one was closed, reset, GOAWAY'd or had
    /// stray bytes): not failures, but a sign of how the server treats connections.
    package var freshConnectionRetries: Int
    /// Open model only (nil otherwise): requests sent after their scheduled time because all `connections` were
    /// busy then, so the load generator, not the server, set the pace (raise -c); their latency counts from the
    /// schedule all the same. And the most one was late by, in microseconds (0 without late requests).
    package var lateRequests: Int?
    package var maxLatenessMicroseconds: Double?
    package var interrupted = false
    package var embeddedServer: EmbeddedServer?
    /// This process's part of a sharded run (nil for a whole run) and the run's id.
    package var shard: ShardAssignment?
    package var runId: String?
    /// `curlew merge`: how many shards' results this summary adds up.
    package var shardsMerged: Int?
    /// When the load started (seconds since 1970), and the `--start-at` time it was meant to start at.
    package var startedAt: Double?
    package var startAt: Double?
    /// `--output-dir` files only: what `curlew merge` needs beyond the summary.
    package var run: BenchRunRecord?

    /// The figures thresholds are evaluated against.
    /// - Parameter openModel: Whether requests had scheduled times (``BenchPlan/latencyFromIntendedTime``): only
    ///   then does the run measure late requests.
    package static func measurements(of result: BenchResult, openModel: Bool) -> BenchMeasurements {
        let tally = result.tally
        let histogram = tally.histogram
        var statusCounts: [Int: Int] = [:]
        for code in tally.statusCounts.indices where tally.statusCounts[code] > 0 {
            statusCounts[code] = tally.statusCounts[code]
        }
        return BenchMeasurements(
            requests: tally.requests, failed: tally.failed, statusCounts: statusCounts,
            checkedResponses: tally.checkedResponses, checkPasses: tally.checkPasses,
            lateRequests: openModel ? tally.lateRequests : nil,
            requestsPerSecond: result.elapsed > .zero ? Double(tally.requests) / result.elapsed.seconds : 0,
            latencyMicroseconds: { metric in
                guard histogram.totalCount > 0 else { return nil }
                switch metric {
                case .percentile(let percentile): return Double(histogram.valueAtPercentile(percentile))
                case .mean: return histogram.mean
                // The largest latency recorded, as `min` is the smallest: `max` is the top of its bucket (up to
                // 0.1 % above), so one 999,990 µs request failed `max<1s` while `p100<1s` passed.
                case .max: return Double(histogram.maxRecorded)
                case .min: return Double(histogram.min)
                default: return nil
                }
            })
    }

    /// Redacts every URL the summary names: in its initialiser, and for a summary read back from a file, which an
    /// earlier version may have written with the URLs as typed.
    package mutating func redactURLs() {
        url = URLRedaction.messages.displaying(url)
        targets = targets?.map { target in
            var target = target
            target.url = URLRedaction.messages.displaying(target.url)
            return target
        }
        if let target = run?.plan.target { run?.plan.target = URLRedaction.messages.displaying(target) }
    }

    package init(result: BenchResult, plan: BenchPlan, url: String, method: String, loops: Int) {
        self.init(
            result: result, url: url, method: method, connections: plan.connections, loops: loops,
            latencyFromIntendedTime: plan.latencyFromIntendedTime, rate: plan.rate,
            targets: plan.targets.count > 1 && plan.countsEachTarget
                ? plan.targets.map { ($0.method.rawValue, $0.url) } : nil)
        checks = Check.list(plan.checks.map(\.text), tally: result.tally)
    }

    /// - Parameter targets: method and URL of each target of a targets file, nil for a single URL.
    package init(
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
            max: hasSamples ? Double(histogram.maxRecorded) : 0,
            mean: hasSamples ? (histogram.mean * 10).rounded() / 10 : 0,
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
        if latencyFromIntendedTime {
            self.lateRequests = tally.lateRequests
            self.maxLatenessMicroseconds = Double(tally.maxLatenessMicroseconds)
        }
        // A summary is printed, written and shared: a password or a key typed into a URL stays out of it.
        redactURLs()
    }
}
