import Testing

@testable import CurlewLoad

@Suite struct BenchIntervalsTests {
    @Test func differenceHoldsOnlyTheNewRecordings() {
        var before = BenchTally.emptyHistogram()
        for value in [100, 200, 300] as [UInt64] { _ = before.record(value) }
        var after = before
        for value in [200, 5_000, 90_000] as [UInt64] { _ = after.record(value) }
        let interval = BenchIntervalSampler.difference(after, minus: before)
        #expect(interval.totalCount == 3)
        #expect(interval.countForValue(200) == 1)
        #expect(interval.countForValue(100) == 0)
        #expect(interval.max == after.max)
        #expect(interval.min == 200)
    }

    @Test func samplerCutsIntervalsThatAddUpToTheRun() {
        var tally = BenchTally()
        var sampler = BenchIntervalSampler(start: tally)
        var intervals: [BenchInterval] = []
        for (second, latencies) in [[1_000, 2_000], [], [3_000, 4_000, 5_000]].enumerated() {
            for latency in latencies {
                _ = tally.histogram.record(UInt64(latency))
                tally.succeeded += 1
                tally.statusCounts[200] += 1
            }
            intervals.append(sampler.next(tally, at: Double(second + 1)))
        }
        #expect(intervals.map(\.requests) == [2, 0, 3])
        #expect(intervals.map(\.totalRequests) == [2, 2, 5])
        #expect(intervals.map(\.startSeconds) == [0, 1, 2])
        #expect(intervals[2].statusCounts == [200: 3])
        #expect(intervals[1].statusCounts.isEmpty)
        #expect(intervals[2].requestsPerSecond == 3)
        #expect(intervals[0].latencyMicroseconds(percentile: 100) >= 2_000)
        #expect(intervals[1].latencyMicroseconds(percentile: 99) == 0)
    }
}
