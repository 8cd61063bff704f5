#if OTLP
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Testing

/// `--otlp`: the run's metrics reach an OTLP receiver while it goes and once more at the end, with the counts the
/// server served; an endpoint it cannot send to is a usage error before anything is sent.
extension BenchCommandTests {
    @Test func anOTLPRunsLastExportHasTheCountsTheServerServed() async throws {
        let receiver = try await OTLPReceiver.start()
        defer { receiver.stop() }
        // The server holds the run's first request, so the run goes on until the test has seen an export while it
        // goes.
        let (output, served) = try await withWireScriptServer(WireScriptServer.holdingTheFirstRequest()) { server in
            defer { server.releaseTheFirstRequest() }
            // Credentials in OTEL_EXPORTER_OTLP_HEADERS reach the collector and no log, even at swift-otel's most
            // talkative level, where it logs every variable it applies.
            let running = try CurlewBinary.start(
                [
                    "bench", server.baseURL + "/small", "-n", "1500", "--rate", "1000", "-c", "8", "--json",
                    "--otlp", receiver.baseURL, "--otlp-interval", "200ms",
                ],
                environment: ["OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer hunter3", "OTEL_LOG_LEVEL": "trace"])
            defer { running.signal(SIGKILL) }
            try await server.waitUntilTheFirstRequestIsHeld()
            try await waitUntil(timeout: .seconds(20), "an export while the run goes") {
                try receiver.exports().contains {
                    $0.total("curlew.bench.running") == 1 && $0.total("curlew.bench.requests") > 0
                }
            }
            server.releaseTheFirstRequest()
            return (try await running.finish(), server.requests.count)
        }
        #expect(output.status == 0, "\(output.stderr)")
        let json = try output.json()
        let requests = try #require(json["requests"] as? Int)
        #expect(requests == 1500)
        #expect(served == 1500)
        let exports = try receiver.exports()
        #expect(exports.allSatisfy { $0.error == nil && $0.path == "/v1/metrics" })
        #expect(exports.allSatisfy { $0.authorization == "Bearer hunter3" })
        #expect(!output.stderr.contains("hunter3"), "\(output.stderr)")
        let last = try #require(exports.last)
        #expect(last.total("curlew.bench.requests") == Double(served))
        #expect(last.total("curlew.bench.requests", ["outcome": "ok"]) == Double(json["succeeded"] as? Int ?? -1))
        #expect(last.total("curlew.bench.running") == 0)
        #expect(last.points("curlew.bench.request.duration").first?.count == 1500)
        #expect(!output.stderr.contains("Failed to export"), "\(output.stderr)")
    }

    /// A collector that refuses the exports is reported on stderr; the run and its exit status are its own.
    @Test func aRefusingCollectorIsReportedAndTheRunSucceeds() async throws {
        let receiver = try await OTLPReceiver.start(status: 503)
        defer { receiver.stop() }
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "200", "-c", "4", "--otlp", receiver.baseURL,
                "--otlp-interval", "1s",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            #expect(server.requestsServed == 200)
            #expect(output.stderr.contains("curlew.otlp") && output.stderr.contains("export"), "\(output.stderr)")
            // Server-side: the receiver was asked, and refused.
            #expect(try receiver.exports().contains { $0.refused == 503 })
        }
    }

    @Test(
        arguments: [
            (
                ["--otlp", "ftp://127.0.0.1:4318"], [:],
                "--otlp: the endpoint is not an http:// or https:// URL"
            ),
            (["--otlp", "http://user:hunter2@127.0.0.1:4318"], [:], "OTEL_EXPORTER_OTLP_HEADERS"),
            (["--otlp", "ftp://user:hunter2@127.0.0.1:4318"], [:], "OTEL_EXPORTER_OTLP_HEADERS"),
            (
                ["--otlp", "http://127.0.0.1:4318"], ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"],
                "OTEL_EXPORTER_OTLP_PROTOCOL in the environment asks for OTLP/gRPC"
            ),
            (["--otlp", "http://127.0.0.1:4318", "--otlp-interval", "10ms"], [:], "--otlp-interval must be at least"),
            (
                ["--otlp", "http://127.0.0.1:4318"], ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4319"],
                "OTEL_EXPORTER_OTLP_ENDPOINT in the environment names another endpoint"
            ),
        ] as [([String], [String: String], String)])
    func badOTLPOptionsAreUsageErrorsAndNothingIsSent(
        arguments: [String], environment: [String: String], mention: String
    ) async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run(
                ["bench", server.baseURL + "/small", "-n", "20"] + arguments, environment: environment)
            #expect(output.status == 64)
            #expect(output.stderr.contains(mention), "\(output.stderr)")
            #expect(!output.stderr.contains("hunter2"), "\(output.stderr)")
            #expect(server.requestsServed == 0)
        }
    }
}
#endif
