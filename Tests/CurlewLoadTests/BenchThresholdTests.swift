import Testing

@testable import CurlewLoad

@Suite struct LoadThresholdTests {
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
        ("p99<20ms", LoadThreshold.Metric.percentile(99), LoadThreshold.Comparison.less, 20_000.0),
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
        text: String, metric: LoadThreshold.Metric, comparison: LoadThreshold.Comparison, limit: Double
    ) throws {
        let threshold = try LoadThreshold(text)
        #expect(threshold.metric == metric)
        #expect(threshold.comparison == comparison)
        #expect(abs(threshold.limit - limit) < 1e-9)
    }

    @Test func parsesACommaSeparatedList() throws {
        let rules = try LoadThreshold.parseList("p99<20ms,errors<1%,rps>5000")
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
            try LoadThreshold(text)
        } throws: { error in
            let message = (error as? LoadThreshold.ParseError)?.description ?? ""
            return message.contains(reason) && message.contains("expected")
        }
    }

    @Test func evaluatesAgainstTheMeasuredValues() throws {
        let run = measurements(
            requests: 1000, failed: 20, statusCounts: [200: 980, 503: 20], rps: 5000, latency: 10_000)
        func passes(_ text: String) throws -> Bool { try LoadThreshold(text).evaluate(run).passed }
        #expect(try passes("p99<20ms"))  // 9.9 ms
        #expect(try !passes("p99<5ms"))
        #expect(try passes("errors<=2%"))
        #expect(try !passes("errors<2%"))
        #expect(try passes("5xx<3%"))
        #expect(try passes("status503<=2%"))
        #expect(try !passes("2xx>99%"))
        #expect(try passes("rps>=5000"))
        #expect(try !passes("rps>5000"))
        let result = try LoadThreshold("errors<1%").evaluate(run)
        #expect(
            result == LoadThresholdResult(threshold: "errors<1%", passed: false, actual: 2, limit: 1, unit: "percent"))
    }

    /// `late` is the open model's requests sent after their scheduled time, as a percentage of all requests. A run
    /// without a schedule measures none, so the rule fails there, and a plan without one refuses it up front.
    @Test func lateIsAPercentageOfTheRequestsAndNeedsASchedule() throws {
        let threshold = try LoadThreshold("late<1%")
        #expect(threshold.metric == .late)
        var run = measurements(requests: 1000)
        run.lateRequests = 20
        #expect(
            threshold.evaluate(run)
                == LoadThresholdResult(threshold: "late<1%", passed: false, actual: 2, limit: 1, unit: "percent"))
        run.lateRequests = 0
        #expect(try LoadThreshold("late<=0%").evaluate(run).passed)
        run.lateRequests = nil
        #expect(try !LoadThreshold("late<=100%").evaluate(run).passed)
        #expect(threshold.missingSchedule(openModel: false)?.contains("no schedule without a rate") == true)
        #expect(threshold.missingSchedule(openModel: true) == nil)
        #expect(try LoadThreshold("errors<1%").missingSchedule(openModel: false) == nil)
        #expect(throws: LoadThreshold.ParseError.self) { try LoadThreshold("late<3") }
    }

    @Test func aRuleWithoutMeasuredDataFails() throws {
        let empty = measurements(requests: 0, failed: 0, statusCounts: [:], rps: 0, latency: nil)
        #expect(try !LoadThreshold("p99<1s").evaluate(empty).passed)
        #expect(try !LoadThreshold("errors<1%").evaluate(empty).passed)
        #expect(try LoadThreshold("rps<1").evaluate(empty).passed)
    }
}
