import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Testing

@testable import curlew

/// `--prometheus`: an endpoint that cannot be had is a usage error before anything is sent.
extension BenchCommandTests {
    @Test func aPrometheusPortInUseIsAUsageErrorAndNothingIsSent() async throws {
        try await withLoopbackServer { server in
            // The target server's own port: taken, and the server counts whatever is sent.
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "50", "--prometheus", "127.0.0.1:\(server.port)",
            ])
            #expect(output.status == 64)
            #expect(
                output.stderr.contains("--prometheus 127.0.0.1:\(server.port): cannot listen on"), "\(output.stderr)")
            #expect(output.stderr.contains("in use"), "\(output.stderr)")
            #expect(server.requestsServed == 0)
        }
    }

    @Test(arguments: [
        (["--prometheus", "192.0.2.1:9464"], "cannot listen on 192.0.2.1:9464"),
        (["--prometheus", "localhost:http"], "--prometheus"),
        (["--prometheus", "::1:9464"], "--prometheus"),
        (["--prometheus", ":70000"], "--prometheus"),
        (["--prometheus-hold", "5s"], "--prometheus-hold keeps --prometheus's endpoint up"),
    ])
    func badPrometheusOptionsAreUsageErrors(arguments: [String], mention: String) async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run(["bench", server.baseURL + "/small", "-n", "20"] + arguments)
            #expect(output.status == 64)
            #expect(output.stderr.contains(mention), "\(output.stderr)")
            #expect(server.requestsServed == 0)
        }
    }

    @Test(arguments: [
        (":9464", "127.0.0.1", 9464), ("9464", "127.0.0.1", 9464), ("0.0.0.0:80", "0.0.0.0", 80),
        ("[::1]:9464", "::1", 9464), ("localhost:0", "localhost", 0),
    ])
    func prometheusAddressesDefaultToLoopback(text: String, host: String, port: Int) throws {
        let address = try #require(PrometheusAddressArgument(argument: text))
        #expect(address.host == host)
        #expect(address.port == port)
    }

    @Test(arguments: ["", ":", "host:", "[::1]", "[]:1", "::1:9464", ":65536", ":-1", "a:b", ":९"])
    func malformedPrometheusAddressesAreRejected(text: String) {
        #expect(PrometheusAddressArgument(argument: text) == nil)
    }

    /// While the run goes on, a scrape has the counts so far; the hold keeps the endpoint up after it with the
    /// final ones, which are the run's.
    ///
    /// The run is paced over 10 s: a 2 s run ended, in CI's main run, before a scrape (a `curl` process each) under
    /// the other suites' load saw it running.
    @Test func theEndpointServesTheRunAndItsFinalCountsDuringTheHold() async throws {
        try await withLoopbackServer { server in
            let port = try FreePort.allocate()
            let running = try CurlewBinary.start([
                "bench", server.baseURL + "/small", "-n", "3000", "--rate", "300", "-c", "4", "--prometheus",
                ":\(port)", "--prometheus-hold", "60s", "--json", "--no-progress",
            ])
            defer { running.signal(SIGKILL) }
            var live = -1.0
            try await waitUntil(timeout: .seconds(20), "a scrape during the run") {
                guard let samples = try? await Self.scrape(port: port) else { return false }
                if samples.value("curlew_bench_running") == 0 {
                    throw TestSupportError("the 10 s run ended before a scrape saw it running")
                }
                guard let ok = samples.value("curlew_bench_requests_total", ["outcome": "ok"]), ok > 0 else {
                    return false
                }
                live = ok
                return true
            }
            #expect(live > 0 && live < 3000)
            var final: [ExpositionSample] = []
            try await waitUntil(timeout: .seconds(20), "the run to end") {
                guard let samples = try? await Self.scrape(port: port), samples.value("curlew_bench_running") == 0
                else { return false }
                final = samples
                return true
            }
            #expect(final.value("curlew_bench_requests_total", ["outcome": "ok"]) == 3000)
            #expect(final.value("curlew_bench_request_duration_seconds_count") == 3000)
            #expect(final.value("curlew_bench_in_flight") == 0)
            #expect(server.requestsServed == 3000)
            // Still holding, with the summary printed: SIGTERM (or Ctrl-C) cuts the hold short.
            #expect(running.isRunning)
            try await waitUntil(timeout: .seconds(20), "the summary on stdout") {
                (try? String(contentsOfFile: running.stdoutPath, encoding: .utf8))?.hasSuffix("\n") == true
            }
            running.signal(SIGTERM)
            let output = try await running.finish(timeout: .seconds(20))
            // The hold ended by SIGTERM; the exit status is the run's.
            #expect(output.status == 0, "\(output.stderr)")
            #expect(try output.json()["requests"] as? Int == 3000)
        }
    }

    /// A scrape of `/metrics` on 127.0.0.1:`port`, parsed.
    static func scrape(port: Int) async throws -> [ExpositionSample] {
        let output = try await CurlewBinary.runProgram(
            ["curl", "-sf", "--max-time", "5", "http://127.0.0.1:\(port)/metrics"], timeout: .seconds(10))
        guard output.status == 0 else { throw TestSupportError("curl: \(output.status) \(output.stderr)") }
        return try ExpositionSample.parse(output.stdout)
    }
}
