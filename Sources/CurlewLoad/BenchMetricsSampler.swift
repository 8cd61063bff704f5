import Histogram

/// What a run counted between two samples: the amounts an exporter adds to its counters and histogram.
///
/// One policy for every live-metrics exporter (Prometheus, OTLP): what "failed" means, which series a response
/// lands in, how the in-flight count is read. Each exporter only maps these numbers onto its own metric types
/// (docs/design/0026-bench-live-metrics.md).
package struct BenchMetricsIncrement: Sendable {
    /// Requests that got a response below 400.
    package var succeeded = 0
    /// Transport failures and responses of 400 or more, as the summary counts them.
    package var failed = 0
    package var bytesReceived: Int64 = 0
    package var bytesSent: Int64 = 0
    package var connectionsOpened = 0
    /// Failures by kind (`http5xx`, `couldntConnect` …), only the kinds that grew.
    package var failuresByKind: [(kind: String, count: Int)] = []
    /// Responses by status code, only the codes that grew.
    package var responsesByCode: [(code: Int, count: Int)] = []
    /// The latencies recorded since the previous sample, in microseconds.
    package var latencies: LatencyHistogram = BenchTally.emptyHistogram()
    /// Passes and failures of each check, indexed like the plan's checks.
    package var checks: [(pass: Int, fail: Int)] = []
    /// Successes and failures per target, indexed like the plan's targets; empty with a single target.
    package var targets: [(ok: Int, failed: Int)] = []
    /// Requests claimed and not yet counted, at the time of the sample (0 once the run has ended).
    package var inFlight = 0
    /// Whether the run was still going at the time of the sample.
    package var running = true

    /// Calls `record` once per request of ``latencies``, with its latency in seconds: each HdrHistogram bucket's
    /// values at its highest equivalent value (3 significant digits, the run's own precision), for histogram types
    /// that take values one at a time.
    package func forEachLatencySeconds(_ record: (Double) -> Void) {
        guard latencies.totalCount > 0 else { return }
        for bucket in latencies.recordedValues() {
            let seconds = Double(bucket.value) / 1e6
            for _ in 0..<bucket.count { record(seconds) }
        }
    }
}

/// Samples a running ``BenchRunner``'s tallies and returns what they gained since the previous sample.
///
/// The copy is the one the progress line takes (each loop's tally under its uncontended lock), so an exporter adds no
/// work to the requests' path; the cost of a sample is a copy per loop and work in proportion to the distinct
/// latencies recorded since the previous one.
package struct BenchMetricsSampler: Sendable {
    private let runner: BenchRunner
    private let checkCount: Int
    private var previous: BenchTally

    /// A sampler of `load`'s runner, starting from zero counts.
    package init(_ load: LoadTest) {
        self.runner = load.runner
        self.checkCount = load.runnerPlan.checks.count
        self.previous = BenchTally(targetCount: load.runnerPlan.countedTargets)
    }

    /// What the run counted since the previous call (since the start, the first time).
    package mutating func next() -> BenchMetricsIncrement {
        // Whether the run had ended is read before its counts: then the counts are final.
        let finished = runner.hasFinished
        let current = runner.snapshot()
        let previous = previous
        var increment = BenchMetricsIncrement()
        increment.succeeded = current.succeeded - previous.succeeded
        increment.failed = current.failed - previous.failed
        increment.bytesReceived = current.bytesReceived - previous.bytesReceived
        increment.bytesSent = current.bytesSent - previous.bytesSent
        increment.connectionsOpened = current.connectionsOpened - previous.connectionsOpened
        increment.failuresByKind = current.failures.sorted { $0.key < $1.key }.compactMap { kind, count in
            let added = count - previous.failures[kind, default: 0]
            return added > 0 ? (kind, added) : nil
        }
        increment.responsesByCode = current.statusCounts.indices.compactMap { code in
            let added = current.statusCounts[code] - previous.statusCounts[code]
            return added > 0 ? (code, added) : nil
        }
        if current.requests > previous.requests {
            increment.latencies = BenchIntervalSampler.difference(current.histogram, minus: previous.histogram)
        }
        increment.checks = (0..<checkCount).map { index in
            let passes = current.checkPasses.indices.contains(index) ? current.checkPasses[index] : 0
            let passedBefore = previous.checkPasses.indices.contains(index) ? previous.checkPasses[index] : 0
            let checked = current.checkedResponses - previous.checkedResponses
            return (passes - passedBefore, checked - (passes - passedBefore))
        }
        increment.targets = current.targetRequests.indices.map { index in
            let requests = current.targetRequests[index] - previous.targetRequests[index]
            let failures = current.targetFailures[index] - previous.targetFailures[index]
            return (requests - failures, failures)
        }
        increment.inFlight = finished ? 0 : max(0, runner.claimedRequests - current.requests)
        increment.running = !finished
        self.previous = current
        return increment
    }
}
