// The whole product builds only with the package's `OTLP` trait (on by default): CI's second build, on the backports
// suite's libcurl, turns it off so that swift-otel and its dependencies are compiled once per run, not twice.
#if OTLP
public import CurlewLoad
import CoreMetrics
public import Foundation
public import Logging
import OTel
public import ServiceLifecycle
import Synchronization

/// Pushes a running ``LoadTest``'s counts and latencies to an OpenTelemetry collector as OTLP/HTTP metrics
/// (swift-otel), so a dashboard fed by a collector shows the test while it runs.
///
/// The same sampled tallies as `LoadTestPrometheusExporter`, the same series under OpenTelemetry's dotted names: the
/// workers count exactly as without an exporter, and the exporter adds what they counted since its last sample to
/// swift-otel's instruments, which swift-otel sends every export interval (docs/design/0029-bench-otlp.md).
///
/// It is a `Service`: run it in a `ServiceGroup` beside the load test and trigger the group's graceful shutdown once
/// ``LoadTest/run()`` has returned. The exporter then samples the final counts and sends them before ``run()``
/// returns (bounded by the export timeout). Cancelling it instead ends it without that last push.
///
/// Metrics (cumulative; every series also carries the ``attributes`` given, and `shard="I/N"` for a shard of a run):
/// - `curlew.bench.requests{outcome="ok|failed"}`: requests completed; failed are transport failures and responses
///   with a status of 400 or more, as the summary counts them.
/// - `curlew.bench.failures{kind=…}`, `curlew.bench.responses{code=…}`.
/// - `curlew.bench.request.duration`: the latency histogram in seconds (from each request's intended send time in
///   the open model), bucketed from the run's HdrHistograms.
/// - `curlew.bench.bytes_received`, `curlew.bench.bytes_sent`, `curlew.bench.connections_opened`.
/// - `curlew.bench.in_flight` and `curlew.bench.running` (gauges: 1 until the run has ended, then 0).
/// - `curlew.bench.checks{check=…,result="pass|fail"}`, `curlew.bench.target_requests{target=…,outcome=…}`.
///
/// The OpenTelemetry SDK's environment variables apply as swift-otel reads them: `OTEL_EXPORTER_OTLP_HEADERS`
/// (credentials stay out of the command line and out of logs), `OTEL_EXPORTER_OTLP_CERTIFICATE`,
/// `OTEL_EXPORTER_OTLP_COMPRESSION`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and the others.
public final class LoadTestOTLPExporter: Service, Sendable {
    /// Latency bucket bounds in seconds when none are given: 100 µs to 10 s, as the Prometheus exporter's.
    public static let defaultLatencyBuckets: [Double] = BenchMetricsSampler.defaultLatencyBuckets
    /// The path appended to an endpoint given without one: OTLP/HTTP's metrics path.
    public static let metricsPath = "/v1/metrics"

    /// Where the metrics are sent: the endpoint given, with ``metricsPath`` when it had no path.
    public let endpoint: URL
    /// The attributes every series carries: those given, then `shard` for a shard of a run.
    public let attributes: [(String, String)]

    private let backend: any Service
    /// The run's counts, and what of them is published so far.
    private let state: Mutex<(sampler: BenchMetricsSampler, publisher: BenchMetricsPublisher<Instruments>)>
    private let samplingInterval: Duration

    /// swift-metrics' metric types, made by swift-otel's factory (never the process-wide `MetricsSystem`), named
    /// `curlew.bench.…`; swift-otel reads `unit` and `description` from the dimensions.
    private struct Instruments: BenchMetricsBackend {
        let factory: any MetricsFactory

        private func dimensions(_ series: BenchSeries, _ labels: [(String, String)]) -> [(String, String)] {
            labels + [("description", series.help)]
        }

        func counter(_ series: BenchSeries, labels: [(String, String)]) -> Counter {
            Counter(label: LoadTestOTLPExporter.name(series), dimensions: dimensions(series, labels), factory: factory)
        }

        func gauge(_ series: BenchSeries, labels: [(String, String)]) -> Gauge {
            Gauge(label: LoadTestOTLPExporter.name(series), dimensions: dimensions(series, labels), factory: factory)
        }

        func histogram(_ series: BenchSeries, labels: [(String, String)]) -> Recorder {
            Recorder(
                label: LoadTestOTLPExporter.name(series), dimensions: dimensions(series, labels) + [("unit", "s")],
                aggregate: true, factory: factory)
        }

        func add(_ amount: Int64, to counter: Counter) { counter.increment(by: amount) }
        func set(_ value: Double, on gauge: Gauge) { gauge.record(value) }
        func record(seconds: Double, in histogram: Recorder) { histogram.record(seconds) }
    }

    /// `curlew.bench.` then the series' name; the latency as OpenTelemetry's conventions name durations.
    static func name(_ series: BenchSeries) -> String {
        "curlew.bench." + (series == .requestDuration ? "request.duration" : series.rawValue)
    }

    /// An exporter of `load`'s counts to the OTLP/HTTP collector at `endpoint`.
    ///
    /// - Parameters:
    ///   - load: The load test to publish; create the exporter before ``LoadTest/run()`` starts.
    ///   - endpoint: An `http` or `https` URL. Without a path (or with `/`), ``metricsPath`` is appended, as
    ///     OpenTelemetry does for `OTEL_EXPORTER_OTLP_ENDPOINT`; with one, it is used as it is.
    ///   - exportInterval: How often the metrics are sent while the run goes.
    ///   - exportTimeout: How long one send may take, the last one included.
    ///   - attributes: Attributes every series carries, such as a run name; `shard` is added for a shard of a run.
    ///   - serviceName: The resource's `service.name` (`OTEL_SERVICE_NAME` overrides it).
    ///   - latencyBuckets: The upper bounds of the latency histogram's buckets, in seconds, ascending.
    ///   - logger: Where swift-otel reports what goes wrong, such as a send the collector refused.
    /// - Throws: ``LoadTestOTLPError`` for an endpoint that is not an `http`/`https` URL, one that differs from an
    ///   `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` in the environment (which swift-otel
    ///   would send to instead), or an environment that swift-otel cannot export metrics with.
    public init(
        _ load: LoadTest, endpoint: String, exportInterval: Duration = .seconds(10),
        exportTimeout: Duration = .seconds(10), attributes: [(String, String)] = [],
        serviceName: String = "curlew-bench", latencyBuckets: [Double] = LoadTestOTLPExporter.defaultLatencyBuckets,
        logger: Logger = Logger(label: "curlew.otlp", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(LoadTestOTLPError) {
        let endpoint = try Self.metricsEndpoint(endpoint)
        try Self.checkEnvironment(agreesWith: endpoint, ProcessInfo.processInfo.environment)
        self.endpoint = endpoint
        let attributes = BenchMetricsSampler.labels(attributes, of: load)
        self.attributes = attributes

        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.traces.enabled = false
        configuration.logs.enabled = false
        configuration.metrics.exportInterval = exportInterval
        configuration.metrics.exportTimeout = exportTimeout
        configuration.metrics.otlpExporter.endpoint = endpoint.absoluteString
        configuration.metrics.otlpExporter.protocol = .httpProtobuf
        configuration.metrics.otlpExporter.timeout = exportTimeout
        configuration.metrics.valueHistogramBuckets = [Self.name(.requestDuration): latencyBuckets]
        let factory: any MetricsFactory
        do {
            let made = try OTel.makeMetricsBackend(configuration: configuration)
            factory = made.factory
            backend = made.service
        } catch {
            throw LoadTestOTLPError("the OpenTelemetry environment cannot export metrics: \(error)")
        }
        // Samples a few times per export, so each export carries counts at most a quarter interval old.
        samplingInterval = max(.milliseconds(50), min(.seconds(1), exportInterval / 4))
        let publisher = BenchMetricsPublisher(load, labels: attributes, backend: Instruments(factory: factory))
        state = Mutex((BenchMetricsSampler(load), publisher))
    }

    /// `text` as the URL to send metrics to, or why it cannot be one.
    package static func metricsEndpoint(_ text: String) throws(LoadTestOTLPError) -> URL {
        guard var components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            throw LoadTestOTLPError("\(text.debugDescription) is not an http:// or https:// URL with a host")
        }
        // Credentials go in OTEL_EXPORTER_OTLP_HEADERS, which is never printed; a URL is printed and logged, so
        // this error does not repeat it.
        if components.user != nil || components.password != nil {
            throw LoadTestOTLPError(
                "the URL of \(host) has credentials in it: give them in OTEL_EXPORTER_OTLP_HEADERS instead")
        }
        if components.path.isEmpty || components.path == "/" { components.path = metricsPath }
        guard let url = components.url else {
            throw LoadTestOTLPError("\(text.debugDescription) is not an http:// or https:// URL with a host")
        }
        return url
    }

    /// Throws when the environment names another endpoint: swift-otel applies the environment over the
    /// configuration, so the run would send its metrics somewhere other than where it says it does. The variables
    /// are read as OpenTelemetry reads them: the metrics endpoint as it is, the shared one as a base for `v1/metrics`.
    package static func checkEnvironment(
        agreesWith endpoint: URL, _ environment: [String: String]
    ) throws(LoadTestOTLPError) {
        let variables: [(name: String, target: (String) -> String)] = [
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", { $0 }),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", { $0.hasSuffix("/") ? $0 + "v1/metrics" : $0 + metricsPath }),
        ]
        for (name, target) in variables {
            guard let value = environment[name], !value.isEmpty else { continue }
            guard URL(string: target(value)) == endpoint else {
                throw LoadTestOTLPError(
                    "\(name) in the environment names another endpoint than \(endpoint.absoluteString): "
                        + "unset it, or give the same one")
            }
        }
    }

    /// Adds what the run counted since the last sample to the instruments that swift-otel exports.
    public func sample() {
        state.withLock { state in state.publisher.publish(state.sampler.next()) }
    }

    /// Samples the run and sends its metrics every export interval until graceful shutdown; then samples the
    /// final counts and sends them once more before returning.
    public func run() async throws {
        // swift-otel's own service sends once more at its graceful shutdown. It runs in a group of its own, shut down
        // only after the last sample so that last send carries the final counts, and in a detached task: a nested
        // group would inherit the caller's graceful shutdown and send before that sample.
        let backendGroup = ServiceGroup(
            services: [backend], logger: Logger(label: "curlew.otlp.group") { _ in SwiftLogNoOpLogHandler() })
        let backendRun = Task.detached { try await backendGroup.run() }
        try await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { sampling in
                sampling.addTask { [self] in
                    while true {
                        do { try await Task.sleep(for: samplingInterval) } catch { return }
                        sample()
                    }
                }
                // Returns at the caller's graceful shutdown; throws when the task is cancelled instead.
                try? await gracefulShutdown()
                sampling.cancelAll()
            }
            sample()
            await backendGroup.triggerGracefulShutdown()
            try await backendRun.value
        } onCancel: {
            backendRun.cancel()
        }
    }
}

/// Why a ``LoadTestOTLPExporter`` cannot be made.
public struct LoadTestOTLPError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, in a sentence that names the value at fault.
    public let description: String

    init(_ description: String) { self.description = description }
}
#endif
