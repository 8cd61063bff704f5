public import CurlewLoad
import CurlewSharding
import Histogram
public import Prometheus
import Synchronization

/// Publishes a running ``LoadTest``'s counts and latencies into a swift-prometheus registry, for `/metrics`.
///
/// The workers keep counting exactly as without an exporter: one tally and one HdrHistogram per event loop. The
/// exporter samples those tallies (``sample()``: on each scrape through ``emit(into:)``, or on a timer with
/// ``run(every:)`` when the registry is emitted by other means) and adds the difference since its last sample to the
/// registry's counters and histogram, so a run with an exporter does no work per request that a run without one does
/// not (docs/design/0026-bench-live-metrics.md).
///
/// Metrics (every series also carries the ``labels`` given, and `shard="I/N"` when the plan is a shard):
/// - `curlew_bench_requests_total{outcome="ok|failed"}`: requests completed; failed are transport failures and
///   responses with a status of 400 or more, as the summary counts them.
/// - `curlew_bench_failures_total{kind=…}`: failures by kind (`http5xx`, `couldntConnect`, `timedOut` …).
/// - `curlew_bench_responses_total{code=…}`: responses by status code.
/// - `curlew_bench_request_duration_seconds`: the latency histogram (from each request's intended send time in
///   the open model), bucketed from the run's HdrHistograms (3 significant digits).
/// - `curlew_bench_bytes_received_total`, `curlew_bench_bytes_sent_total`, `curlew_bench_connections_opened_total`.
/// - `curlew_bench_in_flight`: requests claimed and not yet counted (in the open model, including those waiting for
///   their scheduled time); `curlew_bench_running`: 1 until the run has ended, then 0.
/// - `curlew_bench_checks_total{check=…,result="pass|fail"}`: each `--check` on each checked response.
/// - `curlew_bench_target_requests_total{target="1"…,outcome=…}`: with several targets, requests per target
///   (numbered from 1 as the targets file lists them).
public final class LoadTestPrometheusExporter: Sendable {
    /// Latency bucket bounds in seconds when none are given: 100 µs to 10 s.
    public static let defaultLatencyBuckets: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    /// The registry the metrics live in; ``emit(into:)`` samples the run first, then writes it.
    public let registry: PrometheusCollectorRegistry
    /// The labels every series carries: those given, then `shard` for a shard of a run.
    public let labels: [(String, String)]

    private let runner: BenchRunner
    private let state: Mutex<State>

    private struct Metrics: Sendable {
        let ok: Counter
        let failed: Counter
        let bytesReceived: Counter
        let bytesSent: Counter
        let connectionsOpened: Counter
        let latency: ValueHistogram
        let inFlight: Gauge
        let running: Gauge
        /// Pass and fail counters per check, indexed like the plan's checks.
        let checks: [(pass: Counter, fail: Counter)]
        /// Ok and failed counters per target; empty with a single target.
        let targets: [(ok: Counter, failed: Counter)]
    }

    private struct State: Sendable {
        /// The counts published so far.
        var previous: BenchTally
        var failureKinds: [String: Counter] = [:]
        var statusCodes: [Int: Counter] = [:]

        /// The counter of `key` in `counters`, made in `registry` with `label` the first time (series whose labels
        /// only requests reveal: failures by kind, responses by status code).
        static func counter<Key: Hashable>(
            _ key: Key, in counters: inout [Key: Counter], registry: PrometheusCollectorRegistry,
            descriptor: @autoclosure () -> MetricNameDescriptor, labels: [(String, String)], label: (String, String)
        ) -> Counter {
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(descriptor: descriptor(), labels: labels + [label])
            counters[key] = counter
            return counter
        }
    }

    private let metrics: Metrics

    /// An exporter of `load`'s counts into `registry`.
    ///
    /// - Parameters:
    ///   - load: The load test to publish; create the exporter before ``LoadTest/run()`` starts or while it runs.
    ///   - registry: Where the metrics are registered (a registry of its own by default).
    ///   - labels: Labels every series carries, such as a run name; `shard` is added for a shard of a run.
    ///   - latencyBuckets: The upper bounds of the latency histogram's buckets, in seconds, ascending.
    public init(
        _ load: LoadTest, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        labels: [(String, String)] = [], latencyBuckets: [Double] = LoadTestPrometheusExporter.defaultLatencyBuckets
    ) {
        self.runner = load.runner
        self.registry = registry
        let plan = load.runnerPlan
        var labels = labels
        if !plan.shard.isWhole { labels.append(("shard", plan.shard.description)) }
        self.labels = labels

        let requests = Self.descriptor(
            "requests", unit: "total",
            "Requests completed, by outcome (failed: no response, or a status of 400 or more).")
        let checks = Self.descriptor("checks", unit: "total", "Check results on checked responses, by check.")
        let targets = Self.descriptor("target_requests", unit: "total", "Requests completed per target, by outcome.")
        self.metrics = Metrics(
            ok: registry.makeCounter(descriptor: requests, labels: labels + [("outcome", "ok")]),
            failed: registry.makeCounter(descriptor: requests, labels: labels + [("outcome", "failed")]),
            bytesReceived: registry.makeCounter(
                descriptor: Self.descriptor("bytes_received", unit: "total", "Bytes received, headers included."),
                labels: labels),
            bytesSent: registry.makeCounter(
                descriptor: Self.descriptor("bytes_sent", unit: "total", "Bytes sent, headers included."),
                labels: labels),
            connectionsOpened: registry.makeCounter(
                descriptor: Self.descriptor("connections_opened", unit: "total", "Connections opened."), labels: labels),
            latency: registry.makeValueHistogram(
                descriptor: Self.descriptor(
                    "request_duration", unit: "seconds",
                    "Request latency (from the intended send time in the open model)."),
                labels: labels, buckets: latencyBuckets),
            inFlight: registry.makeGauge(
                descriptor: Self.descriptor("in_flight", unit: "", "Requests claimed and not yet completed."),
                labels: labels),
            running: registry.makeGauge(
                descriptor: Self.descriptor("running", unit: "", "1 while the run goes on, 0 once it has ended."),
                labels: labels),
            checks: plan.checks.map { check in
                (
                    registry.makeCounter(
                        descriptor: checks, labels: labels + [("check", check.text), ("result", "pass")]),
                    registry.makeCounter(
                        descriptor: checks, labels: labels + [("check", check.text), ("result", "fail")])
                )
            },
            // Targets counted apart only: a template's rows made up front are one request, not targets.
            targets: plan.countedTargets > 1
                ? (1...plan.countedTargets).map { number in
                    (
                        registry.makeCounter(
                            descriptor: targets, labels: labels + [("target", "\(number)"), ("outcome", "ok")]),
                        registry.makeCounter(
                            descriptor: targets, labels: labels + [("target", "\(number)"), ("outcome", "failed")])
                    )
                } : [])
        metrics.running.set(to: 1)
        state = Mutex(State(previous: BenchTally(targetCount: plan.countedTargets)))
    }

    /// A series of the exporter's: `curlew_bench_` then its name and unit.
    private static func descriptor(_ name: String, unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "curlew", subsystem: "bench", metricName: name, unitName: unit, helpText: help)
    }

    /// Adds what the run counted since the last sample to the registry. Cheap next to the run: a copy of each
    /// loop's tally (taken under its lock, as the progress line does) and work in proportion to the distinct
    /// latencies recorded since.
    public func sample() {
        let runner = runner
        let metrics = metrics
        let labels = labels
        let registry = registry
        state.withLock { state in
            // Whether the run had ended is read before its counts: then the counts are final.
            let finished = runner.hasFinished
            let current = runner.snapshot()
            let previous = state.previous
            metrics.ok.increment(by: Int64(current.succeeded - previous.succeeded))
            metrics.failed.increment(by: Int64(current.failed - previous.failed))
            metrics.bytesReceived.increment(by: current.bytesReceived - previous.bytesReceived)
            metrics.bytesSent.increment(by: current.bytesSent - previous.bytesSent)
            metrics.connectionsOpened.increment(by: Int64(current.connectionsOpened - previous.connectionsOpened))
            for (kind, count) in current.failures where count != previous.failures[kind, default: 0] {
                State.counter(
                    kind, in: &state.failureKinds, registry: registry,
                    descriptor: Self.descriptor("failures", unit: "total", "Failed requests, by kind."), labels: labels,
                    label: ("kind", kind)
                ).increment(by: Int64(count - previous.failures[kind, default: 0]))
            }
            for code in current.statusCounts.indices where current.statusCounts[code] != previous.statusCounts[code] {
                State.counter(
                    code, in: &state.statusCodes, registry: registry,
                    descriptor: Self.descriptor("responses", unit: "total", "Responses, by status code."),
                    labels: labels, label: ("code", "\(code)")
                ).increment(by: Int64(current.statusCounts[code] - previous.statusCounts[code]))
            }
            if current.requests > previous.requests {
                // One record per request since the last sample: swift-prometheus histograms take values one at a
                // time. Each HdrHistogram bucket's values go in at its highest equivalent value.
                let added = BenchIntervalSampler.difference(current.histogram, minus: previous.histogram)
                for bucket in added.recordedValues() {
                    let seconds = Double(bucket.value) / 1e6
                    for _ in 0..<bucket.count { metrics.latency.record(seconds) }
                }
            }
            for index in metrics.checks.indices {
                let passes = current.checkPasses.indices.contains(index) ? current.checkPasses[index] : 0
                let passedBefore = previous.checkPasses.indices.contains(index) ? previous.checkPasses[index] : 0
                metrics.checks[index].pass.increment(by: Int64(passes - passedBefore))
                metrics.checks[index].fail.increment(
                    by: Int64(
                        (current.checkedResponses - passes) - (previous.checkedResponses - passedBefore)))
            }
            for index in metrics.targets.indices where index < current.targetRequests.count {
                let requests = current.targetRequests[index] - previous.targetRequests[index]
                let failures = current.targetFailures[index] - previous.targetFailures[index]
                metrics.targets[index].ok.increment(by: Int64(requests - failures))
                metrics.targets[index].failed.increment(by: Int64(failures))
            }
            metrics.inFlight.set(to: finished ? 0 : Double(max(0, runner.claimedRequests - current.requests)))
            metrics.running.set(to: finished ? 0 : 1)
            state.previous = current
        }
    }

    /// Samples every `interval` until the task is cancelled, then once more (so the registry ends with the counts
    /// at cancellation; after ``LoadTest/run()`` has returned, the run's final counts).
    public func run(every interval: Duration = .milliseconds(250)) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { break }
            sample()
        }
        sample()
    }

    /// Samples the run, then appends the registry's text exposition (format 0.0.4) to `buffer`.
    public func emit(into buffer: inout [UInt8]) {
        sample()
        registry.emit(into: &buffer)
    }
}
