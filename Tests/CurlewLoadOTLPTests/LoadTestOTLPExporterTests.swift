#if OTLP
import CurlewEngine
import CurlewLoad
import CurlewLoadOTLP
import CurlewLoopbackServer
import CurlewSharding
import CurlewTestSupport
import Foundation
import InMemoryLogging
import Logging
import ServiceLifecycle
import Testing

/// What the exporter sends, as a receiver that decodes OTLP with the OpenTelemetry project's own protobuf classes
/// reads it: while the run goes, and at the end with the run's counts, as its summary and the server counted them.
@Suite struct LoadTestOTLPExporterTests {
    @Test func theLastExportHasTheRunsCountsAndEarlierOnesShowTheRunGoing() async throws {
        let receiver = try await OTLPReceiver.start()
        defer { receiver.stop() }
        // The third target holds its first request, so the run goes on until the test has seen an export while it
        // goes (a run of fixed length ended between two exports in CI).
        let (summary, served, heldServed) = try await withLoopbackServer { server in
            try await withWireScriptServer(WireScriptServer.holdingTheFirstRequest(body: "held target")) { held in
                var plan = LoadPlan(
                    requests: [
                        try CurlewRequest(url: server.baseURL + "/small"),
                        try CurlewRequest(url: server.baseURL + "/status/503"),
                        try CurlewRequest(url: held.baseURL + "/held"),
                    ], shape: .requests(600))
                plan.connections = 6
                plan.progressInterval = nil
                plan.checks = try ["status in 200-299", "body contains \"no such text\""].map { try LoadCheck($0) }
                let client = CurlewClient(configuration: plan.clientConfiguration())
                let load = try LoadTest(plan, client: client)
                let exporter = try LoadTestOTLPExporter(
                    load, endpoint: receiver.baseURL, exportInterval: .milliseconds(100),
                    attributes: [("run", "otlp-test")])
                #expect(exporter.endpoint.absoluteString == receiver.baseURL + "/v1/metrics")
                let group = ServiceGroup(services: [exporter], logger: Logger(label: "test"))
                let pushing = Task { try await group.run() }
                let running = Task { try await load.run() }
                defer { held.releaseTheFirstRequest() }
                try await held.waitUntilTheFirstRequestIsHeld()
                try await waitUntil(timeout: .seconds(20), "an export while the run goes") {
                    try receiver.exports().contains { export in
                        export.total("curlew.bench.running") == 1 && export.total("curlew.bench.requests") > 0
                    }
                }
                held.releaseTheFirstRequest()
                let summary = try await running.value
                await group.triggerGracefulShutdown()
                try await pushing.value
                await client.shutdown()
                return (summary, server.requestsServed, held.requests.count)
            }
        }
        let exports = try receiver.exports()
        let last = try #require(exports.last)
        #expect(exports.allSatisfy { $0.error == nil && $0.path == "/v1/metrics" })
        #expect(last.contentType == "application/x-protobuf")
        #expect(last.resource?["service.name"] == "curlew-bench")
        let points = try #require(last.points)
        #expect(points.allSatisfy { $0.attributes["run"] == "otlp-test" && $0.attributes["shard"] == nil })
        #expect(summary.requests == 600)
        #expect(served == 400)
        #expect(heldServed == 200)
        #expect(last.total("curlew.bench.requests", ["outcome": "ok"]) == Double(summary.succeeded))
        #expect(last.total("curlew.bench.requests", ["outcome": "failed"]) == 200)
        #expect(
            last.points("curlew.bench.requests").allSatisfy { $0.monotonic == true && $0.temporality == "cumulative" })
        #expect(last.total("curlew.bench.failures", ["kind": "http5xx"]) == 200)
        #expect(last.total("curlew.bench.responses", ["code": "200"]) == 400)
        #expect(last.total("curlew.bench.responses", ["code": "503"]) == 200)
        #expect(last.total("curlew.bench.bytes_received") == Double(summary.bytesReceived))
        #expect(last.total("curlew.bench.bytes_sent") == Double(summary.bytesSent))
        #expect(last.total("curlew.bench.connections_opened") == Double(summary.connectionsOpened))
        #expect(last.points("curlew.bench.in_flight").map(\.value) == [0])
        #expect(last.points("curlew.bench.running").map(\.value) == [0])
        for (target, failed) in [("1", 0.0), ("2", 200), ("3", 0)] {
            #expect(last.total("curlew.bench.target_requests", ["target": target, "outcome": "ok"]) == 200 - failed)
            #expect(last.total("curlew.bench.target_requests", ["target": target, "outcome": "failed"]) == failed)
        }
        let statusCheck = "status in 200-299"
        let bodyCheck = "body contains \"no such text\""
        #expect(last.total("curlew.bench.checks", ["check": statusCheck, "result": "pass"]) == 400)
        #expect(last.total("curlew.bench.checks", ["check": statusCheck, "result": "fail"]) == 200)
        #expect(last.total("curlew.bench.checks", ["check": bodyCheck, "result": "pass"]) == 0)
        #expect(last.total("curlew.bench.checks", ["check": bodyCheck, "result": "fail"]) == 600)

        // The histogram: every request once, in seconds; each bucket holds the run's HdrHistogram values between
        // its bounds (3 significant digits), the sum is the run's total latency within that precision.
        let latency = try #require(last.points("curlew.bench.request.duration").first)
        #expect(latency.kind == "histogram")
        #expect(latency.unit == "s")
        #expect(latency.count == 600)
        let bounds = try #require(latency.bounds)
        let counts = try #require(latency.counts)
        #expect(bounds == LoadTestOTLPExporter.defaultLatencyBuckets)
        #expect(counts.count == bounds.count + 1)
        let values = summary.result.histogram.recordedValues().map {
            (seconds: Double($0.value) / 1e6, count: Int($0.count))
        }
        for (index, bound) in bounds.enumerated() {
            let lower = index == 0 ? -Double.infinity : bounds[index - 1]
            let expected = values.filter { $0.seconds > lower && $0.seconds <= bound }.reduce(0) { $0 + $1.count }
            #expect(counts[index] == expected, "bucket \(index), le=\(bound)")
        }
        let runSum = values.reduce(0.0) { $0 + $1.seconds * Double($1.count) }
        let sum = try #require(latency.sum)
        #expect(abs(sum - runSum) <= runSum * 1e-9 + 1e-9)
    }

    @Test func aShardsSeriesCarryTheShard() async throws {
        let receiver = try await OTLPReceiver.start()
        defer { receiver.stop() }
        try await withLoopbackServer { server in
            var plan = try LoadPlan(target: server.baseURL + "/small", shape: .requests(90))
            plan.connections = 3
            plan.progressInterval = nil
            plan.shard = ShardAssignment(index: 2, count: 3)
            let (summary, exporter) = try await Self.run(plan) { load in
                // An interval no run comes near, however slow the machine (the default 10 s once came round on CI).
                try LoadTestOTLPExporter(load, endpoint: receiver.baseURL + "/", exportInterval: .seconds(3600))
            }
            #expect(exporter.attributes.map(\.0) == ["shard"])
            // The interval did not come round: the one export is the one at shutdown.
            let exports = try receiver.exports()
            #expect(exports.count == 1)
            let points = try #require(exports.first?.points)
            #expect(!points.isEmpty && points.allSatisfy { $0.attributes["shard"] == "2/3" })
            #expect(summary.requests == 30)
            #expect(exports.first?.total("curlew.bench.requests", ["outcome": "ok"]) == 30)
            #expect(server.requestsServed == 30)
        }
    }

    /// An open-model run on one connection, a request due every millisecond and each taking 5 ms: its requests sent
    /// late for want of a connection reach the collector as `curlew.bench.late_requests`, the summary's count.
    @Test func anOpenModelRunsLateRequestsAreSent() async throws {
        let receiver = try await OTLPReceiver.start()
        defer { receiver.stop() }
        try await withLoopbackServer { server in
            var plan = try LoadPlan(
                target: server.baseURL + "/delay/5", shape: .rate(perSecond: 1_000, requests: 20))
            plan.connections = 1
            plan.progressInterval = nil
            let (summary, _) = try await Self.run(plan) { load in
                try LoadTestOTLPExporter(load, endpoint: receiver.baseURL + "/", exportInterval: .seconds(3600))
            }
            let last = try #require(try receiver.exports().last)
            #expect(summary.lateRequests > 0)
            #expect(last.total("curlew.bench.late_requests") == Double(summary.lateRequests))
        }
    }

    /// A collector that refuses every export does not stop or fail the run; swift-otel's report of it reaches the
    /// logger given.
    @Test func aRefusedExportIsLoggedAndTheRunGoesOn() async throws {
        let receiver = try await OTLPReceiver.start(status: 503)
        defer { receiver.stop() }
        let logs = InMemoryLogHandler()
        try await withLoopbackServer { server in
            var plan = try LoadPlan(target: server.baseURL + "/small", shape: .requests(50))
            plan.connections = 2
            plan.progressInterval = nil
            let (summary, _) = try await Self.run(plan) { load in
                try LoadTestOTLPExporter(
                    load, endpoint: receiver.baseURL, exportTimeout: .seconds(1),
                    logger: Logger(label: "otlp") { _ in logs })
            }
            #expect(summary.succeeded == 50)
            #expect(server.requestsServed == 50)
        }
        // The receiver saw the sends it refused: the last one at least.
        let attempts = try receiver.exports()
        #expect(!attempts.isEmpty && attempts.allSatisfy { $0.refused == 503 && $0.points == nil })
        #expect(
            logs.entries.contains { $0.level >= .warning && $0.message.description.contains("export") },
            "\(logs.entries.map(\.message))")
    }

    @Test(arguments: ["unit", "description"])
    func anAttributeSwiftOTelWouldTakeAsTheMetricsOwnIsRefused(name: String) async throws {
        let plan = try LoadPlan(target: "http://127.0.0.1:9/", shape: .requests(1))
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        #expect(throws: LoadTestOTLPError.self) {
            try LoadTestOTLPExporter(load, endpoint: "http://127.0.0.1:4318", attributes: [(name, "x")])
        }
        await client.shutdown()
    }

    /// swift-otel logs each OpenTelemetry variable it applies with its value; the exporter's logger never gets
    /// those values, and OTEL_EXPORTER_OTLP_HEADERS is where credentials live.
    @Test func theValuesOfOpenTelemetryVariablesNeverReachTheLogger() {
        struct QuotingError: Error, CustomStringConvertible {
            var description: String { "invalidHeaderFieldValues([\"Bearer hunter3\\n\"])" }
        }
        let logs = InMemoryLogHandler()
        let environment = ["OTEL_EXPORTER_OTLP_METRICS_HEADERS": "Authorization=Bearer%20hunter3,X-Key=k%C3%A9y"]
        var logger = Logger(label: "otlp") { _ in
            EnvironmentValueRedactingLogHandler(wrapping: logs, environment: environment)
        }
        logger.logLevel = .trace
        logger[metadataKey: "environment_key"] = "OTEL_EXPORTER_OTLP_HEADERS"
        logger[metadataKey: "environment_value"] = "Authorization=Bearer hunter3"
        logger[metadataKey: "new_value"] = "[(Authorization, Bearer hunter3)]"
        logger.info("Configuration updated from environment", metadata: ["previous_value": "[]"])
        logger.warning("Failed to export metrics.", error: QuotingError(), metadata: ["header": "X-Key: kéy"])
        let entries = logs.entries
        #expect(entries.count == 2)
        #expect(entries.first?.metadata["environment_key"] == "OTEL_EXPORTER_OTLP_HEADERS")
        #expect(entries.first?.metadata["previous_value"] == nil)
        let logged = entries.map { "\($0.message) \($0.metadata) \(String(describing: $0.error))" }.joined()
        #expect(!logged.contains("hunter3") && !logged.contains("kéy"), "\(logged)")
        #expect(logged.contains("invalidHeaderFieldValues"), "\(logged)")
    }

    /// Runs `plan` with the exporter `makeExporter` makes, as a service does: in a service group shut down
    /// gracefully once the run has returned, so the exporter's last send has gone when this returns.
    private static func run(
        _ plan: LoadPlan, exporter makeExporter: (LoadTest) throws -> LoadTestOTLPExporter
    ) async throws -> (LoadSummary, LoadTestOTLPExporter) {
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let load = try LoadTest(plan, client: client)
        let exporter = try makeExporter(load)
        let group = ServiceGroup(services: [exporter], logger: Logger(label: "test"))
        let pushing = Task { try await group.run() }
        let summary = try await load.run()
        await group.triggerGracefulShutdown()
        try await pushing.value
        await client.shutdown()
        return (summary, exporter)
    }

    @Test(arguments: [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/metrics"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/metrics"),
        ("https://collector.example:443/otlp/v1/metrics", "https://collector.example:443/otlp/v1/metrics"),
        ("HTTPS://[::1]:4318", "https://[::1]:4318/v1/metrics"),
    ])
    func anEndpointWithoutAPathGetsTheMetricsPath(text: String, expected: String) throws {
        #expect(try LoadTestOTLPExporter.metricsEndpoint(text).absoluteString == expected)
    }

    @Test(arguments: [
        ("ftp://127.0.0.1:4318", "is not an http:// or https:// URL"),
        ("127.0.0.1:4318", "is not an http:// or https:// URL"),
        ("http://", "is not an http:// or https:// URL"),
        ("http://user:secret@127.0.0.1:4318", "has credentials in it"),
        ("ftp://user:secret@127.0.0.1:4318", "has credentials in it"),
        ("user:secret@127.0.0.1:4318", "is not an http:// or https:// URL"),
        ("", "is not an http:// or https:// URL"),
    ])
    func anEndpointThatIsNotAPlainHTTPURLIsRefused(text: String, mention: String) {
        #expect {
            try LoadTestOTLPExporter.metricsEndpoint(text)
        } throws: { error in
            let description = (error as? LoadTestOTLPError)?.description ?? ""
            return description.contains(mention) && !description.contains("secret@")
        }
    }

    @Test(arguments: [
        ["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:9999/v1/metrics"],
        ["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318"],
        ["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": ""],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://elsewhere:4318"],
        ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"],
        ["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"],
        ["OTEL_METRICS_EXPORTER": "none"],
        ["OTEL_SDK_DISABLED": "TRUE"],
        ["OTEL_METRIC_EXPORT_INTERVAL": "60000"],
        ["OTEL_EXPORTER_OTLP_TIMEOUT": "30000"],
        ["OTEL_METRIC_EXPORT_TIMEOUT": "2000", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"],
        ["OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta"],
    ])
    func anEnvironmentThatSwiftOTelWouldFollowElsewhereIsRefused(environment: [String: String]) throws {
        let endpoint = try LoadTestOTLPExporter.metricsEndpoint("http://127.0.0.1:4318")
        #expect {
            try LoadTestOTLPExporter.checkEnvironment(
                agreesWith: endpoint, interval: .seconds(10), timeout: .seconds(2), environment)
        } throws: { error in
            // The message names the variable and never repeats its value.
            let description = (error as? LoadTestOTLPError)?.description ?? ""
            return environment.keys.contains { description.hasPrefix($0 + " in the environment") }
                && !environment.values.contains { value in
                    !value.isEmpty && !endpoint.absoluteString.contains(value) && description.contains(value)
                }
        }
    }

    /// Nor the key of the endpoint it was told.
    @Test func theRefusalNamesTheEndpointWithoutItsKey() throws {
        let endpoint = try LoadTestOTLPExporter.metricsEndpoint("http://127.0.0.1:4318/v1/metrics?api_key=k3y-otlp")
        #expect {
            try LoadTestOTLPExporter.checkEnvironment(
                agreesWith: endpoint, interval: .seconds(10), timeout: .seconds(2),
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"])
        } throws: { error in
            let description = (error as? LoadTestOTLPError)?.description ?? ""
            return description.contains("api_key=<redacted>") && !description.contains("k3y-otlp")
        }
    }

    @Test(arguments: [
        [:],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SERVICE_NAME": "x"],
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"],
        // The metrics endpoint is the one swift-otel follows; the shared one is then for other signals.
        [
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://traces:4318",
        ],
        ["OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"],
        ["OTEL_METRIC_EXPORT_INTERVAL": "10000", "OTEL_METRIC_EXPORT_TIMEOUT": "2000"],
        ["OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "cumulative", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"],
        // Values swift-otel does not know it ignores (with a warning), keeping the exporter's settings.
        ["OTEL_EXPORTER_OTLP_PROTOCOL": "GRPC", "OTEL_METRICS_EXPORTER": "OTLP", "OTEL_METRIC_EXPORT_INTERVAL": "10s"],
    ])
    func anEnvironmentThatAgreesIsAccepted(environment: [String: String]) throws {
        let endpoint = try LoadTestOTLPExporter.metricsEndpoint("http://127.0.0.1:4318")
        try LoadTestOTLPExporter.checkEnvironment(
            agreesWith: endpoint, interval: .seconds(10), timeout: .seconds(2), environment)
    }
}
#endif
