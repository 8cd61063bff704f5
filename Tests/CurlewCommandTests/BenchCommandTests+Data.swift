import CurlewTestSupport
import Foundation
import Testing

/// `--data` and placeholders: what the servers received, request by request.
extension BenchCommandTests {
    private static func writeDataFile(_ text: String, name: String) throws -> String {
        let directory = NSTemporaryDirectory() + "curlew-data-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func dataRowsOnceSendEveryRowExactlyOnceWithItsPathAndHeader() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let rows = (1...40).map { ("u\($0)", "name-\($0)") }
        let csv = "id,name\n" + rows.map { "\($0.0),\"\($0.1)\"" }.joined(separator: "\n") + "\n"
        let path = try Self.writeDataFile(csv, name: "users.csv")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }

        let output = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "{{id}}", "-H", "X-Test-Tag: {{name}}", "--data", path,
            "--data-rows", "once", "--seed", "3", "-c", "4", "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(try output.json()["requests"] as? Int == 40)
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 40)
        #expect(hits.count == 40)
        #expect(Set(hits.map { "\($0.uri) \($0.tag)" }) == Set(rows.map { "\(marker)\($0.0) \($0.1)" }))
    }

    /// Rows cycled over a count that is not a multiple of them, through the requests made up front: request k uses
    /// row k mod 7 (shuffled by the seed), so each row is sent 14 or 15 times, counted by nginx.
    @Test func cycledRowsAreEachSentInTurn() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let path = try Self.writeDataFile("id\n" + (0..<7).map { "r\($0)" }.joined(separator: "\n"), name: "ids.csv")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let output = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "{{id}}", "--data", path, "--seed", "5", "-n", "100", "-c", "3",
            "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        let json = try output.json()
        #expect(json["requests"] as? Int == 100)
        #expect(json["targets"] == nil, "the rows are one request, not targets counted apart")
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 100)
        #expect(hits.count == 100)
        let perRow = Dictionary(grouping: hits, by: \.uri).mapValues(\.count)
        #expect(Set(perRow.keys) == Set((0..<7).map { marker + "r\($0)" }))
        #expect(perRow.values.sorted() == [14, 14, 14, 14, 14, 15, 15])
    }

    @Test func shardsOfARunWithDataRowsOnceShareTheRowsByRequestNumber() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let path = try Self.writeDataFile("id\n" + (0..<30).map(String.init).joined(separator: "\n"), name: "ids.csv")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        for shard in ["0/2", "1/2"] {
            let output = try await CurlewBinary.run([
                "bench", nginx.httpBaseURL + marker + "{{id}}", "-H", "X-Test-Tag: shard-\(shard.prefix(1))",
                "--data", path, "--data-rows", "once", "--shard", shard, "-c", "2", "--json",
            ])
            #expect(output.status == 0, "\(output.stderr)")
        }
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 30)
        #expect(hits.count == 30)
        // Row k goes to shard k mod 2.
        for hit in hits {
            let row = try #require(Int(hit.uri.dropFirst(marker.count)))
            #expect(hit.tag == "shard-\(row % 2)")
        }
        #expect(Set(hits.map(\.uri)) == Set((0..<30).map { marker + String($0) }))
    }

    @Test func seqIsUniqueAndCompleteAcrossWorkers() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let output = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "{{seq}}", "-n", "120", "-c", "8", "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 120)
        #expect(hits.map(\.uri).sorted() == (0..<120).map { marker + String($0) }.sorted())
    }

    @Test func bodiesAndHeadersAreFilledFromJSONLines() async throws {
        let server = try await RecordingServer.start()
        let lines = (1...6).map { "{\"id\": \($0), \"name\": \"n\\\"\($0)\"}" }.joined(separator: "\n")
        let data = try Self.writeDataFile(lines, name: "rows.jsonl")
        let directory = (data as NSString).deletingLastPathComponent
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let body = directory + "/body.json"
        try "{\"id\": {{id}}, \"seq\": {{seq}}, \"n\": {{randInt 10 20}}}".write(
            toFile: body, atomically: true, encoding: .utf8)

        let output = try await CurlewBinary.run([
            "bench", server.baseURL + "/echo/{{id}}", "-m", "POST", "-H", "X-Name: {{name}}", "-H",
            "X-Request-Id: {{uuid}}", "--body-file", body, "--data", data, "--data-rows", "once", "-c", "1",
        ])
        try await server.shutdown()
        #expect(output.status == 0, "\(output.stderr)")
        let requests = server.requests
        #expect(requests.count == 6)
        for (index, request) in requests.enumerated() {
            #expect(request.method == "POST")
            #expect(request.uri == "/echo/\(index + 1)")
            #expect(request.header("X-Name") == "n\"\(index + 1)")
            #expect(request.header("X-Request-Id")?.count == 36)
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Int])
            #expect(json["id"] == index + 1)
            #expect(json["seq"] == index)
            #expect((10...20).contains(json["n"] ?? 0))
        }
        #expect(Set(requests.compactMap { $0.header("X-Request-Id") }).count == 6)
    }

    @Test func anUnknownPlaceholderIsAUsageErrorAndNothingIsSent() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let path = try Self.writeDataFile("id\n1\n", name: "ids.csv")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let unknown = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "{{id}}/{{nmae}}", "--data", path, "-n", "5",
        ])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("unknown placeholder {{nmae}} (data columns: id;"), "\(unknown.stderr)")
        let malformed = try await CurlewBinary.run(["bench", nginx.httpBaseURL + marker + "{{seq", "-n", "5"])
        #expect(malformed.status == 64)
        #expect(malformed.stderr.contains("never closed"), "\(malformed.stderr)")
        let onceWithoutData = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "{{seq}}", "--data-rows", "once", "-n", "5",
        ])
        #expect(onceWithoutData.status == 64)
        #expect(onceWithoutData.stderr.contains("--data-rows once needs --data"), "\(onceWithoutData.stderr)")
        // A request that is sent is logged by nginx once it ends; one control request after the failed runs shows
        // the log is current.
        let control = try await CurlewBinary.run(["bench", nginx.httpBaseURL + marker + "control", "-n", "1"])
        #expect(control.status == 0)
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 1)
        #expect(hits.map(\.uri) == [marker + "control"])
    }
}
