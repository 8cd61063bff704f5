import Histogram

/// What a run counted between two samples, for exporters that add it to their counters and histogram: the counts
/// of that time (``BenchTally/subtracting(_:)``), and the run's state at the sample.
package struct BenchMetricsIncrement: Sendable {
    /// The requests, failures, responses, bytes, latencies, checks and targets counted since the previous sample.
    package var counts: BenchTally
    /// Requests claimed and not yet counted, at the time of the sample (0 once the run has ended).
    package var inFlight: Int
    /// Whether the run was still going at the time of the sample.
    package var running: Bool

    /// Calls `record` once per request counted, with its latency in seconds: each HdrHistogram bucket's values at
    /// its highest equivalent value (3 significant digits, the run's own precision), for histogram types that take
    /// values one at a time.
    package func forEachLatencySeconds(_ record: (Double) -> Void) {
        guard counts.histogram.totalCount > 0 else { return }
        for bucket in counts.histogram.recordedValues() {
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
    private var previous: BenchTally

    /// A sampler of `load`'s runner, starting from zero counts.
    package init(_ load: LoadTest) {
        self.runner = load.runner
        self.previous = BenchTally(targetCount: load.runnerPlan.countedTargets)
    }

    /// What the run counted since the previous call (since the start, the first time).
    package mutating func next() -> BenchMetricsIncrement {
        // Whether the run had ended is read before its counts: then the counts are final.
        let finished = runner.hasFinished
        let current = runner.snapshot()
        defer { previous = current }
        return BenchMetricsIncrement(
            counts: current.subtracting(previous),
            inFlight: finished ? 0 : max(0, runner.claimedRequests - current.requests), running: !finished)
    }
}
