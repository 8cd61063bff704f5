public import CoreMetrics
public import CurlewEngine
import Synchronization

/// Publishes a client's ``PoolStatistics`` as swift-metrics gauges and counters, per origin, so whichever metrics
/// backend the process bootstrapped (Prometheus, OpenTelemetry, StatsD …) shows the connection pool.
///
/// The engine always keeps the counts; this reporter reads a snapshot (``report()``) and writes it out, every
/// interval while ``run(every:)`` runs. A process without a metrics backend simply does not run one, and pays
/// nothing.
///
/// Gauges, dimensions `client` and `origin` (`scheme://host:port`):
/// `curlew_pool_connections_open`, `curlew_pool_connections_idle`, `curlew_pool_connections_busy`,
/// `curlew_pool_transfers_in_flight`, `curlew_pool_transfers_waiting_for_connection`.
/// Counters: `curlew_pool_connections_opened_total`, `curlew_pool_connections_closed_total`,
/// `curlew_pool_retries_on_fresh_connection_total`.
///
/// ```swift
/// let reporter = PoolMetricsReporter(client: client, clientName: "payments")
/// let reporting = Task { try await reporter.run(every: .seconds(5)) }
/// ```
public final class PoolMetricsReporter: Sendable {
    /// The metrics of one origin, made when the origin first appears.
    private struct OriginMetrics {
        let connectionsOpen: Gauge
        let connectionsIdle: Gauge
        let connectionsBusy: Gauge
        let transfersInFlight: Gauge
        let transfersWaiting: Gauge
        let connectionsOpened: Counter
        let connectionsClosed: Counter
        let retries: Counter
        /// The running totals already added to the counters.
        var reported = PoolStatistics.Counts()

        init(dimensions: [(String, String)], factory: any MetricsFactory) {
            func gauge(_ name: String) -> Gauge {
                Gauge(label: "curlew_pool_" + name, dimensions: dimensions, factory: factory)
            }
            func counter(_ name: String) -> Counter {
                Counter(label: "curlew_pool_" + name, dimensions: dimensions, factory: factory)
            }
            connectionsOpen = gauge("connections_open")
            connectionsIdle = gauge("connections_idle")
            connectionsBusy = gauge("connections_busy")
            transfersInFlight = gauge("transfers_in_flight")
            transfersWaiting = gauge("transfers_waiting_for_connection")
            connectionsOpened = counter("connections_opened_total")
            connectionsClosed = counter("connections_closed_total")
            retries = counter("retries_on_fresh_connection_total")
        }

        /// Sets the gauges to `counts` and adds to the counters what is new since the last report.
        mutating func record(_ counts: PoolStatistics.Counts) {
            connectionsOpen.record(counts.connectionsOpen)
            connectionsIdle.record(counts.connectionsIdle)
            connectionsBusy.record(counts.connectionsBusy)
            transfersInFlight.record(counts.transfersInFlight)
            transfersWaiting.record(counts.transfersWaitingForConnection)
            connectionsOpened.increment(by: max(0, counts.connectionsOpened - reported.connectionsOpened))
            connectionsClosed.increment(by: max(0, counts.connectionsClosed - reported.connectionsClosed))
            retries.increment(by: max(0, counts.retriesOnFreshConnection - reported.retriesOnFreshConnection))
            reported = counts
        }
    }

    private let client: CurlewClient
    private let clientName: String
    private let factory: any MetricsFactory
    private let origins = Mutex<[String: OriginMetrics]>([:])

    /// A reporter for `client`, its metrics made by `factory` (the bootstrapped system's unless given) with the
    /// dimension `client` set to `clientName`.
    public init(
        client: CurlewClient, clientName: String = "default", factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.client = client
        self.clientName = clientName
        self.factory = factory
    }

    /// Takes one snapshot and writes it to the metrics. An origin seen before and absent now reads 0 on its gauges.
    public func report() async {
        let statistics = await client.poolStatistics()
        origins.withLock { origins in
            for origin in Set(origins.keys).union(statistics.byOrigin.keys) {
                var metrics =
                    origins[origin]
                    ?? OriginMetrics(dimensions: [("client", clientName), ("origin", origin)], factory: factory)
                var counts = statistics.byOrigin[origin] ?? PoolStatistics.Counts()
                if statistics.byOrigin[origin] == nil {
                    // Gone from every loop's books (a client keeps its totals, so this is only after a restart).
                    counts.connectionsOpened = metrics.reported.connectionsOpened
                    counts.connectionsClosed = metrics.reported.connectionsClosed
                    counts.retriesOnFreshConnection = metrics.reported.retriesOnFreshConnection
                }
                metrics.record(counts)
                origins[origin] = metrics
            }
        }
    }

    /// Reports every `interval` until the task is cancelled (then it returns without throwing).
    public func run(every interval: Duration = .seconds(5)) async throws {
        while !Task.isCancelled {
            await report()
            do { try await Task.sleep(for: interval) } catch { return }
        }
    }
}
