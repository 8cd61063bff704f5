import CurlewTestSupport
import Foundation
import Testing

/// `curlew bench --prometheus` scraped by a real Prometheus (Debian's package): two shards of one run, each with
/// its endpoint, seen live while they run, and in the end the counts the runs reported and the server counted.
///
/// Also the endpoint's own life: live counts while a run goes, the final ones during the hold.
///
/// A suite of its own (`make test`'s `prometheus` step): Prometheus' start-up, the paced runs and their scrapes are
/// kept off the main run, whose load they could not rely on and whose timing-sensitive tests they would load.
@Suite(.serialized) struct BenchPrometheusCommandTests {
    /// Each shard's first request is held at the server (each shard names itself in a header) until Prometheus has
    /// scraped both shards going: a paced run of 3 s ended before the scrapes saw it on a loaded machine.
    @Test func prometheusScrapesEachShardLiveAndEndsWithTheRunsAndTheServersCounts() async throws {
        let total = 3000
        let shardHeader = "X-Test-Shard"
        let ports = try [FreePort.allocate(), FreePort.allocate()]
        let prometheus = try await PrometheusServer.start(
            scraping: ports.map { "127.0.0.1:\($0)" }, every: .milliseconds(250))
        defer { prometheus.stop() }
        try await withWireScriptServer(WireScriptServer.holdingTheFirstRequest(ofEachValueOf: shardHeader)) { server in
            let shardFields = (0..<2).map { (name: shardHeader, value: "\($0)") }
            defer { for field in shardFields { server.releaseTheFirstRequest(withHeader: field) } }
            // The whole run: 3,000 requests at 1,000/s, in two shards; the hold is four scrape intervals.
            let shards = try (0..<2).map { index in
                try CurlewBinary.start([
                    "bench", server.baseURL + "/small", "-n", "\(total)", "--rate", "1000", "-c", "8", "--shard",
                    "\(index)/2", "-H", "\(shardHeader): \(index)", "--prometheus", ":\(ports[index])",
                    "--prometheus-hold", "1s", "--json", "--no-progress",
                ])
            }
            defer { for shard in shards where shard.isRunning { shard.signal(SIGKILL) } }
            for field in shardFields { try await server.waitUntilTheFirstRequestIsHeld(withHeader: field) }

            // Live: while the shards run, Prometheus has each shard's counts so far, labelled with the shard (the
            // counts and `running` of one evaluation, so of the same scrapes).
            var live: [String: Double] = [:]
            var up: [String: Double] = [:]
            try await waitUntil(
                timeout: .seconds(20), pollInterval: .milliseconds(100),
                "Prometheus to scrape both shards mid-run (last seen: \(live), up: \(up); shards running: \(shards.map(\.isRunning)), stderr: \(shards.map(\.currentStderr)))"
            ) {
                up = Dictionary(
                    try await prometheus.query("up").map { ($0.labels["instance"] ?? "", $0.value) },
                    uniquingKeysWith: max)
                let counts = try await prometheus.query(
                    "sum by (shard) (curlew_bench_requests_total) and on (shard) (curlew_bench_running == 1)")
                live = Dictionary(
                    counts.compactMap { series in series.labels["shard"].map { ($0, series.value) } },
                    uniquingKeysWith: max)
                return Set(live.keys) == ["0/2", "1/2"] && live.values.allSatisfy { $0 > 0 }
            }
            // Each shard's held request has not come back.
            #expect(live.values.allSatisfy { $0 < Double(total / 2) }, "\(live)")
            for field in shardFields { server.releaseTheFirstRequest(withHeader: field) }

            var reported: [String: Int] = [:]
            for (index, shard) in shards.enumerated() {
                let output = try await shard.finish(timeout: .seconds(60))
                #expect(output.status == 0, "\(output.stderr)")
                reported["\(index)/2"] = try output.json()["requests"] as? Int
            }
            #expect(reported.values.reduce(0, +) == total)

            // In the end: the last scrape (during the hold) has each shard's final count. The endpoints are gone
            // now, so the series are stale; max_over_time still reads their samples.
            var scraped: [String: Double] = [:]
            try await waitUntil(
                timeout: .seconds(20), pollInterval: .milliseconds(100), "Prometheus to have the final counts"
            ) {
                let series = try await prometheus.query(
                    "sum by (shard) (max_over_time(curlew_bench_requests_total[5m]))")
                scraped = Dictionary(
                    series.compactMap { series in series.labels["shard"].map { ($0, series.value) } },
                    uniquingKeysWith: max)
                return scraped.count == 2 && scraped.allSatisfy { Int($0.value) == reported[$0.key] }
            }
            let histogramCount = try await prometheus.query(
                "sum(max_over_time(curlew_bench_request_duration_seconds_count[5m]))")
            #expect(histogramCount.first?.value == Double(total))
            let failed = try await prometheus.query(
                "sum(max_over_time(curlew_bench_requests_total{outcome=\"failed\"}[5m]))")
            #expect(failed.first?.value == 0)

            // And the server's count: every request once, each shard's from that shard.
            let received = Dictionary(grouping: server.requests) { $0.header(shardHeader) ?? "none" }
                .mapValues(\.count)
            #expect(received == ["0": reported["0/2"] ?? -1, "1": reported["1/2"] ?? -1], "\(received)")
            #expect(scraped.values.reduce(0, +) == Double(server.requests.count))
        }
    }

    /// While the run goes on, a scrape has the counts so far; the hold keeps the endpoint up after it with the
    /// final ones, which are the run's.
    ///
    /// The server holds the run's first request until a scrape has seen the run going: under load, a 2 s and then a
    /// 10 s run of fixed length ended before a scrape (a `curl` process each) saw it running.
    @Test func theEndpointServesTheRunAndItsFinalCountsDuringTheHold() async throws {
        try await withWireScriptServer(WireScriptServer.holdingTheFirstRequest()) { server in
            defer { server.releaseTheFirstRequest() }
            let port = try FreePort.allocate()
            let running = try CurlewBinary.start([
                "bench", server.baseURL + "/small", "-n", "1000", "--rate", "500", "-c", "4", "--prometheus",
                ":\(port)", "--prometheus-hold", "60s", "--json", "--no-progress",
            ])
            defer { running.signal(SIGKILL) }
            try await server.waitUntilTheFirstRequestIsHeld()
            var live = -1.0
            try await waitUntil(timeout: .seconds(20), "a scrape during the run") {
                guard let samples = try? await BenchCommandTests.scrape(port: port) else { return false }
                if samples.value("curlew_bench_running") == 0 {
                    throw TestSupportError("the run ended before a scrape saw it running")
                }
                guard let ok = samples.value("curlew_bench_requests_total", ["outcome": "ok"]), ok > 0 else {
                    return false
                }
                live = ok
                return true
            }
            #expect(live > 0 && live < 1000)
            server.releaseTheFirstRequest()
            var final: [ExpositionSample] = []
            try await waitUntil(timeout: .seconds(20), "the run to end") {
                guard let samples = try? await BenchCommandTests.scrape(port: port),
                    samples.value("curlew_bench_running") == 0
                else { return false }
                final = samples
                return true
            }
            #expect(final.value("curlew_bench_requests_total", ["outcome": "ok"]) == 1000)
            #expect(final.value("curlew_bench_request_duration_seconds_count") == 1000)
            #expect(final.value("curlew_bench_in_flight") == 0)
            #expect(server.requests.count == 1000)
            // Still holding, with the summary printed: SIGTERM (or Ctrl-C) cuts the hold short.
            #expect(running.isRunning)
            try await waitUntil(timeout: .seconds(20), "the summary on stdout") {
                (try? String(contentsOfFile: running.stdoutPath, encoding: .utf8))?.hasSuffix("\n") == true
            }
            running.signal(SIGTERM)
            let output = try await running.finish(timeout: .seconds(20))
            // The hold ended by SIGTERM; the exit status is the run's.
            #expect(output.status == 0, "\(output.stderr)")
            #expect(try output.json()["requests"] as? Int == 1000)
        }
    }
}
