import CurlewSharding
import Foundation
import Testing

@testable import CurlewLoad

@Suite struct BenchMergeTests {
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
