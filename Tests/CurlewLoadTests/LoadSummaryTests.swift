import Testing

@testable import CurlewLoad

@Suite struct LoadSummaryTests {
    /// The library's `maxLatency` was the top of the largest latency's histogram bucket, above what any request took
    /// (1,000,447 µs for one of 999,990 µs), and a plan's `max<1s` failed on it. It is the latency recorded.
    @Test func maxLatencyIsTheLargestLatencyRecorded() throws {
        var tally = BenchTally()
        for latency: UInt64 in [1_000, 999_990] { _ = tally.histogram.record(latency) }
        tally.succeeded = 2
        var plan = LoadPlan(requests: [], shape: .requests(2))
        plan.thresholds = [try LoadThreshold("max<1s")]
        let summary = LoadSummary(BenchResult(tally: tally, elapsed: .seconds(1)), plan: plan, stopped: false)
        #expect(summary.maxLatency == .microseconds(999_990))
        #expect(summary.minLatency == .microseconds(1_000))
        #expect(summary.latency(percentile: 100) == summary.maxLatency)
        #expect(summary.passed)
    }
}
