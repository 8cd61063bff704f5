import Foundation
import Testing

@testable import curlew

struct ShardMergeTests {
    struct Plan: Codable, Equatable {
        var requests: Int
        var shards: Int
    }

    private func members(
        _ indices: [Int], count: Int = 4, runId: String? = "r1", requests: Int = 100
    ) -> [ShardSet.Member<Plan>] {
        indices.map {
            ShardSet.Member(
                path: "out/s\($0).json", shard: ShardAssignment(index: $0, count: count), runId: runId,
                plan: Plan(requests: requests, shards: count))
        }
    }

    private func failure(_ body: () throws -> Void) -> String {
        do {
            try body()
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test func everyShardOnceOfOneRunIsAWholeRun() throws {
        try ShardSet.check(members([2, 0, 3, 1]))
    }

    @Test func aMissingShardIsNamed() {
        let message = failure { try ShardSet.check(members([0, 2, 3])) }
        #expect(message.contains("1 of 4 shards missing (1/4)"), "\(message)")
    }

    @Test func aShardTwiceIsNamedWithBothFiles() {
        var set = members([0, 1, 2, 3])
        set.append(
            ShardSet.Member(
                path: "again/s1.json", shard: ShardAssignment(index: 1, count: 4), runId: "r1",
                plan: Plan(requests: 100, shards: 4)))
        let message = failure { try ShardSet.check(set) }
        #expect(message.contains("shard 1/4 appears twice: s1.json and s1.json"), "\(message)")
    }

    @Test func shardsOfAnotherRunAreRefusedByIdOrByPlan() {
        let otherID = failure { try ShardSet.check(members([0, 1]) + members([2, 3], runId: "r2")) }
        #expect(
            otherID.contains("different runs") && otherID.contains("run r1") && otherID.contains("run r2"), "\(otherID)"
        )
        let otherPlan = failure { try ShardSet.check(members([0, 1]) + members([2, 3], requests: 200)) }
        #expect(otherPlan.contains("differ in requests (100 vs 200)"), "\(otherPlan)")
        let otherCount = failure { try ShardSet.check(members([0, 1]) + members([2], count: 3)) }
        #expect(otherCount.contains("shards (4 vs 3)"), "\(otherCount)")
        #expect(failure { try ShardSet.check([ShardSet.Member<Plan>]()) }.contains("nothing to merge"))
    }

    private func interval(
        _ start: Double, _ end: Double, latencies: [UInt64], failed: Int = 0, status: [Int: Int] = [:]
    ) -> BenchInterval {
        var histogram = BenchTally.emptyHistogram()
        for latency in latencies { _ = histogram.record(latency) }
        return BenchInterval(
            startSeconds: start, endSeconds: end, histogram: histogram, failed: failed, statusCounts: status,
            totalRequests: 0, totalFailed: 0)
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

    @Test func intervalsLineUpOnWallClockTimeAndAddUp() throws {
        // Shard B started 1.02 s after shard A: its first interval is A's second.
        let a = try shard(
            startedAt: 1000,
            [
                interval(0, 1, latencies: [100, 200], status: [200: 2]),
                interval(1, 2, latencies: [300], failed: 1, status: [503: 1]),
            ])
        let b = try shard(
            startedAt: 1001.02,
            [
                interval(0, 1, latencies: [400, 500], status: [200: 2]),
                interval(1, 1.5, latencies: [600], status: [200: 1]),
            ])
        let merged = BenchMerge.alignedIntervals([a, b], runStart: 1000, length: 1)
        #expect(merged.map(\.startSeconds) == [0, 1, 2])
        #expect(merged.map(\.requests) == [2, 3, 1])
        #expect(merged.map(\.failed) == [0, 1, 0])
        #expect(merged[1].statusCounts == [200: 2, 503: 1])
        #expect(merged.map(\.totalRequests) == [2, 5, 6])
        #expect(merged[1].histogram.max == 500)
        // A slot lasts as long as its longest member.
        #expect(merged[2].endSeconds - merged[2].startSeconds == 0.5)
    }
}
