import CurlewSharding

/// A series of a load test's live metrics: what it counts and the labels it may carry. Exporters name it in their
/// own format (`curlew_bench_requests_total` for Prometheus, `curlew.bench.requests` for OpenTelemetry).
package enum BenchSeries: String, CaseIterable, Sendable {
    case requests
    case failures
    case responses
    case requestDuration = "request_duration"
    case bytesReceived = "bytes_received"
    case bytesSent = "bytes_sent"
    case connectionsOpened = "connections_opened"
    case inFlight = "in_flight"
    case running
    case checks
    case targetRequests = "target_requests"
    case lateRequests = "late_requests"

    /// Latency bucket bounds in seconds when an exporter is given none: 100 µs to 10 s.
    package static let defaultLatencyBuckets: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    /// The labels every series of `load` carries: `labels`, then `shard="I/N"` when the run is a shard.
    package static func labels(_ labels: [(String, String)], of load: LoadTest) -> [(String, String)] {
        let shard = load.runnerPlan.shard
        return shard.isWhole ? labels : labels + [("shard", shard.description)]
    }

    /// The series' help text (Prometheus' HELP, OpenTelemetry's description).
    package var help: String {
        switch self {
        case .requests: "Requests completed, by outcome (failed: no response, or a status of 400 or more)."
        case .failures: "Failed requests, by kind."
        case .responses: "Responses, by status code."
        case .requestDuration: "Request latency (from the intended send time in the open model)."
        case .bytesReceived: "Bytes received, headers included."
        case .bytesSent: "Request body bytes sent (request heads not included)."
        case .connectionsOpened: "Connections opened."
        case .inFlight: "Requests claimed and not yet completed."
        case .running: "1 while the run goes on, 0 once it has ended."
        case .checks: "Check results on checked responses, by check."
        case .targetRequests: "Requests completed per target, by outcome."
        case .lateRequests:
            "Requests sent after their scheduled time because every connection was busy (open model; raise the connections)."
        }
    }
}

/// The metric types of one metrics library, and how it makes each series: what an exporter supplies to a
/// ``BenchMetricsPublisher``.
package protocol BenchMetricsBackend: Sendable {
    associatedtype Counter: Sendable
    associatedtype Gauge: Sendable
    associatedtype Histogram: Sendable

    /// The counter of `series` with `labels` (the exporter's own, then the series' own, such as `outcome`).
    func counter(_ series: BenchSeries, labels: [(String, String)]) -> Counter
    /// The gauge of `series` with `labels`.
    func gauge(_ series: BenchSeries, labels: [(String, String)]) -> Gauge
    /// The latency histogram, in seconds.
    func histogram(_ series: BenchSeries, labels: [(String, String)]) -> Histogram

    /// Adds `amount` (0 or more) to `counter`.
    func add(_ amount: Int64, to counter: Counter)
    /// Sets `gauge` to `value`.
    func set(_ value: Double, on gauge: Gauge)
    /// Records one request's latency.
    func record(seconds: Double, in histogram: Histogram)
}

/// A load test's live metrics in one metrics library: which series exist, with which labels, and what each
/// ``BenchMetricsIncrement`` adds to them. One set of series for every exporter; an exporter supplies only its
/// library's types through a ``BenchMetricsBackend`` (docs/design/0026-bench-live-metrics.md, 0029).
package struct BenchMetricsPublisher<Backend: BenchMetricsBackend>: Sendable {
    private let backend: Backend
    private let labels: [(String, String)]
    private let ok: Backend.Counter
    private let failed: Backend.Counter
    private let bytesReceived: Backend.Counter
    private let bytesSent: Backend.Counter
    private let connectionsOpened: Backend.Counter
    private let latency: Backend.Histogram
    private let inFlight: Backend.Gauge
    private let running: Backend.Gauge
    /// Pass and fail counters per check, indexed like the plan's checks.
    private let checks: [(pass: Backend.Counter, fail: Backend.Counter)]
    /// Ok and failed counters per target; empty with a single target.
    private let targets: [(ok: Backend.Counter, failed: Backend.Counter)]
    /// Open model only: a run without a schedule sends nothing late.
    private let lateRequests: Backend.Counter?
    /// Series whose labels only requests reveal: made the first time they count something.
    private var failureKinds: [String: Backend.Counter] = [:]
    private var statusCodes: [Int: Backend.Counter] = [:]

    /// The series of `load`, each carrying `labels` (with `shard` added for a shard of a run, as
    /// ``BenchSeries/labels(_:of:)`` gives them).
    package init(_ load: LoadTest, labels: [(String, String)], backend: Backend) {
        self.backend = backend
        self.labels = labels
        let plan = load.runnerPlan
        func counter(_ series: BenchSeries, _ extra: [(String, String)] = []) -> Backend.Counter {
            backend.counter(series, labels: labels + extra)
        }
        ok = counter(.requests, [("outcome", "ok")])
        failed = counter(.requests, [("outcome", "failed")])
        bytesReceived = counter(.bytesReceived)
        bytesSent = counter(.bytesSent)
        connectionsOpened = counter(.connectionsOpened)
        latency = backend.histogram(.requestDuration, labels: labels)
        inFlight = backend.gauge(.inFlight, labels: labels)
        running = backend.gauge(.running, labels: labels)
        checks = plan.checks.map { check in
            (
                counter(.checks, [("check", check.text), ("result", "pass")]),
                counter(.checks, [("check", check.text), ("result", "fail")])
            )
        }
        // Targets counted apart only: a template's rows made up front are one request, not targets.
        targets =
            plan.countedTargets > 1
            ? (1...plan.countedTargets).map { number in
                (
                    counter(.targetRequests, [("target", "\(number)"), ("outcome", "ok")]),
                    counter(.targetRequests, [("target", "\(number)"), ("outcome", "failed")])
                )
            } : []
        lateRequests = plan.latencyFromIntendedTime ? counter(.lateRequests) : nil
        backend.set(1, on: running)
    }

    /// Adds `increment` to the series.
    package mutating func publish(_ increment: BenchMetricsIncrement) {
        let counts = increment.counts
        backend.add(Int64(counts.succeeded), to: ok)
        backend.add(Int64(counts.failed), to: failed)
        backend.add(counts.bytesReceived, to: bytesReceived)
        backend.add(counts.bytesSent, to: bytesSent)
        backend.add(Int64(counts.connectionsOpened), to: connectionsOpened)
        for (kind, count) in counts.failures.sorted(by: { $0.key < $1.key }) where count > 0 {
            let counter = failureKinds[kind] ?? backend.counter(.failures, labels: labels + [("kind", kind)])
            failureKinds[kind] = counter
            backend.add(Int64(count), to: counter)
        }
        for code in counts.statusCounts.indices where counts.statusCounts[code] > 0 {
            let counter = statusCodes[code] ?? backend.counter(.responses, labels: labels + [("code", "\(code)")])
            statusCodes[code] = counter
            backend.add(Int64(counts.statusCounts[code]), to: counter)
        }
        let backend = backend
        let latency = latency
        increment.forEachLatencySeconds { backend.record(seconds: $0, in: latency) }
        for (index, counters) in checks.enumerated() {
            let passes = counts.checkPasses.indices.contains(index) ? counts.checkPasses[index] : 0
            backend.add(Int64(passes), to: counters.pass)
            backend.add(Int64(counts.checkedResponses - passes), to: counters.fail)
        }
        for (index, counters) in targets.enumerated() where index < counts.targetRequests.count {
            backend.add(Int64(counts.targetRequests[index] - counts.targetFailures[index]), to: counters.ok)
            backend.add(Int64(counts.targetFailures[index]), to: counters.failed)
        }
        if let lateRequests { backend.add(Int64(counts.lateRequests), to: lateRequests) }
        backend.set(Double(increment.inFlight), on: inFlight)
        backend.set(increment.running ? 1 : 0, on: running)
    }
}
