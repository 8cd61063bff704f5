import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Testing

/// Thresholds, targets files, load shapes and interval logs, checked against what the servers saw.
extension BenchCommandTests {
    @Test func passingThresholdsExitZeroAndAFailingOneExits99() async throws {
        try await withLoopbackServer { server in
            let passing = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "200", "-c", "4", "--threshold", "p99<10s,errors<1%",
                "--threshold", "2xx>=100%", "--json",
            ])
            #expect(passing.status == 0, "\(passing.stderr)")
            let results = try #require(try passing.json()["thresholds"] as? [[String: Any]])
            #expect(results.map { $0["threshold"] as? String } == ["p99<10s", "errors<1%", "2xx>=100%"])
            #expect(results.allSatisfy { $0["passed"] as? Bool == true })
            #expect(results[1]["actual"] as? Double == 0)

            let failing = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "200", "-c", "4", "--threshold", "errors<1%",
                "--threshold", "rps>100000000", "--no-progress",
            ])
            #expect(failing.status == 99, "\(failing.stderr)")
            #expect(failing.stdout.contains("passed  errors<1%"))
            #expect(failing.stdout.contains("FAILED  rps>100000000"))
            #expect(failing.stdout.contains("exit status 99"))
            #expect(server.requestsServed == 400)
        }
    }

    @Test func errorRateThresholdCountsHTTPErrors() async throws {
        try await withLoopbackServer { server in
            // 503s only: the run fails as a whole (98) before the thresholds are considered, but they are still
            // evaluated and reported.
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/status/503", "-n", "20", "-c", "2", "--threshold", "5xx<=100%",
                "--threshold", "errors<50%", "--json",
            ])
            #expect(output.status == 98)
            let results = try #require(try output.json()["thresholds"] as? [[String: Any]])
            #expect(results[0]["passed"] as? Bool == true)
            #expect(results[1]["passed"] as? Bool == false)
            #expect(results[1]["actual"] as? Double == 100)
        }
    }

    /// Each response takes 50 ms and one is due every 10 ms on one connection: the connection, not the server, sets
    /// the pace, and the summary says so (its latency still counts from the schedule). With a connection for every
    /// request due in the next second the same schedule sends nothing late, and says that too; a closed-model run
    /// has no schedule to be late for.
    @Test func anOpenModelRunReportsTheRequestsItSentLateForWantOfAConnection() async throws {
        try await withLoopbackServer { server in
            let short = try await CurlewBinary.run([
                "bench", server.baseURL + "/delay/50", "--rate", "100", "-n", "10", "-c", "1", "--json",
                "--threshold", "late<=100%",
            ])
            #expect(short.status == 0, "\(short.stderr)")
            let json = try short.json()
            let late = try #require(json["lateRequests"] as? Int)
            #expect(late > 0 && late < 10)
            let lateness = try #require(json["maxLatenessMicroseconds"] as? Double)
            let latency = try #require(json["latencyMicroseconds"] as? [String: Double])
            #expect(lateness > 0 && lateness <= (latency["max"] ?? 0))
            let threshold = try #require((json["thresholds"] as? [[String: Any]])?.first)
            #expect(abs((threshold["actual"] as? Double ?? 0) - Double(late) * 10) < 1e-9)

            let text = try await CurlewBinary.run([
                "bench", server.baseURL + "/delay/50", "--rate", "100", "-n", "10", "-c", "1", "--no-progress",
            ])
            #expect(text.status == 0, "\(text.stderr)")
            let lateLine = text.stdout.split(separator: "\n").first { $0.hasPrefix("late ") }
            #expect(lateLine?.contains("sent after their scheduled time") == true, "\(text.stdout)")
            #expect(lateLine?.contains("raise -c") == true)

            let ample = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "--rate", "20", "-n", "30", "-c", "20", "--json",
            ])
            #expect(ample.status == 0, "\(ample.stderr)")
            let onTime = try ample.json()
            #expect(onTime["lateRequests"] as? Int == 0)
            #expect(onTime["maxLatenessMicroseconds"] as? Double == 0)

            let closed = try await CurlewBinary.run(["bench", server.baseURL + "/small", "-n", "10", "--json"])
            #expect(try closed.json()["lateRequests"] == nil)
        }
    }

    private static func writeTemporary(_ text: String, name: String) throws -> String {
        let directory = NSTemporaryDirectory() + "curlew-targets-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(arguments: ["json", "text"])
    func targetsFileRequestsAreSentRoundRobin(format: String) async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let base = nginx.httpBaseURL + marker
        let text =
            format == "json"
            ? """
            {"url": "\(base)a"}
            {"method": "POST", "url": "\(base)b", "headers": {"Content-Type": "text/plain"}, "body": "hello"}
            {"method": "DELETE", "url": "\(base)c", "headers": {"X-Reason": "test"}}
            """
            : """
            GET \(base)a

            POST \(base)b
            Content-Type: text/plain
            @body.txt

            DELETE \(base)c
            X-Reason: test
            """
        let path = try Self.writeTemporary(text, name: "targets.\(format)")
        try "hello".write(
            toFile: (path as NSString).deletingLastPathComponent + "/body.txt", atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }

        let output = try await CurlewBinary.run(["bench", "--targets", path, "-n", "90", "-c", "4", "--json"])
        #expect(output.status == 0, "\(output.stderr)")
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 90)
        #expect(hits.count == 90)
        // Counted by nginx: each target a third, each with its own method.
        #expect(hits.filter { $0.uri == marker + "a" && $0.method == "GET" }.count == 30)
        #expect(hits.filter { $0.uri == marker + "b" && $0.method == "POST" }.count == 30)
        #expect(hits.filter { $0.uri == marker + "c" && $0.method == "DELETE" }.count == 30)
        let targets = try #require(try output.json()["targets"] as? [[String: Any]])
        #expect(targets.map { $0["url"] as? String } == ["a", "b", "c"].map { base + $0 })
        #expect(targets.map { $0["requests"] as? Int } == [30, 30, 30])
        #expect(try output.json()["bytesSent"] as? Int == 30 * 5)
    }

    @Test func unwritableOutputFilesFailBeforeAnyRequestIsSent() async throws {
        try await withLoopbackServer { server in
            for option in ["--report", "--hdr-log"] {
                let output = try await CurlewBinary.run([
                    "bench", server.baseURL + "/small", "-n", "50", option, "/nonexistent/dir/out", "--no-progress",
                ])
                #expect(output.status == 1)
                #expect(output.stderr.contains("/nonexistent/dir/out"), "\(output.stderr)")
            }
            #expect(server.requestsServed == 0)
        }
    }

    @Test func badTargetsFilesAreUsageErrorsNamingTheLine() async throws {
        let path = try Self.writeTemporary(
            "{\"url\": \"http://127.0.0.1:1/\"}\n{\"url\": \"ftp://127.0.0.1/\"}\n", name: "bad.json")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let output = try await CurlewBinary.run(["bench", "--targets", path, "-n", "1"])
        #expect(output.status == 64)
        #expect(output.stderr.contains("target 2"), "\(output.stderr)")
        #expect(output.stderr.contains("ftp://"))
    }

    @Test func hdrLogIsReadBackByHdrHistogramsPythonReader() async throws {
        let logPath = NSTemporaryDirectory() + "curlew-\(UUID().uuidString).hlog"
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "--rate", "400", "-d", "1s", "-c", "8", "--hdr-log", logPath,
                "--interval", "200ms", "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            let json = try output.json()
            #expect(json["hdrLog"] as? String == logPath)
            let reader = """
                import sys
                from hdrh.histogram import HdrHistogram
                from hdrh.log import HistogramLogReader
                reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 60000000, 3))
                total, covered, merged = 0, 0.0, HdrHistogram(1, 60000000, 3)
                while True:
                    h = reader.get_next_interval_histogram()
                    if h is None: break
                    total += h.get_total_count(); merged.add(h)
                    covered += (h.get_end_time_stamp() - h.get_start_time_stamp()) / 1000
                print(total, int(covered * 1000), merged.get_max_value())
                """
            let read = try await CurlewBinary.runProgram(["python3", "-c", reader, logPath])
            #expect(read.status == 0, "\(read.stderr)")
            let fields = read.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            try #require(fields.count == 3, "\(read.stdout)")
            // The independent reader's totals equal the summary's.
            #expect(fields[0] == 400)
            #expect(fields[0] == json["requests"] as? Int)
            // The intervals cover the run, give or take an empty last sliver.
            let duration = try #require(json["durationSeconds"] as? Double)
            #expect(
                abs(Double(fields[1]) / 1000 - duration) <= 0.21, "intervals cover \(fields[1]) ms of \(duration) s")
            #expect(try String(contentsOfFile: logPath, encoding: .utf8).contains("\n0.000,"))
            let max = try #require((json["latencyMicroseconds"] as? [String: Double])?["max"])
            // Same bucket: HdrHistogram reports a bucket's highest equivalent value, within 0.1 %.
            #expect(abs(Double(fields[2]) - max) <= max * 0.001 + 1)
        }
    }
}

extension BenchCommandTests {
    /// Slurm (scancel, a time limit) and Kubernetes (pod deletion) stop a job with SIGTERM: the shard ends like
    /// after Ctrl-C and still writes its results, so the merge can say what was done.
    @Test func sigtermStopsTheRunAndStillWritesTheShardsResults() async throws {
        let directory = NSTemporaryDirectory() + "curlew-sigterm-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withLoopbackServer { server in
            let command = try CurlewBinary.start([
                "bench", server.baseURL + "/small", "-d", "60s", "--rate", "200", "-c", "4", "--progress-interval",
                "100ms",
                "--shard", "1/2", "--output-dir", directory, "--json",
            ])
            try await waitUntil(timeout: .seconds(20), "a progress line") {
                command.currentStderr.contains("progress: ")
            }
            command.signal(SIGTERM)
            let output = try await command.finish(timeout: .seconds(20))
            #expect(output.status == 130)
            #expect(try output.json()["interrupted"] as? Bool == true)
            let written =
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: directory + "/bench-shard-1-of-2.json")))
                as? [String: Any]
            #expect(written?["interrupted"] as? Bool == true)
            #expect(written?["requests"] as? Int == server.requestsServed)
            #expect(FileManager.default.fileExists(atPath: directory + "/bench-shard-1-of-2.hlog"))
        }
    }

    @Test func ctrlCStopsTheRunPrintsTheSummaryAndExits130() async throws {
        try await withLoopbackServer { server in
            let command = try CurlewBinary.start([
                "bench", server.baseURL + "/small", "-d", "60s", "--rate", "200", "-c", "4", "--progress-interval",
                "100ms",
                "--threshold", "p99<10s", "--json",
            ])
            try await waitUntil(timeout: .seconds(20), "a progress line") {
                command.currentStderr.contains("progress: ")
            }
            command.signal(SIGINT)
            let output = try await command.finish(timeout: .seconds(20))
            #expect(output.status == 130)
            let json = try output.json()
            #expect(json["interrupted"] as? Bool == true)
            #expect(json["exitStatus"] as? Int == 130)
            // Every request sent was counted, and the server saw exactly those.
            #expect(json["requests"] as? Int == server.requestsServed)
        }
    }
}

/// Runs whose assertions are about timing (arrivals per second within 5 %), one at a time; `make test` runs this
/// suite in a process of its own, so the rest of the tests do not load the machine meanwhile.
@Suite(.serialized) struct BenchStagesCommandTests {
    @Test func openModelStagesSendThePlannedArrivalsEachSecond() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        // 0 → 300 requests/s over 3 s: 50, 150 and 250 requests in the three seconds, 450 in all.
        let output = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "x", "--stages", "3s:300rps", "-c", "32", "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        let json = try output.json()
        #expect(json["requests"] as? Int == 450)
        #expect(json["latencyFrom"] as? String == "intended")
        #expect(json["stages"] as? String == "3s:300rps")
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 450)
        #expect(hits.count == 450)
        // The plan sends request k at √(k / 50) s. The server's clock is offset from the plan by the time to reach
        // it (and a slow first connection): take the median arrival-minus-plan, so neither a late start nor one
        // early or late request can shift every window.
        let arrivals = hits.map(\.time).sorted()
        let offsets = arrivals.enumerated().map { $0.element - (Double($0.offset) / 50).squareRoot() }.sorted()
        let offset = offsets[offsets.count / 2]
        for (second, planned) in [(1, 150.0), (2, 250.0)] {
            let arrived = arrivals.filter { $0 - offset >= Double(second) && $0 - offset < Double(second + 1) }.count
            #expect(
                abs(Double(arrived) - planned) <= planned * 0.05,
                "second \(second): \(arrived) arrivals, planned \(planned)")
        }
    }

    @Test func closedModelStagesRampTheConnections() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        // 0 → 4 workers over 1 s, then 4 for 1 s: worker k starts once the level passes k (k / 4 s).
        let output = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "x", "--stages", "1s:4c,1s:4c", "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        let json = try output.json()
        let requests = try #require(json["requests"] as? Int)
        #expect(json["connections"] as? Int == 4)
        #expect(json["latencyFrom"] as? String == "actual")
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: requests)
        #expect(hits.count == requests)
        // Four connections, opened one by one as the level passes 1, 2, 3 (at 0.25, 0.5, 0.75 s): without the ramp
        // all four would open within milliseconds.
        #expect(Set(hits.map(\.connection)).count == 4)
        var firstSeen: [Int: Double] = [:]
        for hit in hits where firstSeen[hit.connection] == nil || hit.time < firstSeen[hit.connection]! {
            firstSeen[hit.connection] = hit.time
        }
        let openings = firstSeen.values.sorted()
        #expect(openings.last! - openings.first! > 0.4, "connections opened at \(openings)")
    }
}

extension BenchCommandTests {
    /// Summaries, reports and shard records are pasted into tickets and kept by CI: a password or a key typed into a
    /// URL goes to the server, and into none of them.
    @Test func theRunsOutputNamesItsURLsWithoutTheirPasswordsOrKeys() async throws {
        let server = try await RecordingServer.start()
        let base = server.baseURL.replacingOccurrences(of: "http://", with: "http://ada:s3cr3t-pw@")
        let directory = NSTemporaryDirectory() + "curlew-bench-redaction-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let targets = directory + "/targets"
        try "GET \(base)/a?api_key=k3y-one&page=2\n\nGET \(base)/b?token=k3y-two\n".write(
            toFile: targets, atomically: true, encoding: .utf8)

        let single = try await CurlewBinary.run([
            "bench", base + "/s?api_key=k3y-three&page=1", "-n", "4", "-c", "1", "--no-progress",
            "--report", directory + "/single.html", "--output-dir", directory + "/shards",
        ])
        let listed = try await CurlewBinary.run([
            "bench", "--targets", targets, "-n", "4", "-c", "1", "--json", "--report", directory + "/targets.html",
        ])
        try await server.shutdown()
        #expect(single.status == 0, "\(single.stderr)")
        #expect(listed.status == 0, "\(listed.stderr)")

        // The server got every credential as typed.
        let requests = server.requests
        let basic = "Basic " + Data("ada:s3cr3t-pw".utf8).base64EncodedString()
        #expect(requests.count == 8)
        #expect(requests.allSatisfy { $0.header("Authorization") == basic })
        #expect(
            Set(requests.map(\.uri)) == [
                "/s?api_key=k3y-three&page=1", "/a?api_key=k3y-one&page=2", "/b?token=k3y-two",
            ])

        // The output names the URLs, redacted: the printed first line, the summary's targets, and no file or stream
        // repeats a secret.
        let shownBase = "http://ada:<redacted>@127.0.0.1:\(server.port)"
        #expect(single.stdout.contains("curlew bench \(shownBase)/s?api_key=<redacted>&page=1"), "\(single.stdout)")
        let urls = try #require(try listed.json()["targets"] as? [[String: Any]]).map { $0["url"] as? String }
        #expect(urls == ["\(shownBase)/a?api_key=<redacted>&page=2", "\(shownBase)/b?token=<redacted>"])
        var written = [single.stdout, single.stderr, listed.stdout, listed.stderr]
        let enumerator = try #require(FileManager.default.enumerator(atPath: directory))
        var files: [String] = []
        while let file = enumerator.nextObject() as? String {
            if enumerator.fileAttributes?[.type] as? FileAttributeType == .typeRegular, file != "targets" {
                files.append(file)
            }
        }
        #expect(files.contains("single.html") && files.contains("targets.html"))
        #expect(files.contains { $0.hasPrefix("shards/") && $0.hasSuffix(".json") }, "\(files)")
        for file in files {
            written.append(try String(contentsOfFile: directory + "/" + file, encoding: .isoLatin1))
        }
        for (index, text) in written.enumerated() {
            for secret in ["s3cr3t-pw", "k3y-one", "k3y-two", "k3y-three"] {
                #expect(!text.contains(secret), "output \(index) repeats \(secret)")
            }
        }
    }
    /// A targets file's errors quote its lines and URLs: without their passwords and keys.
    @Test func aTargetsFilesErrorsNameItsURLsRedacted() async throws {
        let directory = NSTemporaryDirectory() + "curlew-bench-target-errors-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let lines = [
            "get http://ada:pw-one@127.0.0.1:1/a?api_key=k3y-one",  // not a METHOD
            "GET ftp://ada:pw-two@127.0.0.1/?token=k3y-two",  // refused scheme
            "GET http://127.0.0.1:1/ http://ada:pw-one@127.0.0.1:1/?token=k3y-two",  // two URLs
            "GET http://127.0.0.1:1/\nAuthorization Bearer k3y-one",  // a header line without its colon
        ]
        for (index, line) in lines.enumerated() {
            let path = directory + "/targets-\(index)"
            try (line + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            let output = try await CurlewBinary.run(["bench", "--targets", path, "-n", "1"])
            #expect(output.status == 64, "\(output.stderr)")
            #expect(
                output.stderr.contains(index == 3 ? "line 2: expected 'Name: value'" : "<redacted>"), "\(output.stderr)"
            )
            for secret in ["pw-one", "k3y-one", "pw-two", "k3y-two"] {
                #expect(!output.stderr.contains(secret) && !output.stdout.contains(secret), "\(output.stderr)")
            }
        }
    }
}
