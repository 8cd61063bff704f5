import Foundation

/// One run as `curlew compare` reads it: a printed `--json` summary (figures only), or an `--output-dir` folder of
/// shard results (figures, the merged HdrHistogram and the per-interval request counts, from which the intervals of
/// confidence come).
package struct ComparedRun {
    package let path: String
    package let requestsPerSecond: Double
    /// p50, p90, p99, p99.9 and max, microseconds.
    package let latency: [String: Double]
    package let histogram: LatencyHistogram?
    /// Requests per second in each interval of the run (`--interval`), when recorded.
    package let intervalRates: [Double]

    /// Reads `path`: a folder of `--output-dir` shard files (merged as `curlew merge` does), or a file holding a
    /// `curlew bench --json` summary (its last JSON line).
    package static func load(_ path: String) throws(LoadComparisonError) -> ComparedRun {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw LoadComparisonError("\(path.debugDescription) does not exist")
        }
        if isFolder.boolValue {
            do {
                // The shard files as `curlew merge` finds them in a folder: `bench…json`, not their histograms.
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                let files = names.filter {
                    $0.hasPrefix("bench") && $0.hasSuffix(".json") && !$0.hasSuffix(".histogram.json")
                }
                .sorted().map { (path as NSString).appendingPathComponent($0) }
                guard !files.isEmpty else {
                    throw LoadComparisonError("\(path.debugDescription) holds no bench shard results")
                }
                var shards: [BenchShardResult] = []
                for file in files { shards.append(try BenchShardResult.load(path: file)) }
                let merge = try BenchMerge(shards, thresholds: [])
                let rates = merge.intervals.compactMap { interval -> Double? in
                    let seconds = interval.endSeconds - interval.startSeconds
                    return seconds > 0 ? Double(interval.histogram.totalCount) / seconds : nil
                }
                return ComparedRun(
                    path: path, requestsPerSecond: merge.summary.requestsPerSecond,
                    latency: Self.figures(merge.summary.latencyMicroseconds), histogram: merge.histogram,
                    intervalRates: rates)
            } catch let error as LoadComparisonError {
                throw error
            } catch {
                throw LoadComparisonError("\(path.debugDescription): \(error)")
            }
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let line = text.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
            let summary = try? JSONDecoder().decode(BenchSummary.self, from: Data(line.utf8))
        else {
            throw LoadComparisonError(
                "\(path.debugDescription) is not a `curlew bench --json` summary or an --output-dir folder")
        }
        return ComparedRun(
            path: path, requestsPerSecond: summary.requestsPerSecond,
            latency: Self.figures(summary.latencyMicroseconds),
            histogram: nil, intervalRates: [])
    }

    package init(
        path: String, requestsPerSecond: Double, latency: [String: Double], histogram: LatencyHistogram?,
        intervalRates: [Double]
    ) {
        self.path = path
        self.requestsPerSecond = requestsPerSecond
        self.latency = latency
        self.histogram = histogram
        self.intervalRates = intervalRates
    }

    private static func figures(_ latency: BenchSummary.Latency) -> [String: Double] {
        ["p50": latency.p50, "p90": latency.p90, "p99": latency.p99, "p99.9": latency.p99_9, "max": latency.max]
    }
}

/// The change of one metric between two runs, with a 95 % interval of the relative change when both runs carry what
/// it needs: for latencies, a bootstrap over each run's HdrHistogram (200 resamples of up to 20,000 latencies drawn
/// from its counts, seeded, so the same inputs give the same interval); for throughput, the spread of the runs'
/// per-interval rates. The interval of the change is the conservative one: from the new run's low end against the
/// base's high end to the other way round.
package struct MetricChange: Codable, Equatable, Sendable {
    package let metric: String
    package let base: Double
    package let new: Double
    /// (new − base) ÷ base.
    package let change: Double
    /// The 95 % interval of ``change``; nil when a run lacks the histogram or intervals (a printed summary).
    package let low: Double?
    package let high: Double?

    /// The metrics compared, in order.
    package static let metrics = ["rps", "p50", "p90", "p99", "p99.9", "max"]

    package static func compare(_ base: ComparedRun, _ new: ComparedRun) -> [MetricChange] {
        metrics.map { metric in
            let baseValue = metric == "rps" ? base.requestsPerSecond : base.latency[metric] ?? 0
            let newValue = metric == "rps" ? new.requestsPerSecond : new.latency[metric] ?? 0
            let change = baseValue > 0 ? (newValue - baseValue) / baseValue : 0
            var bounds: (Double, Double)?
            if baseValue > 0, let baseRange = range(metric, base), let newRange = range(metric, new) {
                bounds = (
                    (newRange.lowerBound - baseRange.upperBound) / baseValue,
                    (newRange.upperBound - baseRange.lowerBound) / baseValue
                )
            }
            return MetricChange(
                metric: metric, base: baseValue, new: newValue, change: change, low: bounds?.0, high: bounds?.1)
        }
    }

    /// A 95 % interval of one run's metric.
    private static func range(_ metric: String, _ run: ComparedRun) -> ClosedRange<Double>? {
        if metric == "rps" {
            let rates = run.intervalRates
            guard rates.count >= 2 else { return nil }
            let mean = rates.reduce(0, +) / Double(rates.count)
            let variance = rates.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(rates.count - 1)
            let margin = 1.96 * (variance / Double(rates.count)).squareRoot()
            return (run.requestsPerSecond - margin)...(run.requestsPerSecond + margin)
        }
        // The maximum is one latency: no resample says more than it does.
        guard metric != "max", let histogram = run.histogram, histogram.totalCount > 0,
            let percentile = Double(metric.dropFirst())
        else { return nil }
        return bootstrap(histogram, percentile: percentile)
    }

    private static func bootstrap(_ histogram: LatencyHistogram, percentile: Double) -> ClosedRange<Double> {
        var values: [Double] = []
        var cumulative: [UInt64] = []
        var total: UInt64 = 0
        for bucket in histogram.recordedValues() where bucket.count > 0 {
            total += UInt64(bucket.count)
            values.append(Double(histogram.medianEquivalentForValue(bucket.value)))
            cumulative.append(total)
        }
        var random = SplitMix64(seed: 0x6375_726C_6577)
        let size = Int(min(total, 20_000))
        var estimates: [Double] = []
        var sample = [Double](repeating: 0, count: size)
        for _ in 0..<200 {
            for index in 0..<size {
                let draw = random.next() % total
                // The first bucket whose cumulative count exceeds the draw.
                var low = 0
                var high = cumulative.count - 1
                while low < high {
                    let middle = (low + high) / 2
                    if cumulative[middle] > draw { high = middle } else { low = middle + 1 }
                }
                sample[index] = values[low]
            }
            sample.sort()
            let rank = min(size - 1, max(0, Int((percentile / 100 * Double(size)).rounded(.up)) - 1))
            estimates.append(sample[rank])
        }
        estimates.sort()
        return estimates[4]...estimates[194]
    }
}

/// A deterministic generator for the bootstrap (the same inputs give the same interval).
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}

/// `--fail-if 'p99 +10%'` / `--fail-if 'rps -5%'`: the regression that fails a comparison. A latency metric fails when
/// it rose by more than the percentage, a throughput when it fell by more; and, where the change has an interval,
/// only when the whole interval is on that side of no change (a difference the runs' own spread can explain does
/// not fail).
public struct LoadRegressionLimit: Sendable, Hashable, CustomStringConvertible {
    /// `rps`, `p50`, `p90`, `p99`, `p99.9` or `max`.
    public let metric: String
    /// The allowed change, as a fraction: +0.10 for `+10%`, −0.05 for `-5%`.
    public let limit: Double
    public let description: String

    /// Why a `--fail-if` could not be read.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Reads `METRIC +N%` or `METRIC -N%` (the sign says which way is a regression).
    public init(parsing text: String) throws(ParseError) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2, MetricChange.metrics.contains(String(parts[0])) else {
            throw ParseError(
                description:
                    "--fail-if \(text.debugDescription): expected METRIC +N% or METRIC -N%, METRIC one of \(MetricChange.metrics.joined(separator: ", "))"
            )
        }
        let amount = parts[1]
        guard amount.count >= 3, let sign = amount.first, sign == "+" || sign == "-", amount.hasSuffix("%"),
            let number = Double(amount.dropFirst().dropLast()), number.isFinite, number >= 0, number <= 10_000
        else {
            throw ParseError(description: "--fail-if \(text.debugDescription): the change must be +N% or -N%")
        }
        metric = String(parts[0])
        limit = (sign == "+" ? 1 : -1) * number / 100
        description = text
    }

    /// Whether `change` is beyond the limit (and, with an interval, beyond no change).
    package func isExceeded(by change: MetricChange) -> Bool {
        guard change.metric == metric else { return false }
        if limit >= 0 {
            return change.change > limit && (change.low.map { $0 > 0 } ?? true)
        }
        return change.change < limit && (change.high.map { $0 < 0 } ?? true)
    }
}

package struct LoadComparisonError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
