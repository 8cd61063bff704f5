import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Testing

/// `curlew compare`: a run against a slower server is flagged by `--fail-if`, two runs of the same server are not,
/// and printed summaries compare without intervals.
@Suite struct CompareCommandTests {
    @Test func aSlowerServerIsFlaggedAndTwoRunsOfTheSameServerAreNot() async throws {
        let server = try await LoopbackServer.start()
        let directory = NSTemporaryDirectory() + "curlew-compare-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func bench(_ route: String, _ name: String) async throws -> CommandOutput {
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + route, "-n", "300", "-c", "4", "--interval", "100ms", "--output-dir",
                directory + "/" + name, "--no-progress", "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
            return output
        }
        // 5 ms of server time dominates the loopback's own noise; the slow run adds 45 ms more. (`make test` runs
        // this suite in a process of its own: under the main run's load the server's scheduling swamped both.)
        let base = try await bench("/delay/5", "base")
        _ = try await bench("/delay/5", "again")
        _ = try await bench("/delay/50", "slow")
        #expect(server.requestsServed == 900, "the server served every request of the three runs")

        let flagged = try await CurlewBinary.run([
            "compare", directory + "/base", directory + "/slow", "--fail-if", "p50 +10%", "--fail-if", "p99.9 +500%",
            "--json",
        ])
        #expect(flagged.status == 99, "\(flagged.stdout)\n\(flagged.stderr)")
        let result = try flagged.json()
        #expect(result["failed"] as? [String] == ["p50 +10%"])
        let changes = try #require(result["changes"] as? [[String: Any]])
        let p50 = try #require(changes.first { $0["metric"] as? String == "p50" })
        #expect((p50["change"] as? Double ?? 0) > 1, "50 ms against 5 ms: \(p50)")
        #expect((p50["low"] as? Double ?? 0) > 0.5, "the interval of the change is well above no change: \(p50)")
        let rps = try #require(changes.first { $0["metric"] as? String == "rps" })
        #expect((rps["change"] as? Double ?? 0) < -0.4 && rps["high"] as? Double != nil, "\(rps)")

        // The histograms' intervals cover sampling, not a machine that slows down between two runs (seen: +8 % at
        // p50 on a quiet machine), so the gate for the same server is the coarse one a noisy CI would use.
        let same = try await CurlewBinary.run([
            "compare", directory + "/base", directory + "/again", "--fail-if", "p50 +50%", "--fail-if", "rps -50%",
        ])
        #expect(same.status == 0, "two runs of one server are not a regression:\n\(same.stdout)")
        #expect(same.stdout.contains("p50") && same.stdout.contains("interval"))

        // Printed summaries: the change, without an interval.
        let summaryFile = directory + "/base.json"
        try base.stdout.write(toFile: summaryFile, atomically: true, encoding: .utf8)
        let printed = try await CurlewBinary.run(["compare", summaryFile, directory + "/slow", "--json"])
        #expect(printed.status == 0, "\(printed.stderr)")
        let printedChanges = try #require(try printed.json()["changes"] as? [[String: Any]])
        #expect(printedChanges.allSatisfy { $0["low"] == nil }, "\(printedChanges)")

        let bad = try await CurlewBinary.run(["compare", summaryFile, summaryFile, "--fail-if", "p42 +10%"])
        #expect(bad.status == 64 && bad.stderr.contains("METRIC"), "\(bad.stderr)")
        let missing = try await CurlewBinary.run(["compare", directory + "/nothing", summaryFile])
        #expect(missing.status == 1 && missing.stderr.contains("does not exist"), "\(missing.stderr)")
        try await server.shutdown()
    }
}
