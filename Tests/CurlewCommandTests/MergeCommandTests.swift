import CurlewTestSupport
import Foundation
import Testing

/// Sharded runs against nginx, merged: the server's count is the run's, and the merge is exact.
@Suite struct MergeCommandTests {
    private static func scratch() throws -> String {
        let directory = NSTemporaryDirectory() + "curlew-merge-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Runs every shard of a run at once (as a scheduler would) and returns their outputs in shard order.
    private static func runShards(
        _ count: Int, _ arguments: [String], timeout: Duration = .seconds(120)
    ) async throws -> [CommandOutput] {
        try await runShards(count, timeout: timeout) { _ in arguments }
    }

    /// As above, with each shard's own arguments (a header of its own, so the server's log tells the shards apart).
    private static func runShards(
        _ count: Int, timeout: Duration = .seconds(120), _ arguments: (Int) -> [String]
    ) async throws -> [CommandOutput] {
        let commands = try (0..<count).map { index in
            try CurlewBinary.start(arguments(index) + ["--shard", "\(index)/\(count)"])
        }
        var outputs: [CommandOutput] = []
        for command in commands { outputs.append(try await command.finish(timeout: timeout)) }
        return outputs
    }

    @Test func fourShardsSendExactlyTheRequestsAskedAndTheMergeIsExact() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let start = String(Int(Date().timeIntervalSince1970) + 2)
        let outputs = try await Self.runShards(
            4,
            [
                "bench", nginx.httpBaseURL + marker + "x", "-n", "20003", "-c", "16", "--run-id", "merge-test",
                "--start-at", start,
                "--output-dir", directory, "--interval", "250ms", "--no-progress", "--json",
            ])
        for output in outputs { #expect(output.status == 0, "\(output.stderr)") }
        // The remainder of 20,003 / 4 goes to the first three shards.
        #expect(try outputs.map { try $0.json()["requests"] as? Int } == [5001, 5001, 5001, 5000])
        #expect(try outputs.map { try ($0.json()["shard"] as? [String: Int])?["index"] } == [0, 1, 2, 3])
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 20003)
        #expect(hits.count == 20003, "nginx counts exactly the requests asked for")

        let merged = try await CurlewBinary.run(["merge", directory, "--json", "--report", directory + "/merged.html"])
        #expect(merged.status == 0, "\(merged.stderr)")
        let json = try merged.json()
        #expect(json["requests"] as? Int == 20003)
        #expect(json["succeeded"] as? Int == 20003)
        #expect(json["shardsMerged"] as? Int == 4)
        #expect(json["runId"] as? String == "merge-test")
        #expect((json["statusCodes"] as? [String: Int])?["200"] == 20003)

        // Independently: HdrHistogram's Python implementation adds up every interval of every shard's log.
        let python = try await HdrhReference.summingShardLogs(in: directory)
        let latency = try #require(json["latencyMicroseconds"] as? [String: Double])
        #expect(python.total == 20003)
        for key in HdrhReference.keys {
            #expect(
                latency[key] == python.percentiles[key],
                "\(key): merge \(latency[key] ?? -1), hdrh \(python.percentiles[key] ?? -1)")
        }
        // The report plots the merged intervals, one slot per 250 ms of the run.
        let html = try String(contentsOfFile: directory + "/merged.html", encoding: .utf8)
        #expect(html.contains("<svg") && html.contains("4 shards"))
    }

    @Test func aShardedRateSendsTheWholeSchedulesRequestsExactly() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Five seconds ahead, so three processes launched on a busy 2-core machine are all waiting when it comes.
        let start = String(Int(Date().timeIntervalSince1970) + 6)
        // 300 requests/s for 2 s is 600 requests; three shards send every third of the schedule each. Each shard tags
        // its requests with a header (headers are not part of the run's plan), so nginx's log tells the shards apart.
        let outputs = try await Self.runShards(3) { index in
            [
                "bench", nginx.httpBaseURL + marker + "r", "--rate", "300", "-d", "2s", "-c", "6", "-H",
                "X-Test-Tag: shard\(index)", "--start-at", start, "--run-id", "rate", "--output-dir", directory,
                "--no-progress", "--json",
            ]
        }
        for output in outputs {
            #expect(output.status == 0, "\(output.stderr)")
            #expect(!output.stderr.contains("--start-at"), "every shard was waiting for the start: \(output.stderr)")
        }
        #expect(try outputs.map { try $0.json()["requests"] as? Int } == [200, 200, 200])
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 600)
        #expect(hits.count == 600)
        let perShard = Dictionary(grouping: hits, by: \.tag)
        #expect(perShard.keys.sorted() == ["shard0", "shard1", "shard2"])
        #expect(perShard.values.map(\.count) == [200, 200, 200])
        // The shards ran together, not one after another: every shard's first request came before any shard's last
        // (one after another, each shard's two seconds would follow the last's). A machine that stalls a process for a
        // moment shifts its requests but cannot break this, unless the stall lasts the whole run.
        let firsts = perShard.values.compactMap { $0.map(\.time).min() }
        let lasts = perShard.values.compactMap { $0.map(\.time).max() }
        let latestFirst = try #require(firsts.max()), earliestLast = try #require(lasts.min())
        #expect(latestFirst < earliestLast, "a shard began at \(latestFirst), after another ended at \(earliestLast)")
        // The merge's window is the union of the shards' (first start to last end), not one shard's two seconds and
        // not their sum, so its rate is the whole run's. Computed here from each shard's own record, so a machine that
        // stalls one shard for a while lengthens both sides alike instead of failing a fixed rate.
        let shards = try outputs.map { try $0.json() }
        let starts = try shards.map { try #require($0["startedAt"] as? Double) }
        let ends = try zip(shards, starts).map { try #require($0["durationSeconds"] as? Double) + $1 }
        let window = try #require(ends.max()) - (try #require(starts.min()))
        let fastestShard = try shards.map { try #require($0["requestsPerSecond"] as? Double) }.max() ?? 0
        let merged = try await CurlewBinary.run(["merge", directory, "--json"])
        #expect(merged.status == 0, "\(merged.stderr)")
        let summary = try merged.json()
        #expect(summary["requests"] as? Int == 600)
        let mergedDuration = try #require(summary["durationSeconds"] as? Double)
        #expect(abs(mergedDuration - window) < 0.01, "merged \(mergedDuration) s, the shards' union \(window) s")
        let mergedRate = try #require(summary["requestsPerSecond"] as? Double)
        #expect(abs(mergedRate - 600 / window) < 1, "merged \(mergedRate)/s over \(window) s")
        // Overlapping shards that each sent a third make a rate above any one shard's.
        #expect(mergedRate > fastestShard, "merged \(mergedRate)/s, a single shard \(fastestShard)/s")
    }

    @Test func theMergeRefusesAMissingShardAnotherRunAndFailsItsThresholds() async throws {
        let nginx = try await NginxServer.shared()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let url = nginx.httpBaseURL + NginxHit.makeMarker() + "m"
        _ = try await Self.runShards(
            2, ["bench", url, "-n", "40", "-c", "2", "--run-id", "a", "--output-dir", directory, "--no-progress"])

        let failing = try await CurlewBinary.run(["merge", directory, "--threshold", "p50<1us", "--json"])
        #expect(failing.status == 99, "a threshold failed on the merge exits as bench does: \(failing.stderr)")
        #expect(try failing.json()["requests"] as? Int == 40)

        let missing = try await CurlewBinary.run(["merge", directory + "/bench-shard-0-of-2.json"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("1 of 2 shards missing (1/2)"), "\(missing.stderr)")

        let other = directory + "/other"
        _ = try await CurlewBinary.run([
            "bench", url, "-n", "40", "-c", "2", "--run-id", "b", "--output-dir", other, "--shard", "1/2",
            "--no-progress",
        ])
        let mixed = try await CurlewBinary.run([
            "merge", directory + "/bench-shard-0-of-2.json", other + "/bench-shard-1-of-2.json",
        ])
        #expect(mixed.status == 1)
        #expect(mixed.stderr.contains("different runs"), "\(mixed.stderr)")

        // The same run id and plan but other checks: the merge would add up counts of different checks.
        let checked = directory + "/checked"
        _ = try await CurlewBinary.run([
            "bench", url, "-n", "40", "-c", "2", "--run-id", "a", "--output-dir", checked, "--shard", "1/2",
            "--check", "status in 200", "--no-progress",
        ])
        let otherChecks = try await CurlewBinary.run([
            "merge", directory + "/bench-shard-0-of-2.json", checked + "/bench-shard-1-of-2.json",
        ])
        #expect(otherChecks.status == 1)
        #expect(
            otherChecks.stderr.contains("different runs")
                && otherChecks.stderr.contains("checks (none vs [\"status in 200\"])"),
            "\(otherChecks.stderr)")

        let unsharded = try await CurlewBinary.run(["bench", url, "-n", "10", "-c", "2", "--no-progress", "--json"])
        let summaryOnly = directory + "/bench-stdout.json"
        try unsharded.stdout.split(separator: "\n").last.map(String.init)?.write(
            toFile: summaryOnly, atomically: true, encoding: .utf8)
        let notAShard = try await CurlewBinary.run(["merge", summaryOnly])
        #expect(notAShard.status == 1)
        #expect(notAShard.stderr.contains("--output-dir"), "\(notAShard.stderr)")
    }

    /// The `--json` lines shards print are not what merge needs: it says so in one line, whatever the files are
    /// called. Their `--output-dir` files merge, checks included.
    @Test func printedShardSummariesAreNamedAsSuchAndChecksMerge() async throws {
        let nginx = try await NginxServer.shared()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let marker = NginxHit.makeMarker()
        let outputs = try await Self.runShards(
            2,
            [
                "bench", nginx.httpBaseURL + marker + "c", "-n", "40", "-c", "2", "--run-id", "checks",
                "--output-dir", directory, "--no-progress", "--json", "--check", "status in 200",
                "--check", "body contains \"no such text\"",
            ])
        var printed: [String] = []
        for (index, output) in outputs.enumerated() {
            #expect(output.status == 0, "\(output.stderr)")
            let path = directory + "/shard\(index).json"
            try output.stdout.write(toFile: path, atomically: true, encoding: .utf8)
            printed.append(path)
        }
        let refused = try await CurlewBinary.run(["merge"] + printed)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("printed `curlew bench` summary"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--output-dir"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("DecodingError"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")

        let merged = try await CurlewBinary.run(
            ["merge", directory + "/bench-shard-0-of-2.json", directory + "/bench-shard-1-of-2.json", "--json"])
        #expect(merged.status == 0, "\(merged.stderr)")
        let checks = try #require(try merged.json()["checks"] as? [[String: Any]])
        #expect(checks.map { $0["check"] as? String } == ["status in 200", "body contains \"no such text\""])
        #expect(checks.map { $0["passed"] as? Int } == [40, 0])
        #expect(checks.map { $0["failed"] as? Int } == [0, 40])
        #expect(try await NginxHit.read(nginx, marker: marker, atLeast: 40).count == 40)
    }

    /// Shard records written before the command redacted its URLs carry them as typed: the merge names them redacted
    /// too, in its summary and its report.
    @Test func theMergeNamesTheURLOfRecordsWrittenAsTypedRedacted() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withLoopbackServer { server in
            let typed =
                server.baseURL.replacingOccurrences(of: "http://", with: "http://ada:s3cr3t-pw@")
                + "/small?api_key=k3y-m"
            let shards = try await Self.runShards(
                2, ["bench", typed, "-n", "20", "-c", "2", "--run-id", "r", "--output-dir", directory, "--no-progress"])
            for shard in shards { #expect(shard.status == 0, "\(shard.stderr)") }
            // Each record as an earlier version wrote it.
            let shown = typed.replacingOccurrences(of: "s3cr3t-pw", with: "<redacted>")
                .replacingOccurrences(of: "k3y-m", with: "<redacted>")
            for index in 0..<2 {
                let path = directory + "/bench-shard-\(index)-of-2.json"
                let record = try String(contentsOfFile: path, encoding: .utf8)
                let encodedShown = shown.replacingOccurrences(of: "/", with: "\\/")
                let encodedTyped = typed.replacingOccurrences(of: "/", with: "\\/")
                let asTyped = record.replacingOccurrences(of: shown, with: typed)
                    .replacingOccurrences(of: encodedShown, with: encodedTyped)
                #expect(asTyped.contains("s3cr3t-pw"), "the record names the URL: \(record)")
                try asTyped.write(toFile: path, atomically: true, encoding: .utf8)
            }
            let merged = try await CurlewBinary.run(["merge", directory, "--json", "--report", directory + "/m.html"])
            #expect(merged.status == 0, "\(merged.stderr)")
            #expect(try merged.json()["url"] as? String == shown)
            let report = try String(contentsOfFile: directory + "/m.html", encoding: .utf8)
            for text in [merged.stdout, merged.stderr, report] {
                #expect(!text.contains("s3cr3t-pw") && !text.contains("k3y-m"))
            }
        }
    }
}
