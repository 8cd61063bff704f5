// The whole product builds only with the package's `OTLP` trait (on by default): CI's second build, on the backports
// suite's libcurl, turns it off so that swift-otel and its dependencies are compiled once per run, not twice.
#if OTLP
import CurlewEngine
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
/// returns (within the export timeout, or twice it when a send was under way). Cancelling it instead ends it
/// without that last push.
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
/// - `curlew.bench.late_requests`: in the open model only, requests sent after their scheduled time because every
///   connection was busy.
///
/// The OpenTelemetry SDK's environment variables apply as swift-otel reads them: `OTEL_EXPORTER_OTLP_HEADERS`
/// (credentials stay out of the command line and out of logs), `OTEL_EXPORTER_OTLP_CERTIFICATE`,
/// `OTEL_EXPORTER_OTLP_COMPRESSION`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and the others.
public final class LoadTestOTLPExporter: Service, Sendable {
    /// Latency bucket bounds in seconds when none are given: 100 µs to 10 s, as the Prometheus exporter's.
    public static let defaultLatencyBuckets: [Double] = BenchSeries.defaultLatencyBuckets
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
    private let exportTimeout: Duration
    /// Where swift-otel's diagnostics go (the logger given, with the OpenTelemetry variables' values redacted), and
    /// the exporter's own word when swift-otel overran its timeouts at shutdown.
    private let diagnostics: Logger

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
    ///     `unit` and `description` are refused: swift-otel reads those as the metric's own.
    ///   - serviceName: The resource's `service.name` (`OTEL_SERVICE_NAME` overrides it).
    ///   - latencyBuckets: The upper bounds of the latency histogram's buckets, in seconds, ascending.
    ///   - logger: Where swift-otel reports what goes wrong, such as a send the collector refused.
    /// - Throws: ``LoadTestOTLPError`` for an endpoint that is not an `http`/`https` URL or has credentials in it,
    ///   and for OpenTelemetry variables in the environment that swift-otel would follow instead of these settings:
    ///   another endpoint, protocol, exporter, interval, timeout or temporality, or the SDK turned off.
    public init(
        _ load: LoadTest, endpoint: String, exportInterval: Duration = .seconds(10),
        exportTimeout: Duration = .seconds(10), attributes: [(String, String)] = [],
        serviceName: String = "curlew-bench", latencyBuckets: [Double] = LoadTestOTLPExporter.defaultLatencyBuckets,
        logger: Logger = Logger(label: "curlew.otlp", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(LoadTestOTLPError) {
        let endpoint = try Self.metricsEndpoint(endpoint)
        try Self.checkEnvironment(
            agreesWith: endpoint, interval: exportInterval, timeout: exportTimeout, ProcessInfo.processInfo.environment)
        if let taken = attributes.first(where: { ["unit", "description"].contains($0.0) }) {
            throw LoadTestOTLPError(
                "an attribute named \(taken.0.debugDescription) would be read by swift-otel as the metrics' own: rename it"
            )
        }
        self.endpoint = endpoint
        let attributes = BenchSeries.labels(attributes, of: load)
        self.attributes = attributes

        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        // swift-otel logs each OpenTelemetry variable it applies with its value, OTEL_EXPORTER_OTLP_HEADERS (where
        // credentials live) included: those values never reach the logger given.
        var diagnostics = logger
        diagnostics.handler = EnvironmentValueRedactingLogHandler(
            wrapping: logger.handler, environment: ProcessInfo.processInfo.environment)
        configuration.diagnosticLogger = .custom(diagnostics)
        self.diagnostics = diagnostics
        configuration.diagnosticLogLevel = .warning
        configuration.traces.enabled = false
        configuration.logs.enabled = false
        configuration.metrics.exportInterval = exportInterval
        configuration.metrics.exportTimeout = exportTimeout
        configuration.metrics.otlpExporter.endpoint = endpoint.absoluteString
        configuration.metrics.otlpExporter.protocol = .httpProtobuf
        configuration.metrics.otlpExporter.timeout = exportTimeout
        configuration.metrics.valueHistogramBuckets = [Self.name(.requestDuration): latencyBuckets]
        configuration.metrics.histogramTypes = [Self.name(.requestDuration): .explicitBucket]
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
        self.exportTimeout = exportTimeout
        let publisher = BenchMetricsPublisher(load, labels: attributes, backend: Instruments(factory: factory))
        state = Mutex((BenchMetricsSampler(load), publisher))
    }

    /// `text` as the URL to send metrics to, or why it cannot be one.
    package static func metricsEndpoint(_ text: String) throws(LoadTestOTLPError) -> URL {
        guard var components = URLComponents(string: text) else {
            throw LoadTestOTLPError("the endpoint is not an http:// or https:// URL with a host")
        }
        // Credentials go in OTEL_EXPORTER_OTLP_HEADERS, which is never printed; a URL is printed and logged, so no
        // error repeats one that has them.
        if components.user != nil || components.password != nil {
            throw LoadTestOTLPError(
                "the endpoint has credentials in it: give them in OTEL_EXPORTER_OTLP_HEADERS instead")
        }
        guard let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else {
            // Not repeated: text that does not parse as intended may still hold credentials (`user:pw@host:4318`).
            throw LoadTestOTLPError("the endpoint is not an http:// or https:// URL with a host")
        }
        // swift-otel tells TLS from the scheme as written: `HTTPS://` would lose its certificate settings.
        components.scheme = scheme
        if components.path.isEmpty || components.path == "/" { components.path = metricsPath }
        guard let url = components.url else {
            throw LoadTestOTLPError("the endpoint is not an http:// or https:// URL with a host")
        }
        return url
    }

    /// Throws when an OpenTelemetry variable in `environment` would make swift-otel do other than the exporter was
    /// told: swift-otel applies the environment over its configuration, so the run would send its metrics elsewhere,
    /// otherwise or not at all while saying it does. (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc` would even stop the
    /// process: this build has no gRPC exporter.) Variables are read as swift-otel reads them: the metrics-specific
    /// one before the shared one, an empty value as a value.
    package static func checkEnvironment(
        agreesWith endpoint: URL, interval: Duration, timeout: Duration, _ environment: [String: String]
    ) throws(LoadTestOTLPError) {
        // A duration variable that swift-otel would apply (whole milliseconds; anything else it ignores) and that
        // differs from `duration`.
        func differs(_ value: String, from duration: Duration) -> Bool {
            guard let milliseconds = Int(value), milliseconds >= 0 else { return false }
            return Duration.milliseconds(milliseconds) != duration
        }
        let otlp = "OTEL_EXPORTER_OTLP_"
        // An endpoint's URL may carry a key: the message names it redacted.
        let shownEndpoint = URLRedaction.messages.displaying(endpoint.absoluteString)
        // swift-otel matches names case-sensitively and ignores values it does not know (logging a warning); only
        // values it would apply are refused.
        let rules: [(names: [String], refuses: (String) -> Bool, problem: String)] = [
            (
                [otlp + "METRICS_ENDPOINT"], { URL(string: $0) != endpoint },
                "names another endpoint than \(shownEndpoint)"
            ),
            (
                [otlp + "ENDPOINT"],
                { URL(string: $0.hasSuffix("/") ? $0 + "v1/metrics" : $0 + metricsPath) != endpoint },
                "names another endpoint than \(shownEndpoint)"
            ),
            (
                [otlp + "METRICS_PROTOCOL", otlp + "PROTOCOL"], { $0 == "grpc" },
                "asks for OTLP/gRPC, which this build does not have (it sends OTLP/HTTP)"
            ),
            (
                ["OTEL_METRICS_EXPORTER"], { ["prometheus", "console", "none"].contains($0) },
                "asks for another metrics exporter than OTLP"
            ),
            (["OTEL_SDK_DISABLED"], { $0.lowercased() == "true" }, "turns OpenTelemetry off"),
            (
                ["OTEL_METRIC_EXPORT_INTERVAL"], { differs($0, from: interval) },
                "sets another export interval than the exporter's \(interval)"
            ),
            // Two timeouts: the export's as a whole, and each HTTP request's.
            (
                ["OTEL_METRIC_EXPORT_TIMEOUT"], { differs($0, from: timeout) },
                "sets another export timeout than the exporter's \(timeout)"
            ),
            (
                [otlp + "METRICS_TIMEOUT", otlp + "TIMEOUT"], { differs($0, from: timeout) },
                "sets another request timeout than the exporter's \(timeout)"
            ),
            ([otlp + "METRICS_TEMPORALITY_PREFERENCE"], { $0 == "delta" }, "asks for other sums than cumulative ones"),
        ]
        for rule in rules {
            // The first variable of a rule that is set is the one swift-otel takes; values are not repeated here,
            // since an endpoint may hold credentials.
            guard let name = rule.names.first(where: { environment[$0] != nil }), let value = environment[name] else {
                continue
            }
            // The shared endpoint counts only when the metrics one is not set.
            if name == otlp + "ENDPOINT" && environment[otlp + "METRICS_ENDPOINT"] != nil { continue }
            if rule.refuses(value) {
                throw LoadTestOTLPError("\(name) in the environment \(rule.problem): unset it")
            }
        }
    }

    /// Adds what the run counted since the last sample to the instruments that swift-otel exports.
    public func sample() {
        state.withLock { state in state.publisher.publish(state.sampler.next()) }
    }

    /// Samples the run and sends its metrics every export interval until graceful shutdown; then samples the
    /// final counts and sends them once more before returning: within the export timeout, or twice it when a send
    /// was under way at shutdown. A last send that overruns that is cancelled and logged as a warning, and `run`
    /// returns: a slow collector fails no run. It throws only when its own task is cancelled.
    public func run() async throws {
        // swift-otel's own service sends once more at its graceful shutdown. It runs in a group of its own, shut down
        // only after the last sample so that last send carries the final counts, and in a detached task: a nested
        // group would inherit the caller's graceful shutdown and send before that sample.
        var group = ServiceGroupConfiguration(
            services: [.init(service: backend)],
            logger: Logger(label: "curlew.otlp.group") { _ in SwiftLogNoOpLogHandler() })
        // Should swift-otel not keep to its timeouts (a send in progress at shutdown, then the last one), its service
        // is cancelled. No limit on the cancellation: swift-service-lifecycle traps past one, and AsyncHTTPClient's
        // shutdown, which swift-otel awaits, waits out a connection still opening whatever the cancellation.
        group.maximumGracefulShutdownDuration = exportTimeout * 2 + .seconds(1)
        let backendGroup = ServiceGroup(configuration: group)
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
            do {
                try await backendRun.value
            } catch  where !Task.isCancelled {
                // swift-otel overran its timeouts (a slow or refusing collector on a loaded machine) and its group
                // cancelled it: the last send is lost, and the run it reports on goes on as it would without it.
                diagnostics.warning(
                    "the last OTLP export did not end within \(exportTimeout * 2 + .seconds(1)) and was cancelled",
                    metadata: ["error": "\(error)"])
            }
        } onCancel: {
            backendRun.cancel()
        }
    }
}

/// Hands swift-otel's diagnostics to the handler it wraps, without the values of the OpenTelemetry variables it
/// applies (`environment_value`, `previous_value`, `new_value`: OTEL_EXPORTER_OTLP_HEADERS is one), and with the
/// header values themselves replaced wherever else they turn up: an error can quote one (AsyncHTTPClient's
/// `invalidHeaderFieldValues` does).
package struct EnvironmentValueRedactingLogHandler: LogHandler {
    static let redactedKeys: Set<String> = ["environment_value", "previous_value", "new_value"]
    private var wrapped: any LogHandler
    /// The values of the OTLP header variables, as written and percent-decoded.
    private let secrets: [String]

    /// A handler that passes on to `handler`, with the header values of `environment`'s
    /// `OTEL_EXPORTER_OTLP_[SIGNAL_]HEADERS` variables redacted.
    package init(wrapping handler: any LogHandler, environment: [String: String]) {
        wrapped = handler
        var secrets: Set<String> = []
        for (name, value) in environment where name.hasPrefix("OTEL_EXPORTER_OTLP_") && name.hasSuffix("HEADERS") {
            for header in value.split(separator: ",") {
                let pair = header.split(separator: "=", maxSplits: 1)
                guard pair.count == 2 else { continue }
                let secret = pair[1].trimmingCharacters(in: .whitespaces)
                secrets.formUnion([secret, secret.removingPercentEncoding ?? secret].filter { !$0.isEmpty })
            }
        }
        self.secrets = secrets.sorted { $0.count > $1.count }
    }

    /// `text` with every header value in it replaced.
    private func redacted(_ text: String) -> String {
        secrets.reduce(text) { $0.replacingOccurrences(of: $1, with: "<redacted>") }
    }

    private func redacted(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        let text = value.description
        return secrets.contains(where: text.contains) ? .string(redacted(text)) : value
    }

    private func redacted(_ metadata: Logger.Metadata) -> Logger.Metadata {
        metadata.filter { !Self.redactedKeys.contains($0.key) }.mapValues(redacted)
    }

    package var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue }
    }

    package var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = redacted(newValue) }
    }

    package var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = Self.redactedKeys.contains(key) ? nil : newValue.map(redacted) }
    }

    package func log(event: LogEvent) {
        var event = event
        event.metadata = event.metadata.map(redacted)
        if !secrets.isEmpty {
            let message = event.message.description
            if secrets.contains(where: message.contains) { event.message = "\(redacted(message))" }
            if let error = event.error {
                let description = String(describing: error)
                if secrets.contains(where: description.contains) {
                    event.error = RedactedError(description: redacted(description))
                }
            }
        }
        wrapped.log(event: event)
    }

    /// An error whose description had a header value in it, with that value replaced.
    struct RedactedError: Error, CustomStringConvertible {
        let description: String
    }
}

/// Why a ``LoadTestOTLPExporter`` cannot be made.
public struct LoadTestOTLPError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, in a sentence that names the value at fault.
    public let description: String

    init(_ description: String) { self.description = description }
}
#endif
