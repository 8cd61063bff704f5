/// A snapshot of a client's connection pool: connections open, idle and busy, transfers in flight and waiting for a
/// connection, and the running totals of connections opened and closed and of requests sent again on a fresh
/// connection, for the whole client and per origin.
///
/// Read with ``CurlewClient/poolStatistics()``; `CurlewMetrics`' `PoolMetricsReporter` publishes it as swift-metrics
/// gauges and counters. The engine keeps the counts as transfers run at no measurable cost (a connection is
/// recorded when libcurl opens it; a request only notes the connection it went out on), and assembles a snapshot
/// only when asked.
public struct PoolStatistics: Sendable, Hashable {
    /// The counts of one origin, or of the whole client.
    public struct Counts: Sendable, Hashable {
        /// Connections open now: opened by libcurl and not yet closed (pooled or in use).
        public var connectionsOpen = 0
        /// Open connections no transfer is using (pooled for reuse, or still connecting).
        public var connectionsIdle = 0
        /// Connections at least one transfer is writing a request to or reading a response from. An HTTP/2
        /// connection carrying several streams counts once.
        public var connectionsBusy = 0
        /// Transfers in the client's event loops (started and not yet ended).
        public var transfersInFlight = 0
        /// Transfers in flight that have no connection yet: waiting for a free one (the per-host or total limit),
        /// or resolving and connecting.
        public var transfersWaitingForConnection = 0
        /// Connections opened since the client started.
        public var connectionsOpened = 0
        /// Connections closed since the client started (by either side). A close is seen when the snapshot is taken.
        public var connectionsClosed = 0
        /// Requests sent again on a fresh connection because the pooled one they were given was gone (closed, reset,
        /// an HTTP/2 GOAWAY, or holding bytes no request asked for) before any response byte arrived. libcurl does
        /// not report a GOAWAY as such; it shows here as these retries.
        public var retriesOnFreshConnection = 0

        public init() {}

        /// Adds `other`'s counts to these.
        mutating func add(_ other: Counts) {
            connectionsOpen += other.connectionsOpen
            connectionsIdle += other.connectionsIdle
            connectionsBusy += other.connectionsBusy
            transfersInFlight += other.transfersInFlight
            transfersWaitingForConnection += other.transfersWaitingForConnection
            connectionsOpened += other.connectionsOpened
            connectionsClosed += other.connectionsClosed
            retriesOnFreshConnection += other.retriesOnFreshConnection
        }
    }

    /// The whole client: the sum of ``byOrigin``.
    public var total: Counts
    /// Per origin, keyed `scheme://host:port` (the port always written), of the requests' URLs: a connection
    /// counts under the origin of the request that opened it.
    public var byOrigin: [String: Counts]

    public init(byOrigin: [String: Counts]) {
        self.byOrigin = byOrigin
        var total = Counts()
        for counts in byOrigin.values { total.add(counts) }
        self.total = total
    }
}
