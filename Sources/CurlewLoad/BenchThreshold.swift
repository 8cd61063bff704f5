import CurlewEngine
import Foundation

/// One pass/fail rule on a load test, such as `p99<20ms`, `errors<1%` or `rps>5000`.
///
/// Latency rules take a percentile (`p50`, `p99.9`, …), `mean`, `max` or `min` and a duration; rate rules take
/// `errors`, a status class (`2xx` … `5xx`), an exact status (`503`) or, in the open model, `late` (requests sent after
/// their scheduled time for want of a free connection) and a percentage of all requests; `rps`
/// takes a number of requests per second. The operators are `<`, `<=`, `>` and `>=`. A rule the run gives no value
/// for (a latency of a run without requests) fails.
///
/// Pure: parsing and evaluation read nothing but their arguments, so both are tested without a run.
public struct LoadThreshold: Sendable, Hashable, CustomStringConvertible {
    /// What a threshold measures.
    package enum Metric: Sendable, Hashable {
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
        /// The pass rate of all checks together (`checks`), or of the check of this 1-based number (`check2`).
        case checks
        case check(Int)
        /// Open model: requests sent after their scheduled time because every connection was busy, as a percentage
        /// of all requests.
        case late

        package var isLatency: Bool {
            switch self {
            case .percentile, .mean, .max, .min: true
            case .errorRate, .statusClass, .status, .requestsPerSecond, .checks, .check, .late: false
            }
        }

        package var isPercentage: Bool {
            switch self {
            case .errorRate, .statusClass, .status, .checks, .check, .late: true
            case .percentile, .mean, .max, .min, .requestsPerSecond: false
            }
        }
    }

    package enum Comparison: String, Sendable, Hashable, CaseIterable {
        // Two-character operators first, so `<=` is not read as `<` followed by `=…`.
        case lessOrEqual = "<="
        case greaterOrEqual = ">="
        case less = "<"
        case greater = ">"

        package func holds(_ actual: Double, _ limit: Double) -> Bool {
            switch self {
            case .less: actual < limit
            case .lessOrEqual: actual <= limit
            case .greater: actual > limit
            case .greaterOrEqual: actual >= limit
            }
        }
    }

    /// A rule that could not be read; the message says what is accepted.
    public struct ParseError: Error, CustomStringConvertible {
        /// What is wrong with the rule, and the grammar of a rule.
        public let description: String
    }

    package let metric: Metric
    package let comparison: Comparison
    /// Microseconds for latencies, percent for rates, requests per second for `rps`.
    package let limit: Double
    /// The rule as written (without surrounding spaces).
    public let text: String

    /// The rule as written.
    public var description: String { text }

    package static let grammar =
        "METRIC<LIMIT or METRIC>LIMIT (also <=, >=): p50 p90 p99 p99.9 … mean max min with a duration (20ms, 1.5s, "
        + "800us); errors, 2xx … 5xx or a status such as 503 with a percentage (1%); checks (all --check together) "
        + "or check1, check2 … (one, numbered as given) with a percentage (checks>99%); late (requests sent after "
        + "their scheduled time with --rate or rate stages) with a percentage (late<1%); rps with a number"

    /// Parses one rule, such as `p99<20ms`.
    ///
    /// - Throws: ``ParseError`` naming what is wrong and what is accepted.
    public init(_ rawText: String) throws(ParseError) {
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
            guard let duration = ScaledNumber.duration(value), Double(value) == nil else {
                throw fail("a latency limit needs a unit, e.g. 20ms")
            }
            limit = Double(duration.nanoseconds) / 1_000
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
    package static func parseList(_ text: String) throws(ParseError) -> [LoadThreshold] {
        var rules: [LoadThreshold] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            rules.append(try LoadThreshold(String(part)))
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
        case "checks": return .checks
        case "late": return .late
        default: break
        }
        if name.hasPrefix("check"), let number = Int(name.dropFirst("check".count)), (1...64).contains(number) {
            return .check(number)
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
    package func actual(in measurements: BenchMeasurements) -> Double? {
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
        case .checks:
            let evaluations = measurements.checkedResponses * measurements.checkPasses.count
            return evaluations > 0
                ? Double(measurements.checkPasses.reduce(0, +)) / Double(evaluations) * 100 : nil
        case .check(let number):
            guard number <= measurements.checkPasses.count, measurements.checkedResponses > 0 else { return nil }
            return Double(measurements.checkPasses[number - 1]) / Double(measurements.checkedResponses) * 100
        case .late: return measurements.lateRequests.flatMap(percentage)
        }
    }

    /// Why the rule measures a check a run of `checkCount` checks does not have (`checks` without a check,
    /// `check2` with one), or nil. Such a rule can only fail, for want of data, once the whole load was sent: it is
    /// refused before anything is, as k6 refuses a threshold on a metric no script defines.
    package func missingCheck(among checkCount: Int) -> String? {
        switch metric {
        case .checks where checkCount == 0: "there is no check to measure"
        case .check(let number) where number > checkCount: "there is no check \(number) (\(checkCount) given)"
        default: nil
        }
    }

    /// Why the rule measures what a run without a schedule does not have (`late`, which only the open model
    /// counts), or nil. Refused before anything is sent, as ``missingCheck(among:)`` is: it could only fail.
    package func missingSchedule(openModel: Bool) -> String? {
        metric == .late && !openModel
            ? "late counts requests sent after their scheduled time: there is no schedule without a rate" : nil
    }

    /// Evaluates the rule. Without a measured value the rule fails: a run that cannot show it met a limit has
    /// not met it.
    package func evaluate(_ measurements: BenchMeasurements) -> LoadThresholdResult {
        let actual = actual(in: measurements)
        let passed = actual.map { comparison.holds($0, limit) } ?? false
        return LoadThresholdResult(threshold: text, passed: passed, actual: actual, limit: limit, unit: unit)
    }

    /// The unit of ``limit`` and of the measured value, for JSON.
    package var unit: String {
        switch metric {
        case .percentile, .mean, .max, .min: "microseconds"
        case .errorRate, .statusClass, .status, .checks, .check, .late: "percent"
        case .requestsPerSecond: "requests/s"
        }
    }
}

/// What thresholds are evaluated against: the figures of a finished run.
package struct BenchMeasurements: Sendable {
    package var requests: Int
    package var failed: Int
    /// Responses per status code.
    package var statusCounts: [Int: Int]
    /// Responses the checks were evaluated on, and how many passed each check (empty without checks).
    package var checkedResponses: Int
    package var checkPasses: [Int]
    /// Requests sent late for want of a free connection; nil for a run without a schedule (closed model).
    package var lateRequests: Int?
    package var requestsPerSecond: Double
    /// A latency statistic in microseconds, nil when the run recorded none.
    package var latencyMicroseconds: @Sendable (LoadThreshold.Metric) -> Double?

    package init(
        requests: Int, failed: Int, statusCounts: [Int: Int], checkedResponses: Int = 0, checkPasses: [Int] = [],
        lateRequests: Int? = nil, requestsPerSecond: Double,
        latencyMicroseconds: @escaping @Sendable (LoadThreshold.Metric) -> Double?
    ) {
        self.requests = requests
        self.failed = failed
        self.statusCounts = statusCounts
        self.checkedResponses = checkedResponses
        self.checkPasses = checkPasses
        self.lateRequests = lateRequests
        self.requestsPerSecond = requestsPerSecond
        self.latencyMicroseconds = latencyMicroseconds
    }
}

/// One evaluated threshold: the rule, whether the run met it and what the run measured.
public struct LoadThresholdResult: Sendable, Codable, Equatable {
    /// The rule as written (``LoadThreshold/text``).
    public var threshold: String
    /// Whether the run met the rule; false when the run gave no value for it.
    public var passed: Bool
    /// The measured value in ``unit``; nil (JSON null) when the run gave none.
    public var actual: Double?
    /// The rule's limit in ``unit``.
    public var limit: Double
    /// `microseconds` for latencies, `percent` for rates, `requests/s` for throughput.
    public var unit: String

    package init(threshold: String, passed: Bool, actual: Double?, limit: Double, unit: String) {
        self.threshold = threshold
        self.passed = passed
        self.actual = actual
        self.limit = limit
        self.unit = unit
    }
}
