import CurlewSharding
import Foundation
import Testing

@testable import CurlewLoad

@Suite struct BenchMergeTests {
    private func interval(
        _ start: Double, _ end: Double, latencies: [UInt64], failed: Int = 0, status: [Int: Int] = [:], late: Int = 0
    ) -> BenchInterval {
        var histogram = BenchTally.emptyHistogram()
        for latency in latencies { _ = histogram.record(latency) }
        return BenchInterval(
            startSeconds: start, endSeconds: end, histogram: histogram, failed: failed, statusCounts: status,
            totalRequests: 0, totalFailed: 0, lateRequests: late)
    }

    private func shard(startedAt: Double, _ intervals: [BenchInterval]) throws -> BenchShardResult {
        var summary = try JSONDecoder().decode(BenchSummary.self, from: Data(Self.minimalSummary.utf8))
        summary.startedAt = startedAt
        let record = BenchRunRecord(
            plan: BenchRunPlan(
                target: "x", method: "GET", httpVersion: "1.1", targetsOrder: "round-robin", intervalSeconds: 1,
                shards: 2),
            intervals: [], histogramFile: "", hdrLogFile: "")
        return BenchShardResult(
            path: "", summary: summary, record: record, histogram: BenchTally.emptyHistogram(), intervals: intervals)
    }

    static let minimalSummary = """
        {"url":"x","method":"GET","connections":1,"loops":1,"requests":0,"succeeded":0,"failed":0,"failures":{},
        "statusCodes":{},"durationSeconds":1,"requestsPerSecond":0,"latencyMicroseconds":{"p50":0,"p90":0,"p99":0,
        "p99_9":0,"max":0,"mean":0,"min":0},"latencyFrom":"actual","thresholds":[],"exitStatus":0,"bytesSent":0,
        "bytesReceived":0,"connectionsOpened":0,"freshConnectionRetries":0,"interrupted":false}
        """

    /// Writes a shard's `--output-dir` files, with `change` applied to the file named by its suffix, and loads them.
    private func loadChangedShard(_ suffix: String, _ change: (String) -> String) throws -> BenchShardResult {
        let directory = NSTemporaryDirectory() + "curlew-merge-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var summary = try JSONDecoder().decode(BenchSummary.self, from: Data(Self.minimalSummary.utf8))
        summary.shard = ShardAssignment(index: 0, count: 2)
        summary.run = BenchRunRecord(
            plan: BenchRunPlan(
                target: "x", method: "GET", httpVersion: "1.1", targetsOrder: "round-robin", intervalSeconds: 1,
                shards: 2),
            intervals: [], histogramFile: "s.histogram.json", hdrLogFile: "s.hlog")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let files = [
            ".json": String(decoding: try encoder.encode(summary), as: UTF8.self),
            ".histogram.json": String(decoding: try encoder.encode(BenchTally.emptyHistogram()), as: UTF8.self),
        ]
        for (name, text) in files {
            try Data((name == suffix ? change(text) : text).utf8).write(
                to: URL(fileURLWithPath: directory + "/s" + name))
        }
        try HdrHistogramLogWriter(path: directory + "/s.hlog", startTime: Date()).close()
        return try BenchShardResult.load(path: directory + "/s.json")
    }

    /// Writes shard `index` of 2 as `curlew bench --output-dir` does, with these latencies (and `claimedMax` as its
    /// summary's max, if given), and loads it.
    private func loadShard(
        _ index: Int, latencies: [UInt64], each times: UInt64 = 1, claimedMax: Double? = nil,
        lateness: [UInt64]? = nil, writtenBeforeLateCounts: Bool = false
    ) throws -> BenchShardResult {
        let directory = NSTemporaryDirectory() + "curlew-merge-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var tally = BenchTally()
        for latency in latencies { _ = tally.histogram.record(latency, count: times) }
        tally.succeeded = latencies.count * Int(times)
        // With `lateness`, an open-model shard that sent requests late by these many microseconds.
        for microseconds in lateness ?? [] { tally.recordLate(microseconds: microseconds) }
        var summary = BenchSummary(
            result: BenchResult(tally: tally, elapsed: .seconds(1)), url: "x", method: "GET", connections: 1,
            loops: 1, latencyFromIntendedTime: lateness != nil, rate: lateness != nil ? 100 : nil, targets: nil)
        if let claimedMax { summary.latencyMicroseconds.max = claimedMax }
        if writtenBeforeLateCounts { (summary.lateRequests, summary.maxLatenessMicroseconds) = (nil, nil) }
        summary.shard = ShardAssignment(index: index, count: 2)
        summary.run = BenchRunRecord(
            plan: BenchRunPlan(
                target: "x", method: "GET", httpVersion: "1.1", targetsOrder: "round-robin", intervalSeconds: 1,
                shards: 2),
            intervals: [], histogramFile: "s.histogram.json", hdrLogFile: "s.hlog")
        try JSONEncoder().encode(summary).write(to: URL(fileURLWithPath: directory + "/s.json"))
        try JSONEncoder().encode(tally.histogram).write(to: URL(fileURLWithPath: directory + "/s.histogram.json"))
        try HdrHistogramLogWriter(path: directory + "/s.hlog", startTime: Date()).close()
        return try BenchShardResult.load(path: directory + "/s.json")
    }

    /// A shard's stored histogram keeps only its largest latency's bucket, read back as the bucket's lowest value:
    /// with `max` the latency recorded, a merge reported less than a shard measured. It reports the largest of the
    /// shards' maxima, caps percentiles there, and evaluates `max` on it; a max no bucket of its shard holds is
    /// refused.
    @Test func theMergedMaxIsTheLargestOfTheShardsMaxima() throws {
        let first = try loadShard(0, latencies: [1_000, 999_990])
        let second = try loadShard(1, latencies: [2_000, 500_003])
        let merged = try BenchMerge(
            [first, second], thresholds: [try LoadThreshold("max<1s"), try LoadThreshold("max>999989us")])
        #expect(merged.summary.latencyMicroseconds.max == 999_990)
        #expect(merged.summary.latencyMicroseconds.p99_9 == 999_990)
        #expect(merged.summary.thresholds.map(\.passed) == [true, true])
        #expect(throws: BenchMergeError.self) { try loadShard(0, latencies: [1_000, 999_990], claimedMax: 5_000_000) }
    }

    /// The stored counts keep the smallest latency's bucket too, read back as its lowest value: a merge reported a
    /// min below every shard's (10,000 µs for 10,005), and `min>10ms` passed on the shard and failed on the merge.
    @Test func theMergedMinIsTheSmallestOfTheShardsMinima() throws {
        let first = try loadShard(0, latencies: [10_005, 20_000])
        let second = try loadShard(1, latencies: [30_000, 30_001])
        #expect(first.histogram.min == 10_005)
        let merged = try BenchMerge([first, second], thresholds: [try LoadThreshold("min>10004us")])
        #expect(merged.summary.latencyMicroseconds.min == 10_005)
        #expect(merged.summary.thresholds.map(\.passed) == [true])
    }

    /// An overloaded open-model run's latencies, measured from the schedule, add up fast: 200,000 requests of
    /// 1,000 s each are 2 × 10^14 µs, past the 2^47 µs a histogram of 100,000 shards may hold. A run of two shards
    /// may hold half of 2^64 each, so it merges as recorded.
    @Test func aShardsLatenciesMayAddUpToItsShareOfWhatTheMergeHolds() throws {
        let first = try loadShard(0, latencies: [1_000_000_000], each: 200_000)
        let second = try loadShard(1, latencies: [2_000], each: 3)
        let merged = try BenchMerge([first, second], thresholds: [])
        #expect(merged.summary.requests == 200_003)
        #expect(merged.summary.latencyMicroseconds.max == 1_000_000_000)
        #expect(HdrHistogramEncoding.latencyLimit(shards: 2) == UInt64.max / 2)
    }

    /// Each shard counts the requests it sent late for want of a connection: the merge adds the counts, keeps the
    /// largest lateness of any shard, and evaluates `late` on the sum.
    @Test func theMergeAddsTheShardsLateRequestsAndKeepsTheLargestLateness() throws {
        let first = try loadShard(0, latencies: Array(repeating: 30_000, count: 10), lateness: [4_000, 9_000])
        let second = try loadShard(1, latencies: Array(repeating: 40_000, count: 10), lateness: [1_000, 2_000, 3_000])
        #expect(first.summary.lateRequests == 2 && second.summary.maxLatenessMicroseconds == 3_000)
        let merged = try BenchMerge(
            [first, second], thresholds: [try LoadThreshold("late<=25%"), try LoadThreshold("late<25%")])
        #expect(merged.summary.lateRequests == 5)
        #expect(merged.summary.maxLatenessMicroseconds == 9_000)
        #expect(merged.summary.thresholds.map(\.passed) == [true, false])
        #expect(merged.summary.thresholds.first?.actual == 25)
        // Closed-model shards have no schedule: nothing late to add, and no field for it.
        let closed = try BenchMerge(
            [try loadShard(0, latencies: [1_000]), try loadShard(1, latencies: [2_000])], thresholds: [])
        #expect(closed.summary.lateRequests == nil)
    }

    /// An open-model shard written before late requests were counted has no count: the merged run's is unknown, and
    /// a threshold on it has no data instead of passing on a count of 0.
    @Test func aShardWithoutALateCountLeavesTheMergedCountUnknown() throws {
        let counted = try loadShard(0, latencies: [30_000], lateness: [4_000])
        let uncounted = try loadShard(1, latencies: [40_000], lateness: [], writtenBeforeLateCounts: true)
        #expect(uncounted.summary.lateRequests == nil && uncounted.summary.latencyFrom == "intended")
        let merged = try BenchMerge([counted, uncounted], thresholds: [try LoadThreshold("late<=100%")])
        #expect(merged.summary.lateRequests == nil)
        #expect(merged.summary.maxLatenessMicroseconds == nil)
        #expect(merged.summary.thresholds.map(\.passed) == [false])
        #expect(merged.summary.thresholds.first?.actual == nil)
    }

    @Test func anUnchangedShardLoads() throws {
        #expect(try loadChangedShard("", { $0 }).summary.shard == ShardAssignment(index: 0, count: 2))
    }

    /// Each of these trapped (a range from a negative shard count, a division by intervals of 0 s, an Int of a total
    /// past Int.max) or added up to a histogram whose total was not its counts' sum (found by the shard-file fuzz
    /// target): they are refused, naming the file.
    @Test(arguments: [
        (".json", "\"count\":2", "\"count\":-1"), (".json", "\"intervalSeconds\":1", "\"intervalSeconds\":0"),
        (".json", "\"requests\":0", "\"requests\":-9223372036854775808"),
        (".json", "\"durationSeconds\":1", "\"durationSeconds\":1e300"),
        (".json", "\"latencyFrom\":\"actual\"", "\"latencyFrom\":\"intended\",\"lateRequests\":-1"),
        (".json", "\"latencyFrom\":\"actual\"", "\"latencyFrom\":\"intended\",\"maxLatenessMicroseconds\":1e300"),
        (".histogram.json", "\"_totalCount\":0", "\"_totalCount\":18446744073709551615"),
        (".histogram.json", "\"counts\":[0", "\"counts\":[9223372036854775807,9223372036854775807"),
    ])
    func aShardFileWithImpossibleFiguresIsRefused(suffix: String, field: String, changed: String) throws {
        #expect(throws: BenchMergeError.self) {
            try loadChangedShard(suffix) { text in
                guard let range = text.range(of: field) else { return "field \(field) not found" }
                return text.replacingCharacters(in: range, with: changed)
            }
        }
    }

    @Test func intervalsLineUpOnWallClockTimeAndAddUp() throws {
        // Shard B started 1.02 s after shard A: its first interval is A's second.
        let a = try shard(
            startedAt: 1000,
            [
                interval(0, 1, latencies: [100, 200], status: [200: 2]),
                interval(1, 2, latencies: [300], failed: 1, status: [503: 1], late: 1),
            ])
        let b = try shard(
            startedAt: 1001.02,
            [
                interval(0, 1, latencies: [400, 500], status: [200: 2], late: 2),
                interval(1, 1.5, latencies: [600], status: [200: 1]),
            ])
        let merged = BenchMerge.alignedIntervals([a, b], runStart: 1000, length: 1)
        #expect(merged.map(\.startSeconds) == [0, 1, 2])
        #expect(merged.map(\.requests) == [2, 3, 1])
        #expect(merged.map(\.failed) == [0, 1, 0])
        #expect(merged[1].statusCounts == [200: 2, 503: 1])
        #expect(merged.map(\.totalRequests) == [2, 5, 6])
        #expect(merged.map(\.lateRequests) == [0, 3, 0])
        #expect(merged.map(\.totalLateRequests) == [0, 3, 3])
        #expect(merged[1].histogram.max == 500)
        // A slot lasts as long as its longest member.
        #expect(merged[2].endSeconds - merged[2].startSeconds == 0.5)
    }
}
