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

    /// Requests sent late are counted in the interval they were sent in and since the start; their largest lateness
    /// is a maximum, which tallies add up as one.
    @Test func lateRequestsAreCutIntoIntervalsAndTheirLargestLatenessIsKept() {
        var tally = BenchTally()
        var sampler = BenchIntervalSampler(start: tally)
        tally.recordLate(microseconds: 5_000)
        tally.recordLate(microseconds: 2_000)
        let first = sampler.next(tally, at: 1)
        let second = sampler.next(tally, at: 2)
        tally.recordLate(microseconds: 900)
        let third = sampler.next(tally, at: 3)
        #expect([first, second, third].map(\.lateRequests) == [2, 0, 1])
        #expect([first, second, third].map(\.totalLateRequests) == [2, 2, 3])
        #expect(tally.lateRequests == 3 && tally.maxLatenessMicroseconds == 5_000)
        var otherLoop = BenchTally()
        otherLoop.recordLate(microseconds: 7_000)
        tally.add(otherLoop)
        #expect(tally.lateRequests == 4 && tally.maxLatenessMicroseconds == 7_000)
    }

    /// Two snapshots of one run: the later one minus the earlier holds exactly what was counted in between, and
    /// adding it back gives the later one (intervals and live metrics are cut this way).
    @Test func aTallyMinusAnEarlierOneIsWhatWasCountedInBetween() {
        var before = BenchTally(targetCount: 2)
        _ = before.histogram.record(1_000)
        before.succeeded = 1
        before.statusCounts[200] = 1
        before.failures = ["http5xx": 2]
        before.bytesReceived = 100
        before.checkedResponses = 1
        before.targetRequests = [1, 0]
        var after = before
        _ = after.histogram.record(7_000)
        _ = after.histogram.record(7_000)
        after.succeeded += 1
        after.statusCounts[200] += 1
        after.statusCounts[503] += 1
        after.failures["http5xx", default: 0] += 1
        after.failures["timeout.total"] = 1
        after.bytesReceived += 50
        after.connectionsOpened += 1
        after.checkedResponses += 2
        after.checkPasses = [1]
        after.targetRequests = [1, 2]
        after.targetFailures = [0, 1]
        let delta = after.subtracting(before)
        #expect(delta.requests == 2 && delta.histogram.countForValue(7_000) == 2)
        #expect(delta.succeeded == 1 && delta.failed == 1)
        #expect(delta.statusCounts[200] == 1 && delta.statusCounts[503] == 1 && delta.statusCounts.reduce(0, +) == 2)
        #expect(delta.failures == ["http5xx": 1, "timeout.total": 1])
        #expect(delta.bytesReceived == 50 && delta.connectionsOpened == 1)
        #expect(delta.checkedResponses == 2 && delta.checkPasses == [1])
        #expect(delta.targetRequests == [0, 2] && delta.targetFailures == [0, 1])
        var sum = before
        sum.add(delta)
        #expect(
            sum.requests == after.requests && sum.failures == after.failures && sum.statusCounts == after.statusCounts)
        #expect(sum.targetRequests == after.targetRequests && sum.checkPasses == after.checkPasses)
    }
}
