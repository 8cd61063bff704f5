import CurlewEngine
import CurlewLoad
import CurlewLoadPrometheus
import CurlewLoopbackServer
import CurlewSharding
import CurlewTestSupport
import Foundation
import Testing

/// The exporter's exposition, parsed: its counts are the run's, as its summary and the server counted them.
@Suite struct LoadTestPrometheusExporterTests {
    @Test func theExpositionAfterARunHasTheRunsCounts() async throws {
        let server = try await LoopbackServer.start()
        var plan = LoadPlan(
            requests: [
                try CurlewRequest(url: server.baseURL + "/small"),
                try CurlewRequest(url: server.baseURL + "/status/503"),
                try CurlewRequest(url: server.baseURL + "/delay/2"),
            ], shape: .requests(600))
        plan.connections = 6
        plan.progressInterval = nil
        plan.checks = try ["status in 200-299", "body contains \"no such text\""].map { try LoadCheck($0) }
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let exporter = LoadTestPrometheusExporter(load, labels: [("run", "exporter-test")])
        let sampling = Task { await exporter.run(every: .milliseconds(20)) }
        // A scrape while the run goes on: counts so far, never more than the run's.
        let midRun = Task {
            try await waitUntil(timeout: .seconds(10), "a request counted") {
                var buffer: [UInt8] = []
                exporter.emit(into: &buffer)
                let samples = try ExpositionSample.parse(String(decoding: buffer, as: UTF8.self))
                return (samples.value("curlew_bench_request_duration_seconds_count") ?? 0) > 0
            }
        }
        let summary = try await load.run()
        try await midRun.value
        sampling.cancel()
        await sampling.value
        await client.shutdown()
        let served = server.requestsServed
        try await server.shutdown()

        var buffer: [UInt8] = []
        exporter.emit(into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)
        let samples = try ExpositionSample.parse(text)
        #expect(summary.requests == 600)
        #expect(served == 600)
        #expect(samples.allSatisfy { $0.labels["run"] == "exporter-test" && $0.labels["shard"] == nil })
        #expect(samples.value("curlew_bench_requests_total", ["outcome": "ok"]) == Double(summary.succeeded))
        #expect(samples.value("curlew_bench_requests_total", ["outcome": "failed"]) == 200)
        #expect(summary.failed == 200)
        #expect(samples.value("curlew_bench_failures_total", ["kind": "http5xx"]) == 200)
        #expect(samples.value("curlew_bench_responses_total", ["code": "200"]) == 400)
        #expect(samples.value("curlew_bench_responses_total", ["code": "503"]) == 200)
        #expect(samples.value("curlew_bench_bytes_received_total") == Double(summary.bytesReceived))
        #expect(samples.value("curlew_bench_bytes_sent_total") == Double(summary.bytesSent))
        #expect(samples.value("curlew_bench_connections_opened_total") == Double(summary.connectionsOpened))
        #expect(samples.value("curlew_bench_in_flight") == 0)
        #expect(samples.value("curlew_bench_running") == 0)
        // A closed-model run has no schedule to be late for.
        #expect(!samples.contains { $0.name.hasPrefix("curlew_bench_late_requests") })
        for (target, failed) in [("1", 0.0), ("2", 200), ("3", 0)] {
            #expect(
                samples.value("curlew_bench_target_requests_total", ["target": target, "outcome": "ok"]) == 200 - failed
            )
            #expect(
                samples.value("curlew_bench_target_requests_total", ["target": target, "outcome": "failed"]) == failed)
        }
        let statusCheck = "status in 200-299"
        let bodyCheck = "body contains \"no such text\""
        #expect(samples.value("curlew_bench_checks_total", ["check": statusCheck, "result": "pass"]) == 400)
        #expect(samples.value("curlew_bench_checks_total", ["check": statusCheck, "result": "fail"]) == 200)
        #expect(samples.value("curlew_bench_checks_total", ["check": bodyCheck, "result": "pass"]) == 0)
        #expect(samples.value("curlew_bench_checks_total", ["check": bodyCheck, "result": "fail"]) == 600)

        // The histogram: every request once, its buckets those of the run's HdrHistogram (3 significant digits),
        // its sum the run's total latency within that precision.
        #expect(samples.value("curlew_bench_request_duration_seconds_count") == 600)
        #expect(samples.value("curlew_bench_request_duration_seconds_bucket", ["le": "+Inf"]) == 600)
        let histogram = summary.result.histogram
        var previous = 0.0
        for bound in LoadTestPrometheusExporter.defaultLatencyBuckets {
            let label = samples.filter { $0.name == "curlew_bench_request_duration_seconds_bucket" }
                .first { Double($0.labels["le"] ?? "") == bound }
            let count = try #require(label?.value, "no bucket le=\(bound)")
            #expect(count >= previous)
            previous = count
            let expected = histogram.recordedValues().filter { Double($0.value) / 1e6 <= bound }.reduce(0) {
                $0 + Int($1.count)
            }
            #expect(count == Double(expected), "le=\(bound)")
        }
        let sum = try #require(samples.value("curlew_bench_request_duration_seconds_sum"))
        let runSum = histogram.recordedValues().reduce(0.0) { $0 + Double($1.value) * Double($1.count) } / 1e6
        #expect(abs(sum - runSum) <= runSum * 1e-9 + 1e-9)
        #expect(sum > 200 * 0.002)
    }

    /// A template's data rows are made into requests up front and sent like a targets file's, but they are one
    /// request: no series per row.
    @Test func aTemplatesRowsAreNotSeriesOfTheirOwn() async throws {
        let server = try await LoopbackServer.start()
        let data = LoadData(columns: ["n"], rows: (0..<50).map { [String($0)] as [String?] })
        let template = try LoadRequestTemplate(url: server.baseURL + "/small?n={{n}}", data: data)
        var plan = LoadPlan(template: template, shape: .requests(200))
        plan.connections = 4
        plan.progressInterval = nil
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let exporter = LoadTestPrometheusExporter(load)
        let summary = try await load.run()
        await client.shutdown()
        let served = server.requestsServed
        try await server.shutdown()
        var buffer: [UInt8] = []
        exporter.emit(into: &buffer)
        let samples = try ExpositionSample.parse(String(decoding: buffer, as: UTF8.self))
        #expect(served == 200)
        #expect(summary.requests == 200)
        #expect(samples.value("curlew_bench_requests_total", ["outcome": "ok"]) == 200)
        #expect(!samples.contains { $0.name.hasPrefix("curlew_bench_target_requests") })
    }

    /// An open-model run on one connection, a request due every millisecond and each taking 5 ms: the requests sent
    /// late for want of a connection are a counter of their own, the summary's count.
    @Test func anOpenModelRunsLateRequestsAreACounter() async throws {
        try await withLoopbackServer { server in
            var plan = try LoadPlan(
                target: server.baseURL + "/delay/5", shape: .rate(perSecond: 1_000, requests: 20))
            plan.connections = 1
            plan.progressInterval = nil
            let client = CurlewClient(configuration: plan.clientConfiguration())
            let load = try LoadTest(plan, client: client)
            let exporter = LoadTestPrometheusExporter(load)
            let summary = try await load.run()
            await client.shutdown()
            var buffer: [UInt8] = []
            exporter.emit(into: &buffer)
            let text = String(decoding: buffer, as: UTF8.self)
            let samples = try ExpositionSample.parse(text)
            #expect(summary.lateRequests > 0)
            #expect(samples.value("curlew_bench_late_requests_total") == Double(summary.lateRequests))
            #expect(text.contains("# TYPE curlew_bench_late_requests_total counter"))
        }
    }

    @Test func aShardsSeriesAreLabelledWithTheShard() async throws {
        try await withLoopbackServer { server in
            var plan = try LoadPlan(target: server.baseURL + "/small", shape: .requests(90))
            plan.connections = 3
            plan.progressInterval = nil
            plan.shard = ShardAssignment(index: 2, count: 3)
            let client = CurlewClient(configuration: plan.clientConfiguration())
            let load = try LoadTest(plan, client: client)
            let exporter = LoadTestPrometheusExporter(load)
            let summary = try await load.run()
            await client.shutdown()
            var buffer: [UInt8] = []
            exporter.emit(into: &buffer)
            let samples = try ExpositionSample.parse(String(decoding: buffer, as: UTF8.self))
            #expect(exporter.labels.map(\.0) == ["shard"])
            #expect(!samples.isEmpty && samples.allSatisfy { $0.labels["shard"] == "2/3" })
            #expect(summary.requests == 30)
            #expect(samples.value("curlew_bench_requests_total", ["outcome": "ok"]) == 30)
            #expect(server.requestsServed == 30)
        }
    }
}
