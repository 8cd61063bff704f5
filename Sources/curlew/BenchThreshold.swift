import Foundation

/// One pass/fail rule on a bench run, such as `p99<20ms`, `errors<1%` or `rps>5000`.
///
/// Pure: parsing and evaluation read nothing but their arguments, so both are tested without a run.
struct BenchThreshold: Sendable, Hashable, CustomStringConvertible {
    /// What a threshold measures.
    enum Metric: Sendable, Hashable {
        /// A latency percentile (0 < p ≤ 100), in microseconds.
        case percentile(Double)
        case mean
        case max
        case min
        /// Failed requests (transport errors and HTTP statuses ≥ 400) as a percentage of all requests.
        case errorRate
        /// Responses with a status in this class (2 for 2xx, …) as a percentage of all requests.
        case statusClass(Int)
        /// Responses with exactly this status as a percentage of all requests.
        case status(Int)
        /// Completed requests per second over the whole run.
        case requestsPerSecond

        var isLatency: Bool {
            switch self {
            case .percentile, .mean, .max, .min: true
            case .errorRate, .statusClass, .status, .requestsPerSecond: false
            }
        }

        var isPercentage: Bool {
            switch self {
            case .errorRate, .statusClass, .status: true
            case .percentile, .mean, .max, .min, .requestsPerSecond: false
            }
        }
    }

    enum Comparison: String, Sendable, Hashable, CaseIterable {
        // Two-character operators first, so `<=` is not read as `<` followed by `=…`.
        case lessOrEqual = "<="
        case greaterOrEqual = ">="
        case less = "<"
        case greater = ">"

        func holds(_ actual: Double, _ limit: Double) -> Bool {
            switch self {
            case .less: actual < limit
            case .lessOrEqual: actual <= limit
            case .greater: actual > limit
            case .greaterOrEqual: actual >= limit
            }
        }
    }

    /// A threshold the command line could not read; the message says what is accepted.
    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    let metric: Metric
    let comparison: Comparison
    /// Microseconds for latencies, percent for rates, requests per second for `rps`.
    let limit: Double
    /// As written, for the summary.
    let text: String

    var description: String { text }

    static let grammar =
        "METRIC<LIMIT or METRIC>LIMIT (also <=, >=): p50 p90 p99 p99.9 … mean max min with a duration (20ms, 1.5s, "
        + "800us); errors, 2xx … 5xx or a status such as 503 with a percentage (1%); rps with a number"

    /// Parses one rule; `--threshold` also accepts several separated by commas (see ``parseList(_:)``).
    init(parsing rawText: String) throws(ParseError) {
        let text = rawText.trimmingCharacters(in: .whitespaces)
        func fail(_ reason: String) -> ParseError {
            ParseError(description: "threshold \(rawText.debugDescription): \(reason); expected \(Self.grammar)")
        }
        guard let (comparison, range) = Self.findComparison(in: text) else {
            throw fail("no comparison (<, <=, >, >=)")
        }
        let name = text[..<range.lowerBound].trimmingCharacters(in: .whitespaces).lowercased()
        let value = text[range.upperBound...].trimmingCharacters(in: .whitespaces).lowercased()
        guard let metric = Self.metric(named: name) else { throw fail("unknown metric \(name.debugDescription)") }

        let limit: Double
        if metric.isLatency {
            guard let duration = DurationArgument(argument: value), Double(value) == nil else {
                throw fail("a latency limit needs a unit, e.g. 20ms")
            }
            limit = Double(duration.duration.nanoseconds) / 1_000
        } else if metric.isPercentage {
            guard value.hasSuffix("%"), let percent = Double(value.dropLast().trimmingCharacters(in: .whitespaces)),
                (0...100).contains(percent)
            else { throw fail("a rate limit is a percentage from 0% to 100%, e.g. 1%") }
            limit = percent
        } else {
            guard let number = Double(value), number.isFinite, number >= 0 else {
                throw fail("a requests-per-second limit is a number, e.g. 5000")
            }
            limit = number
        }
        self.metric = metric
        self.comparison = comparison
        self.limit = limit
        self.text = text
    }

    /// Parses `p99<20ms,errors<1%`: rules separated by commas.
    static func parseList(_ text: String) throws(ParseError) -> [BenchThreshold] {
        var rules: [BenchThreshold] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            rules.append(try BenchThreshold(parsing: String(part)))
        }
        return rules
    }

    private static func findComparison(in text: String) -> (Comparison, Range<String.Index>)? {
        guard let index = text.firstIndex(where: { $0 == "<" || $0 == ">" }) else { return nil }
        for comparison in Comparison.allCases {
            if text[index...].hasPrefix(comparison.rawValue) {
                return (comparison, index..<text.index(index, offsetBy: comparison.rawValue.count))
            }
        }
        return nil
    }

    private static func metric(named name: String) -> Metric? {
        switch name {
        case "mean", "avg": return .mean
        case "max": return .max
        case "min": return .min
        case "errors", "error_rate", "errorrate": return .errorRate
        case "rps", "requests/s", "throughput": return .requestsPerSecond
        case "median": return .percentile(50)
        default: break
        }
        if name.hasPrefix("p"), let percentile = Double(name.dropFirst()), percentile > 0, percentile <= 100 {
            return .percentile(percentile)
        }
        let statusName = name.hasPrefix("status") ? String(name.dropFirst("status".count)) : name
        if statusName.count == 3, statusName.hasSuffix("xx"), let first = statusName.first?.wholeNumberValue,
            (1...5).contains(first)
        {
            return .statusClass(first)
        }
        if statusName.count == 3, let code = Int(statusName), (100...599).contains(code) {
            return .status(code)
        }
        return nil
    }

    /// The run's measured value of this threshold's metric, or nil when the run gives none (a latency of a run
    /// without requests).
    func actual(in measurements: BenchMeasurements) -> Double? {
        let requests = Double(measurements.requests)
        func percentage(_ count: Int) -> Double? { requests > 0 ? Double(count) / requests * 100 : nil }
        switch metric {
        case .percentile(let percentile): return measurements.latencyMicroseconds(.percentile(percentile))
        case .mean, .max, .min: return measurements.latencyMicroseconds(metric)
        case .errorRate: return percentage(measurements.failed)
        case .statusClass(let first):
            return percentage(measurements.statusCounts.filter { $0.key / 100 == first }.reduce(0) { $0 + $1.value })
        case .status(let code): return percentage(measurements.statusCounts[code] ?? 0)
        case .requestsPerSecond: return measurements.requestsPerSecond
        }
    }

    /// Evaluates the rule. Without a measured value the rule fails: a run that cannot show it met a limit has
    /// not met it.
    func evaluate(_ measurements: BenchMeasurements) -> BenchThresholdResult {
        let actual = actual(in: measurements)
        let passed = actual.map { comparison.holds($0, limit) } ?? false
        return BenchThresholdResult(threshold: text, passed: passed, actual: actual, limit: limit, unit: unit)
    }

    /// The unit of ``limit`` and of the measured value, for JSON.
    var unit: String {
        switch metric {
        case .percentile, .mean, .max, .min: "microseconds"
        case .errorRate, .statusClass, .status: "percent"
        case .requestsPerSecond: "requests/s"
        }
    }

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

/// What thresholds are evaluated against: the figures of a finished run.
struct BenchMeasurements: Sendable {
    var requests: Int
    var failed: Int
    /// Responses per status code.
    var statusCounts: [Int: Int]
    var requestsPerSecond: Double
    /// A latency statistic in microseconds, nil when the run recorded none.
    var latencyMicroseconds: @Sendable (BenchThreshold.Metric) -> Double?
}

/// One evaluated threshold, as the summary prints it and JSON carries it.
struct BenchThresholdResult: Sendable, Codable, Equatable {
    var threshold: String
    var passed: Bool
    /// The measured value in ``unit``; nil (JSON null) when the run gave none.
    var actual: Double?
    var limit: Double
    var unit: String
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
    static func of(interrupted: Bool, requests: Int, succeeded: Int, thresholds: [BenchThresholdResult]) -> Int32 {
        if interrupted { return Self.interrupted }
        if requests > 0 && succeeded == 0 { return everyRequestFailed }
        if thresholds.contains(where: { !$0.passed }) { return thresholdFailed }
        return success
    }
}
