import Testing

@testable import CurlewLoad

@Suite struct BenchTargetsTests {
    @Test func readsJSONLines() throws {
        let text = """
            {"url": "http://a.test/one"}
            # a comment
            {"method": "POST", "url": "http://a.test/two", "headers": {"X-A": "1", "X-B": ["2", "3"]}, "body": "hi"}
            {"method": "PUT", "url": "http://a.test/three", "bodyFile": "bodies/three.json"}
            """
        let targets = try BenchTargetFile.parse(text, directory: "/data")
        #expect(targets.count == 3)
        #expect(targets[0] == BenchTargetSpec(method: "GET", url: "http://a.test/one", headers: [], body: nil))
        #expect(
            targets[1]
                == BenchTargetSpec(
                    method: "POST", url: "http://a.test/two", headers: [("X-A", "1"), ("X-B", "2"), ("X-B", "3")],
                    body: .text("hi")))
        #expect(targets[2].body == .file("/data/bodies/three.json"))
    }

    @Test func readsVegetasTextFormat() throws {
        let text = """
            GET http://a.test/one
            X-Account-ID: 8675309

            # deletes
            DELETE http://a.test/two
            Authorization: Token DEADBEEF
            Confirmation-Token: 90215

            POST http://a.test/three
            Content-Type: application/json
            @/abs/body.json
            """
        let targets = try BenchTargetFile.parse(text, directory: "/data")
        #expect(targets.map(\.method) == ["GET", "DELETE", "POST"])
        #expect(targets[1].headers.map(\.name) == ["Authorization", "Confirmation-Token"])
        #expect(targets[1].headers[0].value == "Token DEADBEEF")
        #expect(targets[2].body == .file("/abs/body.json"))
    }

    @Test(arguments: [
        ("{\"method\": \"GET\"}", "line 1: \"url\""),
        ("{\"url\": \"http://a\"}\n{nope", "line 2: not a JSON object"),
        ("{\"url\": \"http://a\", \"body\": \"x\", \"bodyFile\": \"y\"}", "not both"),
        ("{\"url\": \"http://a\", \"header\": {}}", "unknown key \"header\""),
        ("http://a.test/", "line 1: expected a target line"),
        ("GET http://a\nnot a header", "line 2"),
        ("\n# only comments\n", "no target"),
    ])
    func rejectsMalformedFilesNamingTheLine(text: String, mention: String) {
        #expect {
            try BenchTargetFile.parse(text, directory: "/")
        } throws: { error in
            "\(error)".contains(mention)
        }
    }

    /// JSON writers leave U+2028, U+2029 and U+0085 in strings as they are: only LF ends a line (found by the
    /// bench-targets fuzz target).
    @Test func aJSONStringMayHoldCharactersUnicodeCallsLineBreaks() throws {
        let text = "{\"url\": \"http://a.test/\u{2028}\", \"headers\": {\"X-A\": \"a\u{85}b\u{2029}\"}}\n"
        let targets = try BenchTargetFile.parse(text, directory: "/data")
        #expect(targets.map(\.url) == ["http://a.test/\u{2028}"])
        #expect(targets.first?.headers.first?.value == "a\u{85}b\u{2029}")
    }

    @Test func linesMayEndInCRLF() throws {
        let json = try BenchTargetFile.parse(
            "{\"url\": \"http://a.test/1\"}\r\n{\"url\": \"http://a.test/2\"}\r\n", directory: "/")
        #expect(json.map(\.url) == ["http://a.test/1", "http://a.test/2"])
        let text = try BenchTargetFile.parse(
            "GET http://a.test/1\r\nX-A: 1\r\n\r\nGET http://a.test/2\r\n", directory: "/")
        #expect(text.map(\.url) == ["http://a.test/1", "http://a.test/2"])
        #expect(text.first?.headers.map(\.value) == ["1"])
    }

    /// Windows editors save UTF-8 with a byte order mark: kept, it made the first line neither JSON (it did not start
    /// with `{`) nor a target line (`METHOD` was not all letters), and the file was refused. One leading U+FEFF is
    /// skipped, in either format.
    @Test(arguments: [
        ("\u{FEFF}GET http://h/\n", ["http://h/"]),
        ("\u{FEFF}{\"url\": \"http://h/1\"}\r\n{\"url\": \"http://h/2\"}\r\n", ["http://h/1", "http://h/2"]),
    ])
    func aLeadingByteOrderMarkIsSkipped(text: String, urls: [String]) throws {
        let targets = try BenchTargetFile.parse(text, directory: "/")
        #expect(targets.map(\.url) == urls)
        #expect(targets.allSatisfy { $0.method == "GET" && $0.headers.isEmpty && $0.body == nil })
    }

    @Test func roundRobinCyclesThroughTheTargets() {
        #expect(
            (0..<7).map { LoadTargetOrder.roundRobin.targetIndex(ofRequest: $0, targetCount: 3) } == [
                0, 1, 2, 0, 1, 2, 0,
            ])
    }

    @Test func randomOrderIsReproducibleAndCoversTheTargets() {
        let order = LoadTargetOrder.random(seed: 42)
        let picks = (0..<3000).map { order.targetIndex(ofRequest: $0, targetCount: 3) }
        #expect(
            picks == (0..<3000).map { LoadTargetOrder.random(seed: 42).targetIndex(ofRequest: $0, targetCount: 3) })
        #expect(
            picks != (0..<3000).map { LoadTargetOrder.random(seed: 43).targetIndex(ofRequest: $0, targetCount: 3) })
        for target in 0..<3 {
            // Each target gets about a third (binomial: ±5 % is more than 5 standard deviations).
            #expect(abs(picks.filter { $0 == target }.count - 1000) < 150)
        }
    }
}
