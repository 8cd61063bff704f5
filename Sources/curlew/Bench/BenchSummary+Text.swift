import CurlewLoad
import CurlewSharding
import Foundation

extension BenchSummary {
    /// The summary as `curlew bench` and `curlew merge` print it.
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
        // A merge of changed shard files can give any finite rate: past Int's range it is shown as Int.max, not
        // trapped on.
        let rate = requestsPerSecond.rounded()
        row("requests/s", formatCount(rate < 0x1p63 ? Int(max(rate, 0)) : .max))
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
        if let lateLine { row("late", lateLine) }
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
        for (index, check) in (checks ?? []).enumerated() {
            row(
                index == 0 ? "checks" : "",
                String(format: "%6.2f%%  ", check.passRate) + "\(check.check)  (\(formatCount(check.passed)) passed, "
                    + "\(formatCount(check.failed)) failed)")
        }
        for (index, result) in thresholds.enumerated() {
            let actual = LoadThreshold.format(result.actual, unit: result.unit)
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

extension BenchSummary {
    /// The late requests in words, with what to do about them; nil when none were late (or the run had no schedule).
    var lateLine: String? {
        guard let lateRequests, lateRequests > 0 else { return nil }
        let lateness = maxLatenessMicroseconds.map { ", up to \(formatLatency(microseconds: $0)) late" } ?? ""
        return "\(formatCount(lateRequests)) requests sent after their scheduled time\(lateness): every connection "
            + "was busy (raise -c)"
    }
}

extension LoadThreshold {
    /// The measured value formatted like the limit was written.
    static func format(_ value: Double?, unit: String) -> String {
        guard let value else { return "no data" }
        switch unit {
        case "microseconds": return formatLatency(microseconds: value)
        case "percent": return String(format: "%.2f%%", value)
        default: return String(format: "%.0f", value)
        }
    }
}

/// The exit statuses of `curlew bench`, in the order they take precedence. Documented in the command's help and
/// README; scripts and CI depend on them.
enum BenchExitStatus {
    /// Every request was sent and every threshold passed.
    static let success: Int32 = 0
    /// The command could not do its work (a file could not be read or written, the server could not start).
    static let failure: Int32 = 1
    /// ArgumentParser's usage error (EX_USAGE): bad options, before anything is sent.
    static let usage: Int32 = 64
    /// Requests were sent, none succeeded (each was a transport error or an HTTP status ≥ 400).
    static let everyRequestFailed: Int32 = 98
    /// At least one `--threshold` failed (k6 uses the same number).
    static let thresholdFailed: Int32 = 99
    /// Interrupted with Ctrl-C; the summary covers what finished.
    static let interrupted: Int32 = 130

    /// The status of a finished run. Ctrl-C comes first (the run is incomplete, so nothing else is conclusive),
    /// then a run without a single success (whatever the thresholds say: `p99<20ms` passes easily when every
    /// connection is refused), then the thresholds.
    static func of(interrupted: Bool, requests: Int, succeeded: Int, thresholds: [LoadThresholdResult]) -> Int32 {
        if interrupted { return Self.interrupted }
        if requests > 0 && succeeded == 0 { return everyRequestFailed }
        if thresholds.contains(where: { !$0.passed }) { return thresholdFailed }
        return success
    }
}
