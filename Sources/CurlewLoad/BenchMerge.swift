import CurlewEngine
import CurlewSharding
import Foundation
import Histogram

/// Shard results that cannot be read or added up; the message names the file.
package struct BenchMergeError: Error, CustomStringConvertible {
    package let description: String

    package init(_ description: String) {
        self.description = description
    }
}

/// What `curlew bench --output-dir` writes beyond the summary, for `curlew merge`.
package struct BenchRunRecord: Codable, Sendable {
    package var plan: BenchRunPlan
    package var intervals: [BenchIntervalCounts]
    /// File names, beside the summary.
    package var histogramFile: String
    package var hdrLogFile: String

    package init(plan: BenchRunPlan, intervals: [BenchIntervalCounts], histogramFile: String, hdrLogFile: String) {
        self.plan = plan
        self.intervals = intervals
        self.histogramFile = histogramFile
        self.hdrLogFile = hdrLogFile
    }
}

/// The run as asked for, before it was divided: every shard of one run has the same.
package struct BenchRunPlan: Codable, Sendable, Equatable {
    /// The URL (redacted as the summary's), the targets file, or "(embedded server)".
    package var target: String
    package var method: String
    package var requests: Int?
    package var durationSeconds: Double?
    package var rate: Double?
    package var stages: String?
    package var connections: Int?
    package var httpVersion: String
    package var targetsOrder: String
    package var seed: UInt64?
    package var intervalSeconds: Double
    package var startAt: Double?
    package var shards: Int
    /// `--check`, as written and in order: the merge adds check counts up by position, so shards that checked
    /// other things are not one run. Nil without checks (and in records written before checks were recorded).
    package var checks: [String]?

    package init(
        target: String, method: String, requests: Int? = nil, durationSeconds: Double? = nil, rate: Double? = nil,
        stages: String? = nil, connections: Int? = nil, httpVersion: String, targetsOrder: String, seed: UInt64? = nil,
        intervalSeconds: Double, startAt: Double? = nil, shards: Int, checks: [String]? = nil
    ) {
        self.target = URLRedaction.messages.displaying(target)
        self.method = method
        self.requests = requests
        self.durationSeconds = durationSeconds
        self.rate = rate
        self.stages = stages
        self.connections = connections
        self.httpVersion = httpVersion
        self.targetsOrder = targetsOrder
        self.seed = seed
        self.intervalSeconds = intervalSeconds
        self.startAt = startAt
        self.shards = shards
        self.checks = checks
    }
}

/// The counts of one interval (its latencies are the `--hdr-log` line of the same number).
package struct BenchIntervalCounts: Codable, Sendable {
    package var startSeconds: Double
    package var endSeconds: Double
    package var requests: Int
    package var failed: Int
    package var statusCodes: [String: Int]
    /// Requests sent late for want of a free connection; nil when there were none (and in records written before
    /// they were counted).
    package var lateRequests: Int?

    package init(_ interval: BenchInterval) {
        startSeconds = interval.startSeconds
        endSeconds = interval.endSeconds
        requests = interval.requests
        failed = interval.failed
        statusCodes = Dictionary(uniqueKeysWithValues: interval.statusCounts.map { (String($0.key), $0.value) })
        lateRequests = interval.lateRequests > 0 ? interval.lateRequests : nil
    }
}

/// One shard's `--output-dir` results, loaded.
package struct BenchShardResult {
    package var path: String
    package var summary: BenchSummary
    package var record: BenchRunRecord
    package var histogram: LatencyHistogram
    /// Seconds relative to the shard's start, as recorded.
    package var intervals: [BenchInterval]

    /// What `curlew merge` says of a summary as `curlew bench --json` prints it: one line naming what it needs.
    package static func printedSummaryMessage(path: String) -> String {
        "\(path.debugDescription) is a printed `curlew bench` summary, not a shard result: merge needs the files "
            + "each shard writes with --output-dir DIR (bench-shard-I-of-N.json beside its .histogram.json)"
    }

    /// Whether the file at `path` is a `curlew bench` summary (printed or written), to tell it from an upload
    /// result whose file name does not say.
    package static func isBenchSummary(path: String) -> Bool {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: path)) else { return false }
        return (try? JSONDecoder().decode(BenchSummary.self, from: data)) != nil
    }

    package static func load(path: String) throws(BenchMergeError) -> BenchShardResult {
        let directory = (path as NSString).deletingLastPathComponent
        var summary: BenchSummary
        do {
            summary = try JSONDecoder().decode(
                BenchSummary.self, from: try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw BenchMergeError("\(path.debugDescription) is not a curlew bench result: \(error)")
        }
        summary.redactURLs()
        guard let record = summary.run else {
            throw BenchMergeError(Self.printedSummaryMessage(path: path))
        }
        try checkFigures(summary, record, path: path)
        let histogramPath = (directory as NSString).appendingPathComponent(record.histogramFile)
        let latencyLimit = HdrHistogramEncoding.latencyLimit(shards: record.plan.shards)
        var histogram: LatencyHistogram
        do {
            histogram = try JSONDecoder().decode(
                StoredHistogram.self, from: try Data(contentsOf: URL(fileURLWithPath: histogramPath))
            ).histogram(latencyLimit: latencyLimit, exactMinimum: UInt64(exactly: summary.latencyMicroseconds.min))
        } catch {
            throw BenchMergeError("cannot read the histogram \(histogramPath.debugDescription): \(error)")
        }
        guard Int(histogram.totalCount) == summary.requests else {
            throw BenchMergeError(
                "\(histogramPath.debugDescription) holds \(histogram.totalCount) latencies, its summary \(summary.requests) requests"
            )
        }
        if histogram.totalCount > 0 {
            // The stored counts keep the largest latency's bucket, read back as its lowest value; the summary keeps
            // the latency itself. Raised to it (a count of 0 moves no count), the merge reports the largest of the
            // shards' maxima and caps percentiles there, as a single run does. A max outside that bucket is no
            // shard's.
            let maximum = summary.latencyMicroseconds.max
            guard let exact = UInt64(exactly: maximum), histogram.valuesAreEquivalent(exact, histogram.maxRecorded)
            else {
                throw BenchMergeError(
                    "\(path.debugDescription) gives a max latency of \(maximum) µs, its histogram one of \(histogram.max) µs"
                )
            }
            histogram.record(exact, count: 0)
            // The same for the smallest latency, which the reader recorded as the summary gives it if its bucket
            // holds it.
            let minimum = summary.latencyMicroseconds.min
            guard Double(histogram.min) == minimum else {
                throw BenchMergeError(
                    "\(path.debugDescription) gives a min latency of \(minimum) µs, its histogram one of \(histogram.min) µs"
                )
            }
        }
        let logPath = (directory as NSString).appendingPathComponent(record.hdrLogFile)
        let entries: [HdrHistogramLogEntry]
        do {
            entries = try HdrHistogramLogReader.read(path: logPath, latencyLimit: latencyLimit).entries
        } catch {
            throw BenchMergeError("cannot read the interval log: \(error.description)")
        }
        guard entries.count == record.intervals.count,
            zip(entries, record.intervals).allSatisfy({ Int($0.histogram.totalCount) == $1.requests })
        else {
            throw BenchMergeError(
                "\(logPath.debugDescription) does not match the intervals of \(path.debugDescription)")
        }
        // The figures are below `countLimit` (checkFigures), so these sums cannot overflow.
        var total = (requests: 0, failed: 0, late: 0)
        let intervals = zip(entries, record.intervals).map { entry, counts in
            total.requests += counts.requests
            total.failed += counts.failed
            total.late += counts.lateRequests ?? 0
            return BenchInterval(
                startSeconds: counts.startSeconds, endSeconds: counts.endSeconds, histogram: entry.histogram,
                failed: counts.failed,
                // "200" and "0200" are one status.
                statusCounts: Dictionary(
                    counts.statusCodes.compactMap { key, value in Int(key).map { ($0, value) } }, uniquingKeysWith: +),
                totalRequests: total.requests, totalFailed: total.failed, lateRequests: counts.lateRequests ?? 0,
                totalLateRequests: total.late)
        }
        return BenchShardResult(
            path: path, summary: summary, record: record, histogram: histogram, intervals: intervals)
    }

    /// The most a shard may count of anything (requests, failures, responses of a status, connections, bytes):
    /// 2^46, beyond any run, and low enough that the sums of 100,000 shards' counts (and of a shard's intervals,
    /// whose counts are each checked) cannot overflow.
    package static let countLimit = 1 << 46

    /// Refuses the figures a merge cannot add up: negative or beyond ``countLimit`` counts, times that are not
    /// finite or not in order, a shard that is not one of its run's. A file that was changed (or written by
    /// something else) is then an error naming it, never a trap or a sum that wrapped around.
    private static func checkFigures(
        _ summary: BenchSummary, _ record: BenchRunRecord, path: String
    ) throws(BenchMergeError) {
        func count(_ name: String, _ value: Int) throws(BenchMergeError) {
            guard (0...countLimit).contains(value) else {
                throw BenchMergeError(
                    "\(path.debugDescription) holds \(value) \(name): not a count from 0 to \(countLimit)")
            }
        }
        func sum(_ name: String, _ values: some Sequence<Int>) throws(BenchMergeError) {
            var total = 0
            for value in values {
                try count(name, value)
                total += value
                try count(name, total)
            }
        }
        func seconds(_ name: String, _ value: Double, upTo limit: Double) throws(BenchMergeError) {
            guard value.isFinite, value >= 0, value <= limit else {
                throw BenchMergeError("\(path.debugDescription) holds \(value) s as \(name)")
            }
        }
        for (name, value) in [
            ("requests", summary.requests), ("succeeded", summary.succeeded), ("failed", summary.failed),
            ("connections", summary.connections), ("loops", summary.loops),
            ("connections opened", summary.connectionsOpened),
            ("fresh-connection retries", summary.freshConnectionRetries),
            ("late requests", summary.lateRequests ?? 0),
        ] {
            try count(name, value)
        }
        try count("bytes sent", Int(clamping: summary.bytesSent))
        try count("bytes received", Int(clamping: summary.bytesReceived))
        try sum("failures", summary.failures.values)
        try sum("responses", summary.statusCodes.values)
        try sum("target requests", summary.targets?.map(\.requests) ?? [])
        try sum("target failures", summary.targets?.map(\.failed) ?? [])
        try sum("interval requests", record.intervals.map(\.requests))
        try sum("interval failures", record.intervals.map(\.failed))
        try sum("interval late requests", record.intervals.map { $0.lateRequests ?? 0 })
        for interval in record.intervals {
            try sum("interval responses", interval.statusCodes.values)
            try seconds("an interval's start", interval.startSeconds, upTo: 1e9)
            try seconds("an interval's end", interval.endSeconds, upTo: 1e9)
            guard interval.startSeconds <= interval.endSeconds else {
                throw BenchMergeError("\(path.debugDescription) holds an interval that ends before it starts")
            }
        }
        // Late by no more than the run lasts (31 years at most), in microseconds.
        try seconds("the largest lateness", (summary.maxLatenessMicroseconds ?? 0) / 1e6, upTo: 1e9)
        // Up to 31 years of run, started before the year 5000: the merged window stays within Int64 nanoseconds.
        try seconds("the duration", summary.durationSeconds, upTo: 1e9)
        try seconds("the start time", summary.startedAt ?? 0, upTo: 1e11)
        guard record.plan.intervalSeconds.isFinite, record.plan.intervalSeconds >= 0.001 else {
            throw BenchMergeError("\(path.debugDescription) holds intervals of \(record.plan.intervalSeconds) s")
        }
        if let shard = summary.shard {
            do {
                _ = try ShardAssignment.checked(index: shard.index, count: shard.count, source: path)
            } catch {
                throw BenchMergeError(error.description)
            }
            guard shard.count == record.plan.shards else {
                throw BenchMergeError(
                    "\(path.debugDescription) is shard \(shard) of a run planned in \(record.plan.shards) shards")
            }
        }
    }

    /// The counts of the summary and the histogram as a tally, to add up.
    package var tally: BenchTally {
        var tally = BenchTally(targetCount: summary.targets?.count ?? 1)
        tally.histogram = histogram
        tally.succeeded = summary.succeeded
        tally.failures = summary.failures
        for (code, count) in summary.statusCodes {
            if let code = Int(code), tally.statusCounts.indices.contains(code) { tally.statusCounts[code] += count }
        }
        tally.bytesSent = summary.bytesSent
        tally.bytesReceived = summary.bytesReceived
        tally.connectionsOpened = summary.connectionsOpened
        tally.freshConnectionRetries = summary.freshConnectionRetries
        tally.lateRequests = summary.lateRequests ?? 0
        // Checked finite and within 1e15 µs when loaded; a whole number of microseconds as written.
        tally.maxLatenessMicroseconds = UInt64((summary.maxLatenessMicroseconds ?? 0).rounded())
        if let targets = summary.targets, targets.count > 1 {
            tally.targetRequests = targets.map(\.requests)
            tally.targetFailures = targets.map(\.failed)
        }
        if let checks = summary.checks, let first = checks.first {
            tally.checkedResponses = first.passed + first.failed
            tally.checkPasses = checks.map(\.passed)
        }
        return tally
    }
}

/// The fields of hdrhistogram-swift's JSON form (its synthesized `Codable`) that hold a histogram's counts. The
/// others derive from these and are not read: decoded as they stood, a changed file gave a histogram whose total
/// was not its counts' sum, or whose arrays disagreed with its layout (a trap when added up).
private struct StoredHistogram: Decodable {
    var lowestDiscernibleValue: UInt64
    var numberOfSignificantValueDigits: Int
    var counts: [UInt64]
    var totalCount: UInt64

    enum CodingKeys: String, CodingKey {
        case lowestDiscernibleValue, numberOfSignificantValueDigits, counts
        case totalCount = "_totalCount"
    }

    /// The histogram rebuilt count by count, as the V2 reader does; refused when its total is not their sum.
    func histogram(latencyLimit: UInt64, exactMinimum: UInt64?) throws -> LatencyHistogram {
        guard lowestDiscernibleValue == 1, numberOfSignificantValueDigits == 3 else {
            throw HdrHistogramEncoding.Failure(
                description:
                    "a histogram of \(numberOfSignificantValueDigits) significant digits from \(lowestDiscernibleValue) (curlew writes 3 from 1)"
            )
        }
        var reader = HdrHistogramEncoding.CountsReader(latencyLimit: latencyLimit, exactMinimum: exactMinimum)
        for count in counts { try reader.add(count) }
        guard reader.histogram.totalCount == totalCount else {
            throw HdrHistogramEncoding.Failure(
                description: "its total is \(totalCount), its counts add up to \(reader.histogram.totalCount)")
        }
        return reader.histogram
    }
}

/// Shards' bench results added up into the result of the whole run: counts summed, percentiles from the sum of
/// the histograms (HdrHistograms add exactly, bucket by bucket; averaging percentiles would not be exact), and
/// intervals lined up on wall-clock time.
package struct BenchMerge {
    package var summary: BenchSummary
    package var intervals: [BenchInterval]
    package var histogram: LatencyHistogram
    package var plan: BenchRunPlan

    package init(_ shards: [BenchShardResult], thresholds extraThresholds: [LoadThreshold]) throws(BenchMergeError) {
        do {
            try ShardSet.check(
                shards.map {
                    ShardSet.Member(
                        path: $0.path, shard: $0.summary.shard ?? .whole, runId: $0.summary.runId,
                        plan: $0.record.plan)
                })
        } catch {
            throw BenchMergeError(error.description)
        }
        let first = shards[0]
        let plan = first.record.plan
        var tally = BenchTally(targetCount: first.summary.targets?.count ?? 1)
        for shard in shards { tally.add(shard.tally) }
        // The run's window: from the first shard's start to the last one's end (with --start-at, one second).
        let starts = shards.map { $0.summary.startedAt ?? 0 }
        let runStart = starts.min() ?? 0
        let runEnd = zip(shards, starts).map { $1 + $0.summary.durationSeconds }.max() ?? runStart
        guard runEnd - runStart <= 1e9 else {
            throw BenchMergeError("the shards' runs span \(runEnd - runStart) s: they are not of one run")
        }
        let result = BenchResult(tally: tally, elapsed: .nanoseconds(Int64(max(runEnd - runStart, 0) * 1e9)))

        var summary = BenchSummary(
            result: result, url: first.summary.url, method: first.summary.method,
            connections: shards.reduce(0) { $0 + $1.summary.connections },
            loops: shards.reduce(0) { $0 + $1.summary.loops },
            latencyFromIntendedTime: first.summary.latencyFrom == "intended", rate: first.summary.rate,
            targets: first.summary.targets?.map { ($0.method, $0.url) })
        summary.stages = first.summary.stages
        summary.runId = first.summary.runId
        summary.startedAt = runStart
        summary.startAt = plan.startAt
        summary.shardsMerged = shards.count
        summary.checks = BenchSummary.Check.list(first.summary.checks?.map(\.check) ?? [], tally: tally)
        summary.interrupted = shards.contains { $0.summary.interrupted }
        // The shards' own thresholds, then the merge's, each once.
        var texts: [String] = []
        var thresholds: [LoadThreshold] = []
        for threshold in shards.flatMap({
            $0.summary.thresholds.compactMap { try? LoadThreshold($0.threshold) }
        }) + extraThresholds
        where !texts.contains(threshold.text) {
            texts.append(threshold.text)
            thresholds.append(threshold)
        }
        // An open-model shard written before late requests were counted has no count: the run's is unknown, not 0,
        // so a `late` threshold has no data rather than passing.
        let openModel = first.summary.latencyFrom == "intended"
        let lateCounted = openModel && shards.allSatisfy { $0.summary.lateRequests != nil }
        if openModel && !lateCounted {
            summary.lateRequests = nil
            summary.maxLatenessMicroseconds = nil
        }
        // The exit status is the command's to set.
        var measurements = BenchSummary.measurements(of: result, openModel: openModel)
        if !lateCounted { measurements.lateRequests = nil }
        summary.thresholds = thresholds.map { $0.evaluate(measurements) }
        self.summary = summary
        self.histogram = tally.histogram
        self.plan = plan
        self.intervals = Self.alignedIntervals(shards, runStart: runStart, length: plan.intervalSeconds)
    }

    /// Interval `k` of the merge covers `[k, k + 1) × length` after the run's start; each shard interval goes to
    /// the `k` its own start falls on, by wall-clock time.
    package static func alignedIntervals(
        _ shards: [BenchShardResult], runStart: Double, length: Double
    ) -> [BenchInterval] {
        var merged: [Int: BenchInterval] = [:]
        for shard in shards {
            let offset = (shard.summary.startedAt ?? runStart) - runStart
            for interval in shard.intervals {
                let slot = max(Int(((offset + interval.startSeconds) / length).rounded()), 0)
                // The slot lasts as long as its longest member: shards' intervals of one slot run side by side.
                let lasted = interval.endSeconds - interval.startSeconds
                if var existing = merged[slot] {
                    existing.histogram.add(interval.histogram)
                    existing.failed += interval.failed
                    existing.lateRequests += interval.lateRequests
                    existing.statusCounts.merge(interval.statusCounts, uniquingKeysWith: +)
                    existing.endSeconds = max(existing.endSeconds, existing.startSeconds + lasted)
                    merged[slot] = existing
                } else {
                    var copy = interval
                    copy.startSeconds = Double(slot) * length
                    copy.endSeconds = copy.startSeconds + lasted
                    merged[slot] = copy
                }
            }
        }
        var total = (requests: 0, failed: 0, late: 0)
        return merged.keys.sorted().map { slot in
            var interval = merged[slot]!
            total.requests += interval.requests
            total.failed += interval.failed
            total.late += interval.lateRequests
            interval.totalRequests = total.requests
            interval.totalFailed = total.failed
            interval.totalLateRequests = total.late
            return interval
        }
    }
}
