import Testing

@testable import curlew

@Suite struct BenchThresholdTests {
    private func measurements(
        requests: Int = 1000, failed: Int = 0, statusCounts: [Int: Int] = [200: 1000], rps: Double = 5000,
        latency: Double? = 10_000
    ) -> BenchMeasurements {
        BenchMeasurements(
            requests: requests, failed: failed, statusCounts: statusCounts, requestsPerSecond: rps,
            latencyMicroseconds: { metric in
                guard let latency else { return nil }
                if case .percentile(let percentile) = metric { return latency * percentile / 100 }
                return latency
            })
    }

    @Test(arguments: [
        ("p99<20ms", BenchThreshold.Metric.percentile(99), BenchThreshold.Comparison.less, 20_000.0),
        ("p99.9 <= 1.5s", .percentile(99.9), .lessOrEqual, 1_500_000),
        ("mean<800us", .mean, .less, 800),
        ("max<2m", .max, .less, 120_000_000),
        ("median<5ms", .percentile(50), .less, 5_000),
        ("errors<1%", .errorRate, .less, 1),
        ("5xx<=0.5%", .statusClass(5), .lessOrEqual, 0.5),
        ("2xx>=99%", .statusClass(2), .greaterOrEqual, 99),
        ("status503<1%", .status(503), .less, 1),
        ("rps>5000", .requestsPerSecond, .greater, 5000),
        (" RPS > 10.5 ", .requestsPerSecond, .greater, 10.5),
    ])
    func parsesEachKindOfRule(
        text: String, metric: BenchThreshold.Metric, comparison: BenchThreshold.Comparison, limit: Double
    ) throws {
        let threshold = try BenchThreshold(parsing: text)
        #expect(threshold.metric == metric)
        #expect(threshold.comparison == comparison)
        #expect(abs(threshold.limit - limit) < 1e-9)
    }

    @Test func parsesACommaSeparatedList() throws {
        let rules = try BenchThreshold.parseList("p99<20ms,errors<1%,rps>5000")
        #expect(rules.map(\.text) == ["p99<20ms", "errors<1%", "rps>5000"])
    }

    @Test(arguments: [
        ("p99", "no comparison"),
        ("p99<20", "needs a unit"),
        ("p101<20ms", "unknown metric"),
        ("latency<20ms", "unknown metric"),
        ("errors<1", "percentage"),
        ("errors<150%", "percentage"),
        ("rps>fast", "number"),
        ("6xx<1%", "unknown metric"),
        ("", "no comparison"),
    ])
    func rejectsMalformedRulesWithAReason(text: String, reason: String) {
        #expect {
            try BenchThreshold(parsing: text)
        } throws: { error in
            let message = (error as? BenchThreshold.ParseError)?.description ?? ""
            return message.contains(reason) && message.contains("expected")
        }
    }

    @Test func evaluatesAgainstTheMeasuredValues() throws {
        let run = measurements(
            requests: 1000, failed: 20, statusCounts: [200: 980, 503: 20], rps: 5000, latency: 10_000)
        func passes(_ text: String) throws -> Bool { try BenchThreshold(parsing: text).evaluate(run).passed }
        #expect(try passes("p99<20ms"))  // 9.9 ms
        #expect(try !passes("p99<5ms"))
        #expect(try passes("errors<=2%"))
        #expect(try !passes("errors<2%"))
        #expect(try passes("5xx<3%"))
        #expect(try passes("status503<=2%"))
        #expect(try !passes("2xx>99%"))
        #expect(try passes("rps>=5000"))
        #expect(try !passes("rps>5000"))
        let result = try BenchThreshold(parsing: "errors<1%").evaluate(run)
        #expect(
            result == BenchThresholdResult(threshold: "errors<1%", passed: false, actual: 2, limit: 1, unit: "percent"))
    }

    @Test func aRuleWithoutMeasuredDataFails() throws {
        let empty = measurements(requests: 0, failed: 0, statusCounts: [:], rps: 0, latency: nil)
        #expect(try !BenchThreshold(parsing: "p99<1s").evaluate(empty).passed)
        #expect(try !BenchThreshold(parsing: "errors<1%").evaluate(empty).passed)
        #expect(try BenchThreshold(parsing: "rps<1").evaluate(empty).passed)
    }

    @Test func exitStatusesTakePrecedenceInOrder() {
        let failedRule = BenchThresholdResult(
            threshold: "p99<1ms", passed: false, actual: 2000, limit: 1000, unit: "microseconds")
        let passedRule = BenchThresholdResult(
            threshold: "p99<1s", passed: true, actual: 2000, limit: 1e6, unit: "microseconds")
        #expect(BenchExitStatus.of(interrupted: false, requests: 10, succeeded: 10, thresholds: [passedRule]) == 0)
        #expect(
            BenchExitStatus.of(interrupted: false, requests: 10, succeeded: 9, thresholds: [passedRule, failedRule])
                == 99)
        // Every request failed: 98 even though the latency rule passes.
        #expect(BenchExitStatus.of(interrupted: false, requests: 10, succeeded: 0, thresholds: [passedRule]) == 98)
        #expect(BenchExitStatus.of(interrupted: true, requests: 10, succeeded: 0, thresholds: [failedRule]) == 130)
        // Nothing sent (a schedule of 0 rps) is not "every request failed".
        #expect(BenchExitStatus.of(interrupted: false, requests: 0, succeeded: 0, thresholds: []) == 0)
    }
}
