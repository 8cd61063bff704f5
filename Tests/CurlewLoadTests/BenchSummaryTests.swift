import Foundation
import Testing

@testable import CurlewLoad

@Suite struct BenchSummaryTests {
    private func result(latencies: [UInt64]) -> BenchResult {
        var tally = BenchTally()
        for latency in latencies { _ = tally.histogram.record(latency) }
        tally.succeeded = latencies.count
        return BenchResult(tally: tally, elapsed: .seconds(1))
    }

    /// `max` was the top of the largest latency's histogram bucket (up to 0.1 % above it): one request of 999,990 µs
    /// showed as 1,000,447 µs and failed `max<1s` while `p100<1s` passed. It is the latency recorded, as `min` is,
    /// and the percentiles agree with it.
    @Test func maxIsTheLargestLatencyRecorded() throws {
        let result = result(latencies: [999_990])
        let summary = BenchSummary(
            result: result, url: "http://h/", method: "GET", connections: 1, loops: 1, latencyFromIntendedTime: false,
            rate: nil, targets: nil)
        #expect(summary.latencyMicroseconds.max == 999_990)
        #expect(summary.latencyMicroseconds.min == 999_990)
        #expect(summary.latencyMicroseconds.p99_9 == 999_990)
        let measurements = BenchSummary.measurements(of: result, openModel: false)
        for rule in ["max<1s", "p100<1s", "max>=999990us", "max<=999990us"] {
            #expect(try LoadThreshold(rule).evaluate(measurements).passed, "\(rule)")
        }
        #expect(try LoadThreshold("max<=999989us").evaluate(measurements).actual == 999_990)
    }

    /// Late requests are the open model's: its summary says how many and by how much at most (0 when none were),
    /// and `late` thresholds measure them; a closed-model summary has no such field, as it has no schedule.
    @Test func lateRequestsAreInTheOpenModelsSummaryOnly() throws {
        var tally = BenchTally()
        for _ in 0..<4 { _ = tally.histogram.record(20_000) }
        tally.succeeded = 4
        tally.recordLate(microseconds: 3_000)
        tally.recordLate(microseconds: 12_000)
        let result = BenchResult(tally: tally, elapsed: .seconds(1))
        func summary(openModel: Bool) -> BenchSummary {
            BenchSummary(
                result: result, url: "http://h/", method: "GET", connections: 1, loops: 1,
                latencyFromIntendedTime: openModel, rate: openModel ? 100 : nil, targets: nil)
        }
        let open = summary(openModel: true)
        #expect(open.lateRequests == 2 && open.maxLatenessMicroseconds == 12_000)
        let closed = summary(openModel: false)
        #expect(closed.lateRequests == nil && closed.maxLatenessMicroseconds == nil)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let openJSON = String(decoding: try encoder.encode(open), as: UTF8.self)
        #expect(openJSON.contains("\"lateRequests\":2") && openJSON.contains("\"maxLatenessMicroseconds\":12000"))
        let closedJSON = String(decoding: try encoder.encode(closed), as: UTF8.self)
        #expect(!closedJSON.contains("lateRequests") && !closedJSON.contains("maxLateness"))
        let late = try LoadThreshold("late<=50%")
        #expect(late.evaluate(BenchSummary.measurements(of: result, openModel: true)).actual == 50)
        #expect(late.evaluate(BenchSummary.measurements(of: result, openModel: false)).actual == nil)
    }
}
