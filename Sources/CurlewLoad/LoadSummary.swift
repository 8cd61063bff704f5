/// What a load test sent and got back.
///
/// Latencies come from an HdrHistogram (3 significant digits, microsecond resolution): percentiles are exact to
/// 0.1 %. In an open-model run they count from each request's intended send time.
public struct LoadSummary: Sendable {
    package let result: BenchResult
    /// Requests completed: answered, or failed without an answer.
    public var requests: Int { result.tally.requests }
    /// Requests answered with a status below 400.
    public var succeeded: Int { result.tally.succeeded }
    /// Requests that failed: no answer (connection refused, timeout, TLS error …) or a status of 400 or more.
    public var failed: Int { result.tally.failed }
    /// Failed requests by kind: the engine's error code name (`couldNotConnect`, `timedOut`, …) or `http4xx` and
    /// `http5xx`.
    public var failures: [String: Int] { result.tally.failures }
    /// Responses by status code.
    public var statusCodes: [Int: Int] {
        var counts: [Int: Int] = [:]
        for code in result.tally.statusCounts.indices where result.tally.statusCounts[code] > 0 {
            counts[code] = result.tally.statusCounts[code]
        }
        return counts
    }
    /// Requests completed per request of the plan, in the order of ``LoadPlan/requests``.
    public var requestsPerTarget: [Int] {
        result.tally.targetRequests.isEmpty ? [requests] : result.tally.targetRequests
    }
    /// How long the run took, from the first request to the end of the last.
    public var duration: Duration { result.elapsed }
    /// Completed requests per second over the run.
    public var requestsPerSecond: Double {
        result.elapsed > .zero ? Double(requests) / result.elapsed.seconds : 0
    }
    /// Request bytes sent and response bytes (headers and bodies) received.
    public var bytesSent: Int64 { result.tally.bytesSent }
    /// Response bytes received, headers included.
    public var bytesReceived: Int64 { result.tally.bytesReceived }
    /// Connections the run opened.
    public var connectionsOpened: Int { result.tally.connectionsOpened }
    /// Requests the engine sent once more on a fresh connection because a pooled one was closed under it: not
    /// failures, but a sign of how the server treats connections.
    public var freshConnectionRetries: Int { result.tally.freshConnectionRetries }
    /// Open model: requests sent after their scheduled time because every connection was busy then (the plan's
    /// ``LoadPlan/connections`` capped the requests in flight), so the load generator, not the server, set the pace.
    /// Their latency counts from the schedule all the same. Always 0 in the closed model, which has no schedule.
    public var lateRequests: Int { result.tally.lateRequests }
    /// The most one of ``lateRequests`` was sent after its scheduled time; nil without late requests.
    public var maxLateness: Duration? {
        lateRequests > 0 ? .microseconds(Int64(clamping: result.tally.maxLatenessMicroseconds)) : nil
    }
    /// The plan's thresholds, evaluated on this run.
    public let thresholds: [LoadThresholdResult]
    /// Responses the plan's checks were evaluated on: every response, not transport failures.
    public var checkedResponses: Int { result.tally.checkedResponses }
    /// How many of ``checkedResponses`` passed each of the plan's checks, in the plan's order.
    public var checkPasses: [Int] {
        result.tally.checkPasses.isEmpty && !checks.isEmpty
            ? [Int](repeating: 0, count: checks.count) : result.tally.checkPasses
    }
    /// The plan's checks.
    public let checks: [LoadCheck]
    /// Whether ``LoadTest/stop()`` ended the run early: the counts cover what finished.
    public let stopped: Bool

    package init(_ result: BenchResult, plan: LoadPlan, stopped: Bool) {
        self.result = result
        let measurements = BenchSummary.measurements(of: result, openModel: plan.shape.isOpenModel)
        self.thresholds = plan.thresholds.map { $0.evaluate(measurements) }
        self.stopped = stopped
        self.checks = plan.checks
    }

    /// Whether every threshold passed (true without thresholds).
    public var passed: Bool { thresholds.allSatisfy(\.passed) }

    /// The latency below which `percentile` percent (0 < percentile ≤ 100) of the requests completed; nil when
    /// the run completed none.
    public func latency(percentile: Double) -> Duration? {
        let histogram = result.histogram
        guard histogram.totalCount > 0 else { return nil }
        return .microseconds(Int64(histogram.valueAtPercentile(percentile)))
    }

    /// The mean latency, to the microsecond; nil when the run completed no request.
    public var meanLatency: Duration? {
        let histogram = result.histogram
        return histogram.totalCount > 0 ? .microseconds(Int64(histogram.mean.rounded())) : nil
    }

    /// The shortest latency; nil when the run completed no request.
    public var minLatency: Duration? {
        let histogram = result.histogram
        return histogram.totalCount > 0 ? .microseconds(Int64(histogram.min)) : nil
    }

    /// The longest latency, as recorded (not rounded up to its histogram bucket, so it agrees with the percentiles
    /// and ``minLatency``); nil when the run completed no request.
    public var maxLatency: Duration? {
        let histogram = result.histogram
        return histogram.totalCount > 0 ? .microseconds(Int64(histogram.maxRecorded)) : nil
    }
}

/// One interval of a running load test: what completed in it, and in the run so far.
public struct LoadProgress: Sendable {
    package let interval: BenchInterval

    package init(_ interval: BenchInterval) {
        self.interval = interval
    }

    /// Time since the run started, at the interval's end.
    public var elapsed: Duration { .nanoseconds(Int64(interval.endSeconds * 1e9)) }
    /// Requests completed in this interval.
    public var requests: Int { interval.requests }
    /// Requests that failed in this interval.
    public var failed: Int { interval.failed }
    /// Open model: requests sent late in this interval because every connection was busy at their scheduled time
    /// (``LoadSummary/lateRequests``).
    public var lateRequests: Int { interval.lateRequests }
    /// Requests sent late since the run started.
    public var totalLateRequests: Int { interval.totalLateRequests }
    /// Requests completed since the run started.
    public var totalRequests: Int { interval.totalRequests }
    /// Requests failed since the run started.
    public var totalFailed: Int { interval.totalFailed }
    /// Completed requests per second in this interval.
    public var requestsPerSecond: Double { interval.requestsPerSecond }

    /// The latency below which `percentile` percent of this interval's requests completed; nil when none did.
    public func latency(percentile: Double) -> Duration? {
        interval.requests > 0 ? .microseconds(Int64(interval.latencyMicroseconds(percentile: percentile))) : nil
    }
}
