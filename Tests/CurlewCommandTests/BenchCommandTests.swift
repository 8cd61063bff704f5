import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Histogram
import Testing

@testable import curlew

@Suite struct BenchCommandTests {
    @Test(arguments: [(1000, 64), (7, 64), (1, 1)])
    func sendsExactlyTheRequestedNumberOfRequests(requests: Int, connections: Int) async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", String(requests), "-c", String(connections), "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            // Counted by the server, not by the command.
            #expect(server.requestsServed == requests)
            let json = try output.json()
            #expect(json["requests"] as? Int == requests)
            #expect(json["succeeded"] as? Int == requests)
            #expect((json["statusCodes"] as? [String: Int])?["200"] == requests)
        }
    }

    @Test(arguments: ["poll", "socket-action"])
    func eitherLoopDriverSendsExactlyTheRequestedNumberOfRequests(driver: String) async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "500", "-c", "32", "--loop-driver", driver, "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            #expect(server.requestsServed == 500)
            #expect(try output.json()["succeeded"] as? Int == 500)
        }
    }

    /// The Dispatch loop (`--event-loop dispatch`), its workers on the loops' queues: every request counted by the
    /// server, over more connections than one multi handle takes (two parts), and the JSON names the loop.
    @Test func theDispatchLoopSendsExactlyTheRequestedNumberOfRequests() async throws {
        try await withLoopbackServer(threads: 2) { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "2000", "-c", "100", "--loops", "2", "--event-loop",
                "dispatch", "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            #expect(server.requestsServed == 2000)
            let json = try output.json()
            #expect(json["loopDriver"] as? String == "dispatch")
            #expect(json["loops"] as? Int == 2)
            #expect(json["succeeded"] as? Int == 2000)
        }
    }

    /// Without `--loop-driver`, more connections per loop than the libcurl in use's threshold (7.x: 256, 8.x: 64,
    /// `docs/design/0016-libcurl-versions.md`) take the socket-action driver, that many or fewer the poll driver;
    /// the JSON says which ran. The offsets are from that threshold.
    @Test(arguments: [
        (1, nil, "socket-action"), (0, nil, "poll"), (1, "poll", "poll"), (-56, "socket-action", "socket-action"),
    ])
    func theLoopDriverFollowsConnectionsPerLoopUnlessNamed(offset: Int, named: String?, expected: String) async throws {
        let connections = BenchCommand.socketActionAbovePerLoop + offset
        try await withLoopbackServer(threads: 2) { server in
            let output = try await CurlewBinary.run(
                [
                    "bench", server.baseURL + "/small", "-n", String(2 * connections), "-c", String(connections),
                    "--loops", "1",
                    "--json",
                ] + (named.map { ["--loop-driver", $0] } ?? []))
            #expect(output.status == 0, "\(output.stderr)")
            #expect(server.requestsServed == 2 * connections)
            let json = try output.json()
            #expect(json["loopDriver"] as? String == expected)
            #expect(json["succeeded"] as? Int == 2 * connections)
        }
    }

    @Test func jsonSummaryHasEveryDocumentedField() async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "300", "-c", "8", "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            let json = try output.json()
            for key in [
                "url", "method", "connections", "loops", "loopDriver", "requests", "succeeded", "failed", "failures",
                "statusCodes",
                "durationSeconds", "requestsPerSecond", "latencyMicroseconds", "latencyFrom", "bytesSent",
                "bytesReceived", "connectionsOpened", "interrupted", "thresholds", "exitStatus",
            ] {
                #expect(json[key] != nil, "missing \(key)")
            }
            #expect(json["method"] as? String == "GET")
            #expect(json["connections"] as? Int == 8)
            #expect(json["failed"] as? Int == 0)
            #expect(json["latencyFrom"] as? String == "actual")
            let opened = try #require(json["connectionsOpened"] as? Int)
            #expect((1...8).contains(opened))
            #expect(opened == server.acceptedConnections)
            // 300 responses of 100 bytes each plus their headers.
            #expect(try #require(json["bytesReceived"] as? Int) > 300 * 100)
            let latency = try #require(json["latencyMicroseconds"] as? [String: Double])
            let p50 = try #require(latency["p50"]), p90 = try #require(latency["p90"])
            let p99 = try #require(latency["p99"]), p999 = try #require(latency["p99_9"])
            let max = try #require(latency["max"]), mean = try #require(latency["mean"])
            #expect(p50 > 0 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max)
            #expect(mean > 0 && mean <= max)
            // Nothing but the JSON object on stdout.
            #expect(output.stdout.split(separator: "\n").count == 1)
        }
    }

    @Test func postsTheBodyFileAndHeaders() async throws {
        let bodyPath = NSTemporaryDirectory() + "curlew-bench-body-\(UUID().uuidString)"
        try Data(repeating: 0x61, count: 1000).write(to: URL(fileURLWithPath: bodyPath))
        defer { try? FileManager.default.removeItem(atPath: bodyPath) }
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/upload", "-m", "POST", "-H", "X-Trace: abc", "--body-file", bodyPath,
                "-n", "20", "-c", "4", "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            #expect(server.bytesReceived == 20 * 1000)
            let json = try output.json()
            #expect(json["bytesSent"] as? Int == 20 * 1000)
            #expect(json["method"] as? String == "POST")
        }
    }

    @Test func progressIsPlainLinesWhenNotOnATerminal() async throws {
        try await withLoopbackServer { server in
            // A fixed schedule keeps the run cheap and the request count exact: 200/s for 800 ms.
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-d", "800ms", "--rate", "200", "-c", "4", "--progress-interval",
                "100ms",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            #expect(server.requestsServed == 160)
            let progressLines = output.stderr.split(separator: "\n").filter { $0.hasPrefix("progress: ") }
            #expect(progressLines.count >= 3, "\(output.stderr)")
            #expect(!output.stderr.contains("\r"))
            #expect(!output.stderr.contains("\u{1B}"))
            #expect(
                progressLines.allSatisfy { $0.contains("requests") && $0.contains("req/s") && $0.contains("errors") })
            // The interval's own percentiles, once requests completed in it.
            #expect(progressLines.contains { $0.contains("p50 ") && $0.contains("p99 ") }, "\(output.stderr)")
            #expect(output.stdout.contains("requests/s"))
            #expect(output.stdout.contains("p99.9"))
        }
    }

    @Test func rateMeasuresLatencyFromTheIntendedSendTime() async throws {
        try await withLoopbackServer { server in
            // Each response takes 50 ms but one is due every 10 ms on one connection: the backlog grows, and the
            // last requests are about 800 ms late. Latency counted from the actual send would stay near 50 ms.
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/delay/50", "--rate", "100", "-n", "20", "-c", "1", "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            let json = try output.json()
            #expect(json["latencyFrom"] as? String == "intended")
            let latency = try #require(json["latencyMicroseconds"] as? [String: Double])
            #expect(try #require(latency["max"]) > 500_000)
            #expect(try #require(latency["p50"]) > 200_000)
            #expect(server.requestsServed == 20)
        }
    }

    @Test func histogramOutputMergesExactly() async throws {
        let directory = NSTemporaryDirectory() + "curlew-histograms-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withLoopbackServer { server in
            var merged = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
            for (index, count) in [120, 80].enumerated() {
                let path = "\(directory)/run\(index).json"
                let output = try await CurlewBinary.run([
                    "bench", server.baseURL + "/small", "-n", String(count), "-c", "4", "--histogram-out", path,
                    "--no-progress",
                ])
                #expect(output.status == 0, "\(output.stderr)")
                let histogram = try JSONDecoder().decode(
                    Histogram<UInt64>.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
                #expect(histogram.totalCount == UInt64(count))
                merged.add(histogram)
            }
            #expect(merged.totalCount == 200)
            #expect(merged.max > 0)
        }
    }

    @Test func failuresAreCountedByKindAndARunWithoutASuccessExits98() async throws {
        let closedPort = try FreePort.allocate()
        // The latency rule would pass (refusals are fast): a run without a single success fails regardless.
        let output = try await CurlewBinary.run([
            "bench", "http://127.0.0.1:\(closedPort)/", "-n", "5", "-c", "2", "--threshold", "p99<10s", "--json",
        ])
        #expect(output.status == 98, "\(output.stderr)")
        #expect(try output.json()["exitStatus"] as? Int == 98)
        let json = try output.json()
        #expect(json["requests"] as? Int == 5)
        #expect(json["failed"] as? Int == 5)
        #expect((json["failures"] as? [String: Int])?["connectionRefused"] == 5)
    }

    @Test func httpErrorStatusesCountAsFailures() async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/status/503", "-n", "10", "-c", "2", "--json",
            ])
            #expect(output.status == 98)
            let json = try output.json()
            #expect(json["failed"] as? Int == 10)
            #expect((json["failures"] as? [String: Int])?["http5xx"] == 10)
            #expect((json["statusCodes"] as? [String: Int])?["503"] == 10)
        }
    }

    @Test func embeddedServerRunsWithoutAURL() async throws {
        let output = try await CurlewBinary.run(["bench", "-n", "200", "-c", "4", "--json"])
        #expect(output.status == 0, "\(output.stderr)")
        let json = try output.json()
        #expect(json["requests"] as? Int == 200)
        let server = try #require(json["embeddedServer"] as? [String: Int])
        #expect(server["requests"] == 200)
        #expect((json["url"] as? String)?.hasPrefix("http://127.0.0.1:") == true)
    }

    @Test(arguments: [
        (["bench", "-c", "0"], "-c/--connections"),
        // Each of these three trapped: a pool, a worker count and a loop share sized from it overflowed.
        (["bench", "-c", "9223372036854775807"], "-c/--connections: at most 100000 per process"),
        (["bench", "-c", "100001"], "-c/--connections: at most 100000 per process"),
        (["bench", "-c", "9223372036854775807", "--shard", "0/4"], "-c/--connections: at most 100000 per process"),
        (["bench", "--loops", "9223372036854775807"], "--loops must be from 1 to 4096"),
        // A shard whose share of the requests is none sent nothing and failed its thresholds for want of data.
        (["bench", "-n", "2", "-c", "4", "--shard", "3/4"], "2 requests cannot be shared by 4 shards"),
        (["bench", "-n", "5", "-d", "1s"], "not both"),
        (["bench", "-d", "ten"], "'ten' is invalid"),
        (["bench", "--rate", "-3"], "--rate"),
        (["bench", "-H", "NoColon", "http://127.0.0.1:1/"], "Name: value"),
        (["bench", "ftp://127.0.0.1/", "-n", "1"], "ftp://"),
        (["bench", "--body-file", "/nonexistent/body", "http://127.0.0.1:1/"], "/nonexistent/body"),
        (["bench", "--http2", "--h2c"], "exclude"),
        (["bench", "--loop-driver", "epoll"], "--loop-driver"),
        (["bench", "--event-loop", "epoll"], "--event-loop"),
        (["bench", "--event-loop", "dispatch", "--loop-driver", "poll"], "--event-loop thread"),
        (["frobnicate"], "frobnicate"),
        (["bench", "--threshold", "p99<20"], "needs a unit"),
        (["bench", "--threshold", "errors<1"], "percentage"),
        // Late requests are the open model's: a closed-model run has no schedule to be late for.
        (["bench", "-n", "5", "--threshold", "late<1%"], "there is no schedule without a rate (--rate"),
        (["bench", "--stages", "10s:fast"], "neither requests per second"),
        (["bench", "--stages", "2s:0rps"], "the stages plan no requests"),
        (["bench", "--stages", "1s:10rps", "--rate", "5"], "not both"),
        (["bench", "--stages", "1s:10rps", "-n", "5"], "drop -n/-d"),
        (["bench", "--stages", "1s:4c", "-c", "8"], "drop -c"),
        (["bench", "--targets", "/nonexistent/targets"], "/nonexistent/targets"),
        (["bench", "--targets", "/dev/null", "http://127.0.0.1:1/"], "not both"),
        (["bench", "--seed", "3"], "--targets-order random"),
        (["bench", "--check", "status 200"], "expected `in`"),
        (["bench", "--check", "body ~ \"[\""], "invalid regular expression"),
        (["bench", "--check", "json user exists"], "a path such as .user.id"),
        (["bench", "--check-body-limit", "0"], "--check-body-limit"),
        (["bench", "--threshold", "check0>99%"], "unknown metric"),
    ])
    func badArgumentsExplainThemselves(arguments: [String], mention: String) async throws {
        let output = try await CurlewBinary.run(arguments)
        // ArgumentParser's usage-error status (EX_USAGE).
        #expect(output.status == 64)
        #expect(output.stderr.contains(mention), "stderr: \(output.stderr)")
    }

    /// A threshold on a check that is not given (`check2` with one `--check`, `checks` with none) passed the
    /// argument checks, ran the whole load and then failed for "no data". It is a usage error before anything is
    /// sent, as k6 refuses a threshold on a metric that does not exist.
    @Test(arguments: [
        (["--check", "status in 200", "--threshold", "check2>99%"], "\"check2>99%\": there is no check 2 (1 given)"),
        (["--threshold", "p99<1s,checks>99%"], "\"checks>99%\": there is no check to measure"),
    ])
    func aThresholdOnACheckNotGivenIsAUsageErrorAndNothingIsSent(options: [String], mention: String) async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run(
                ["bench", server.baseURL + "/small", "-n", "20", "--no-progress"] + options)
            #expect(output.status == 64)
            #expect(output.stderr.contains(mention), "\(output.stderr)")
            #expect(server.requestsServed == 0)
        }
    }

    @Test func progressRedrawsOneLineOnATerminal() async throws {
        // script(1) gives the command a pseudo-terminal; its transcript is what the terminal received.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { return }
        try await withLoopbackServer { server in
            let binary = try CurlewBinary.path()
            let command = "\(binary) bench \(server.baseURL)/small -d 500ms --rate 200 -c 2 --progress-interval 100ms"
            let output = try await CurlewBinary.runProgram(["/usr/bin/script", "-qec", command, "/dev/null"])
            #expect(output.status == 0, "\(output.stdout)")
            #expect(output.stdout.contains("\r\u{1B}[2K"))
            #expect(!output.stdout.contains("progress: "))
            #expect(output.stdout.contains("requests/s"))
        }
    }

    @Test func speaksHTTP2OverTLSAndCleartext() async throws {
        let nginx = try await NginxServer.shared()
        let tls = try await CurlewBinary.run([
            "bench", nginx.httpsBaseURL + "/small", "--http2", "--cacert", nginx.caFile, "-n", "200", "-c", "16",
            "--json",
        ])
        #expect(tls.status == 0, "\(tls.stderr)")
        let tlsJSON = try tls.json()
        #expect(tlsJSON["succeeded"] as? Int == 200)
        // Multiplexed: far fewer connections than requests.
        #expect(try #require(tlsJSON["connectionsOpened"] as? Int) < 100)

        let h2c = try await CurlewBinary.run([
            "bench", nginx.h2cBaseURL + "/small", "--h2c", "-n", "50", "-c", "4", "--json",
        ])
        #expect(h2c.status == 0, "\(h2c.stderr)")
        #expect(try h2c.json()["succeeded"] as? Int == 50)

        // Without --cacert the test CA is not trusted: every request fails as a TLS error.
        let untrusted = try await CurlewBinary.run([
            "bench", nginx.httpsBaseURL + "/small", "--http2", "-n", "3", "-c", "1", "--json",
        ])
        #expect((try untrusted.json()["failures"] as? [String: Int])?["tls"] == 3)
    }
}
