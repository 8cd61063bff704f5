public import CurlewLoad
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
/// - `curlew_bench_late_requests_total`: in the open model only, requests sent after their scheduled time because
///   every connection was busy (the plan's connections, not the server, set the pace).
public final class LoadTestPrometheusExporter: Sendable {
    /// Latency bucket bounds in seconds when none are given: 100 µs to 10 s.
    public static let defaultLatencyBuckets: [Double] = BenchSeries.defaultLatencyBuckets

    /// The registry the metrics live in; ``emit(into:)`` samples the run first, then writes it.
    public let registry: PrometheusCollectorRegistry
    /// The labels every series carries: those given, then `shard` for a shard of a run.
    public let labels: [(String, String)]

    /// The run's counts, and what of them is published so far.
    private let state: Mutex<(sampler: BenchMetricsSampler, publisher: BenchMetricsPublisher<Backend>)>

    /// swift-prometheus' metric types, in `registry`, named `curlew_bench_…`.
    private struct Backend: BenchMetricsBackend {
        let registry: PrometheusCollectorRegistry
        let latencyBuckets: [Double]

        /// `curlew_bench_` then the series' name and unit.
        private func descriptor(_ series: BenchSeries, unit: String) -> MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "curlew", subsystem: "bench", metricName: series.rawValue, unitName: unit,
                helpText: series.help)
        }

        func counter(_ series: BenchSeries, labels: [(String, String)]) -> Counter {
            registry.makeCounter(descriptor: descriptor(series, unit: "total"), labels: labels)
        }

        func gauge(_ series: BenchSeries, labels: [(String, String)]) -> Gauge {
            registry.makeGauge(descriptor: descriptor(series, unit: ""), labels: labels)
        }

        func histogram(_ series: BenchSeries, labels: [(String, String)]) -> ValueHistogram {
            registry.makeValueHistogram(
                descriptor: descriptor(series, unit: "seconds"), labels: labels, buckets: latencyBuckets)
        }

        func add(_ amount: Int64, to counter: Counter) { counter.increment(by: amount) }
        func set(_ value: Double, on gauge: Gauge) { gauge.set(to: value) }
        // swift-prometheus histograms take values one at a time: one record per request since the last sample.
        func record(seconds: Double, in histogram: ValueHistogram) { histogram.record(seconds) }
    }

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
        self.registry = registry
        let labels = BenchSeries.labels(labels, of: load)
        self.labels = labels
        let publisher = BenchMetricsPublisher(
            load, labels: labels, backend: Backend(registry: registry, latencyBuckets: latencyBuckets))
        state = Mutex((BenchMetricsSampler(load), publisher))
    }

    /// Adds what the run counted since the last sample to the registry. Cheap next to the run: a copy of each
    /// loop's tally (taken under its lock, as the progress line does) and work in proportion to the requests
    /// counted since.
    public func sample() {
        state.withLock { state in state.publisher.publish(state.sampler.next()) }
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
