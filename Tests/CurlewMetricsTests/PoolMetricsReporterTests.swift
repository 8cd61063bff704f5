import CurlewEngine
import CurlewMetrics
import CurlewTestSupport
import Prometheus
import Testing

/// `PoolMetricsReporter` through a real swift-metrics backend (swift-prometheus): the scraped exposition carries the
/// pool as the server saw it.
@Suite("Pool metrics reporter")
struct PoolMetricsReporterTests {
    /// The value of `name` for `origin` in a Prometheus text exposition, nil when absent.
    static func value(_ exposition: String, _ name: String, origin: String) -> Double? {
        exposition.split(separator: "\n").lazy
            .filter { $0.hasPrefix(name + "{") && $0.contains("origin=\"\(origin)\"") && $0.contains("client=\"api\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            .first
    }

    @Test(arguments: [CurlewClient.Configuration.EventLoopKind.thread, .dispatch])
    func aScrapeShowsThePoolTheServerSaw(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ request in
            if request.target.hasPrefix("/held/") {
                return [.mark("arrived \(request.target)"), .waitForRelease("answer"), .response(body: "held")]
            }
            if request.target == "/close" {
                return [.response(headers: [("Connection", "close")], body: "closing"), .close]
            }
            return [.response(body: "ok")]
        }) { server in
            var configuration = CurlewClient.Configuration()
            configuration.eventLoop = loop
            configuration.loopCount = 1
            configuration.maxConnectionsPerHost = 2
            configuration.httpVersion = .http1_1
            // Not the 4 s default: a loaded machine can leave this test that long between requests, and a retired
            // idle connection would change the counts asserted below.
            configuration.maxConnectionIdleAge = .seconds(120)
            // Two requests wait for a connection until the server lets go, however slow a loaded machine makes that:
            // the connect timeout counts the wait.
            configuration.timeouts.connect = .seconds(300)
            let client = CurlewClient(configuration: configuration)
            defer { Task { await client.shutdown() } }
            let registry = PrometheusCollectorRegistry()
            let reporter = PoolMetricsReporter(
                client: client, clientName: "api", factory: PrometheusMetricsFactory(registry: registry))
            let origin = "http://127.0.0.1:\(server.port)"

            // Two held on the two connections allowed, two waiting for one.
            async let held = withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        try await client.execute(try CurlewRequest(url: "\(origin)/held/\(index)")).status.code
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            try await waitUntil(timeout: .seconds(20), "the server holds two requests") { server.requests.count == 2 }
            await reporter.report()
            var scrape = registry.emitToString()
            #expect(Self.value(scrape, "curlew_pool_connections_busy", origin: origin) == 2, "\(scrape)")
            #expect(Self.value(scrape, "curlew_pool_transfers_in_flight", origin: origin) == 4)
            #expect(Self.value(scrape, "curlew_pool_transfers_waiting_for_connection", origin: origin) == 2)
            #expect(
                Self.value(scrape, "curlew_pool_connections_opened_total", origin: origin)
                    == Double(server.connectionCount))

            server.release("answer")
            #expect(try await held == [200, 200, 200, 200])
            for _ in 0..<10 { _ = try await client.execute(try CurlewRequest(url: "\(origin)/again")) }
            _ = try await client.execute(try CurlewRequest(url: "\(origin)/close"))
            // Reported twice: counters add only what is new.
            await reporter.report()
            await reporter.report()
            scrape = registry.emitToString()
            #expect(server.requests.count == 15)
            #expect(
                Self.value(scrape, "curlew_pool_connections_opened_total", origin: origin)
                    == Double(server.connectionCount), "\(scrape)")
            #expect(Self.value(scrape, "curlew_pool_connections_closed_total", origin: origin) == 1)
            #expect(Self.value(scrape, "curlew_pool_connections_open", origin: origin) == 1)
            #expect(Self.value(scrape, "curlew_pool_connections_idle", origin: origin) == 1)
            #expect(Self.value(scrape, "curlew_pool_connections_busy", origin: origin) == 0)
            #expect(Self.value(scrape, "curlew_pool_transfers_in_flight", origin: origin) == 0)
            #expect(Self.value(scrape, "curlew_pool_retries_on_fresh_connection_total", origin: origin) == 0)
            await client.shutdown()
        }
    }
}
