import Testing

@testable import CurlewLoad

/// `--fail-if`: parsed strictly, and a change fails only beyond the limit and, with an interval, beyond no change.
@Suite struct LoadRegressionLimitTests {
    static func change(_ metric: String, _ change: Double, low: Double? = nil, high: Double? = nil) -> MetricChange {
        MetricChange(metric: metric, base: 100, new: 100 * (1 + change), change: change, low: low, high: high)
    }

    @Test func limitsAreReadWithTheirDirection() throws {
        #expect(try LoadRegressionLimit(parsing: "p99 +10%").limit == 0.10)
        #expect(try LoadRegressionLimit(parsing: "rps -5%").limit == -0.05)
        #expect(try LoadRegressionLimit(parsing: "p99.9 +0.5%").metric == "p99.9")
        for bad in ["p99 10%", "p42 +10%", "p99 +10", "p99", "rps -x%", "p99 +10% extra", "rps -inf%", ""] {
            #expect(throws: LoadRegressionLimit.ParseError.self, "\(bad.debugDescription)") {
                try LoadRegressionLimit(parsing: bad)
            }
        }
    }

    @Test func aChangeFailsOnlyBeyondTheLimitAndBeyondItsInterval() throws {
        let latency = try LoadRegressionLimit(parsing: "p99 +10%")
        #expect(latency.isExceeded(by: Self.change("p99", 0.2)), "no interval: the figure decides")
        #expect(latency.isExceeded(by: Self.change("p99", 0.2, low: 0.05, high: 0.3)))
        #expect(!latency.isExceeded(by: Self.change("p99", 0.2, low: -0.01, high: 0.4)), "noise can explain it")
        #expect(!latency.isExceeded(by: Self.change("p99", 0.05, low: 0.02, high: 0.08)), "within the limit")
        #expect(!latency.isExceeded(by: Self.change("p50", 0.9)), "another metric")
        let throughput = try LoadRegressionLimit(parsing: "rps -5%")
        #expect(throughput.isExceeded(by: Self.change("rps", -0.2, low: -0.3, high: -0.1)))
        #expect(!throughput.isExceeded(by: Self.change("rps", -0.2, low: -0.3, high: 0.01)))
        #expect(!throughput.isExceeded(by: Self.change("rps", 0.5)), "faster is no regression")
    }
}
