import Foundation
import Histogram
import Synchronization

/// What one interval of a run saw: the latencies recorded and the outcomes counted in it.
package struct BenchInterval: Sendable {
    /// Seconds from the run's start.
    package var startSeconds: Double
    package var endSeconds: Double
    /// Only this interval's latencies (microseconds).
    package var histogram: LatencyHistogram
    package var failed: Int
    /// Responses per status code in this interval.
    package var statusCounts: [Int: Int]
    /// Requests completed, and failed, since the run started.
    package var totalRequests: Int
    package var totalFailed: Int
    /// Open model: requests sent late for want of a free connection in this interval (counted as they were sent,
    /// not as they completed), and since the run started.
    package var lateRequests: Int
    package var totalLateRequests: Int

    package init(
        startSeconds: Double, endSeconds: Double, histogram: LatencyHistogram, failed: Int, statusCounts: [Int: Int],
        totalRequests: Int, totalFailed: Int, lateRequests: Int = 0, totalLateRequests: Int = 0
    ) {
        self.startSeconds = startSeconds
        self.endSeconds = endSeconds
        self.histogram = histogram
        self.failed = failed
        self.statusCounts = statusCounts
        self.totalRequests = totalRequests
        self.totalFailed = totalFailed
        self.lateRequests = lateRequests
        self.totalLateRequests = totalLateRequests
    }

    package var requests: Int { Int(histogram.totalCount) }

    package var requestsPerSecond: Double {
        endSeconds > startSeconds ? Double(requests) / (endSeconds - startSeconds) : 0
    }

    package func latencyMicroseconds(percentile: Double) -> Double {
        histogram.totalCount > 0 ? Double(histogram.valueAtPercentile(percentile)) : 0
    }
}

/// Turns snapshots of the run's cumulative counts into intervals, by difference.
///
/// The workers only ever add to one histogram per loop; intervals are cut here, off the hot path, from two
/// snapshots. So `--hdr-log`, `--report` and the progress line's percentiles add no work per request.
package struct BenchIntervalSampler {
    private var previous: BenchTally
    private var previousSeconds: Double

    package init(start: BenchTally, at seconds: Double = 0) {
        self.previous = start
        self.previousSeconds = seconds
    }

    package mutating func next(_ current: BenchTally, at seconds: Double) -> BenchInterval {
        let delta = current.subtracting(previous)
        var statusCounts: [Int: Int] = [:]
        for code in delta.statusCounts.indices where delta.statusCounts[code] != 0 {
            statusCounts[code] = delta.statusCounts[code]
        }
        let interval = BenchInterval(
            startSeconds: previousSeconds, endSeconds: seconds, histogram: delta.histogram, failed: delta.failed,
            statusCounts: statusCounts, totalRequests: current.requests, totalFailed: current.failed,
            lateRequests: delta.lateRequests, totalLateRequests: current.lateRequests)
        previous = current
        previousSeconds = seconds
        return interval
    }

    /// The values `current` holds beyond `previous`, where `current` is `previous` plus more recordings.
    package static func difference(_ current: LatencyHistogram, minus previous: LatencyHistogram) -> LatencyHistogram {
        var result = BenchTally.emptyHistogram()
        guard current.totalCount > previous.totalCount else { return result }
        let previousMax = previous.totalCount > 0 ? previous.max : 0
        for bucket in current.recordedValues() {
            let before =
                previous.totalCount > 0 && bucket.value <= previousMax ? previous.countForValue(bucket.value) : 0
            if bucket.count > before { _ = result.record(bucket.value, count: bucket.count - before) }
        }
        return result
    }
}

/// Cuts the run into intervals of `--interval` while it goes on, writing each to `--hdr-log` and keeping them for
/// the report. It runs beside the workers and only reads their tallies once per interval.
package final class BenchIntervalRecorder: Sendable {
    private struct State {
        var sampler: BenchIntervalSampler
        var intervals: [BenchInterval] = []
        var writer: HdrHistogramLogWriter?
        var failure: String?
    }

    private let runner: BenchRunner
    private let intervalSeconds: Double
    private let state: Mutex<State>

    package init(runner: BenchRunner, every interval: Duration, hdrLogPath: String?) throws(LoadTestError) {
        self.runner = runner
        self.intervalSeconds = interval.seconds
        var writer: HdrHistogramLogWriter?
        if let hdrLogPath {
            do {
                writer = try HdrHistogramLogWriter(path: hdrLogPath, startTime: Date())
            } catch {
                throw LoadTestError(error.description)
            }
        }
        self.state = Mutex(State(sampler: BenchIntervalSampler(start: runner.snapshot()), writer: writer))
    }

    /// The intervals so far, in order.
    package var intervals: [BenchInterval] { state.withLock { $0.intervals } }

    /// Samples at every interval boundary (counted from the run's start) until cancelled.
    package func record() async {
        var boundary = intervalSeconds
        while !Task.isCancelled {
            let wait = boundary - runner.elapsedSeconds
            if wait > 0 {
                do { try await Task.sleep(for: .seconds(wait)) } catch { return }
            }
            let elapsed = runner.elapsedSeconds
            guard elapsed >= boundary else { continue }
            add(runner.snapshot(), at: elapsed)
            // Woken late (a loaded machine), the interval just cut is longer, and the next boundary is the next one
            // still ahead: no run of near-empty intervals to catch up.
            boundary = ((elapsed / intervalSeconds).rounded(.down) + 1) * intervalSeconds
        }
    }

    /// Adds the last, partial interval from the run's final counts and closes the log; throws the first write
    /// error of the run.
    package func finish(result: BenchResult) throws(LoadTestError) {
        add(
            result.tally, at: max(result.elapsed.seconds, state.withLock { $0.intervals.last?.endSeconds ?? 0 }),
            isLast: true)
        let failure = state.withLock { state in
            state.writer?.close()
            return state.failure
        }
        if let failure { throw LoadTestError(failure) }
    }

    private func add(_ tally: BenchTally, at seconds: Double, isLast: Bool = false) {
        state.withLock { state in
            let interval = state.sampler.next(tally, at: seconds)
            // An empty sliver at the end (the run ended just after a boundary) is not an interval: it would plot as
            // a drop to 0 requests/s.
            if isLast && interval.requests == 0 && interval.endSeconds - interval.startSeconds < intervalSeconds
                && !state.intervals.isEmpty
            {
                return
            }
            state.intervals.append(interval)
            guard state.failure == nil, let writer = state.writer else { return }
            do {
                try writer.append(interval)
            } catch {
                state.failure = "\(error)"
            }
        }
    }
}
