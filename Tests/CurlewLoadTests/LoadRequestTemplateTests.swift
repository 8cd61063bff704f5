import CurlewEngine
import Testing

@testable import CurlewLoad

/// Request templates: placeholders checked up front, rows chosen by request number, generators.
struct LoadRequestTemplateTests {
    private static let users = LoadData(
        columns: ["id", "name"], rows: [["1", "Ann"], ["2", "Bob Smith"], ["3", "Cy"]])

    private func request(_ template: LoadRequestTemplate, _ ticket: Int) throws -> CurlewRequest {
        try #require(template.request(ticket: ticket)).get()
    }

    @Test func columnsFillTheURLPercentEncodedAndHeadersAndBodyAsTheyAre() throws {
        let template = try LoadRequestTemplate(
            method: .post, url: "http://127.0.0.1/users/{{ name }}?id={{id}}", headers: [("X-User", "{{name}}")],
            body: "{\"id\": {{id}}}", data: Self.users)
        let second = try request(template, 1)
        #expect(second.url == "http://127.0.0.1/users/Bob%20Smith?id=2")
        #expect(second.header("X-User") == "Bob Smith")
        #expect(second.body?.bytes == Array("{\"id\": 2}".utf8))
        #expect(second.method == .post)
    }

    @Test func onceEndsAfterTheLastRowAndCycleStartsOver() throws {
        let once = try LoadRequestTemplate(url: "http://127.0.0.1/{{id}}", data: Self.users, rows: .once)
        #expect(once.rowLimit == 3)
        #expect(try request(once, 2).url == "http://127.0.0.1/3")
        #expect(once.request(ticket: 3) == nil)
        let cycle = try LoadRequestTemplate(url: "http://127.0.0.1/{{id}}", data: Self.users)
        #expect(cycle.rowLimit == nil)
        #expect(try request(cycle, 4).url == "http://127.0.0.1/2")
    }

    @Test func aSeedShufflesTheRowsTheSameWayEveryTime() throws {
        let rows = (0..<50).map { [String($0)] as [String?] }
        let data = LoadData(columns: ["n"], rows: rows)
        let first = try LoadRequestTemplate(url: "http://127.0.0.1/{{n}}", data: data, rows: .once, seed: 7)
        let again = try LoadRequestTemplate(url: "http://127.0.0.1/{{n}}", data: data, rows: .once, seed: 7)
        let urls = try (0..<50).map { try request(first, $0).url }
        #expect(try urls == (0..<50).map { try request(again, $0).url })
        #expect(Set(urls).count == 50)
        #expect(urls != (0..<50).map { "http://127.0.0.1/\($0)" })
    }

    /// Without generators each row's request is made once, and request k of the run is element k modulo the rows,
    /// exactly as the template makes it; with a generator, or more rows than are made up front, none are.
    @Test func requestsWithoutGeneratorsAreMadeOnceAndRepeatInRunOrder() throws {
        let rows = (0..<50).map { [String($0)] as [String?] }
        let data = LoadData(columns: ["n"], rows: rows)
        let template = try LoadRequestTemplate(
            url: "http://127.0.0.1/{{n}}", headers: [("X-N", "n={{n}}")], data: data, seed: 7)
        let made = try #require(template.requestsMadeUpFront())
        #expect(made.count == 50)
        for ticket in [0, 1, 49, 50, 51, 123] {
            let expected = try request(template, ticket)
            #expect(made[ticket % made.count].url == expected.url)
            #expect(made[ticket % made.count].headerFields == expected.headerFields)
        }
        let constant = try LoadRequestTemplate(url: "http://127.0.0.1/fixed")
        #expect(constant.requestsMadeUpFront()?.map(\.url) == ["http://127.0.0.1/fixed"])
        for generated in [
            "http://127.0.0.1/{{n}}/{{seq}}", "http://127.0.0.1/{{uuid}}", "http://127.0.0.1/{{randInt 1 2}}",
        ] {
            #expect(try LoadRequestTemplate(url: generated, data: data).requestsMadeUpFront() == nil, "\(generated)")
        }
        let many = LoadData(
            columns: ["n"], rows: (0...LoadRequestTemplate.rowsMadeUpFront).map { [String($0)] as [String?] })
        #expect(try LoadRequestTemplate(url: "http://127.0.0.1/{{n}}", data: many).requestsMadeUpFront() == nil)
    }

    /// A filled URL skips the two parsers only when nothing generated can change how it parses: generators after
    /// a literal end of the authority, whole `%` escapes in literals, a literal http(s) scheme.
    @Test(arguments: [
        ("http://h/{{seq}}", true), ("HTTPS://h:8443/a?x={{uuid}}&y={{randInt -5 5}}", true),
        ("http://{{host}}/p/{{seq}}", true), ("http://h/%41{{seq}}", true), ("http://h/{{host}}", true),
        ("http://[::1]:8080/{{seq}}", true), ("http://h?{{seq}}", true),
        ("http://h{{seq}}/", false), ("http://h:{{randInt 1 9}}/", false), ("{{host}}/{{seq}}", false),
        ("http+unix://%2Fs.sock/{{seq}}", false), ("http://h/%{{seq}}", false), ("http://h/%4{{seq}}", false),
        ("http://{{host}}{{seq}}/", false),
    ])
    func filledURLsSkipParsingOnlyWhenGeneratorsCannotChangeIt(url: String, skips: Bool) throws {
        let data = LoadData(columns: ["host"], rows: [["example.test"]])
        let template = try LoadRequestTemplate.parse(url, in: "the URL", columns: data.columns)
        #expect(LoadRequestTemplate.urlNeedsNoParsing(template) == skips)
    }

    /// Requests made without parsing are the ones parsing would make: same URL, headers and body.
    @Test func aRequestFilledWithoutParsingEqualsAParsedOne() throws {
        let data = LoadData(columns: ["id"], rows: [["a b"], ["ü/x"]])
        let template = try LoadRequestTemplate(
            method: .post, url: "http://127.0.0.1:8080/u/{{id}}?n={{seq}}", headers: [("X-Seq", "{{seq}}")],
            body: "{{id}}-{{seq}}", data: data)
        #expect(template.fillsWithoutParsing)
        for ticket in 0..<4 {
            let made = try request(template, ticket)
            let parsed = try CurlewRequest(
                method: .post, url: made.url, headers: [("X-Seq", String(ticket))],
                body: .bytes(Array("\(ticket % 2 == 0 ? "a b" : "ü/x")-\(ticket)".utf8)))
            #expect(
                made.url
                    == ["http://127.0.0.1:8080/u/a%20b?n=\(ticket)", "http://127.0.0.1:8080/u/%C3%BC%2Fx?n=\(ticket)"][
                        ticket % 2])
            #expect(made.headerFields == parsed.headerFields)
            #expect(made.body?.bytes != nil)
            #expect(made.body?.bytes == parsed.body?.bytes)
        }
    }

    @Test func generatorsNeedNoData() throws {
        let template = try LoadRequestTemplate(
            url: "http://127.0.0.1/{{seq}}/{{randInt 5 7}}", headers: [("X-Id", "{{uuid}}")], seed: 1)
        for ticket in [0, 1, 41] {
            let made = try request(template, ticket)
            let parts = made.url.split(separator: "/")
            #expect(parts[2] == Substring(String(ticket)))
            #expect((5...7).contains(Int(parts[3]) ?? 0))
            #expect(made.header("X-Id")?.count == 36)
        }
        let uuids = try Set((0..<20).map { try request(template, $0).header("X-Id") })
        #expect(uuids.count == 20)
    }

    @Test(arguments: [
        ("http://127.0.0.1/{{nope}}", "unknown placeholder {{nope}} (data columns: id, name;"),
        ("http://127.0.0.1/{{id", "never closed"), ("http://127.0.0.1/{{}}", "empty placeholder"),
        ("http://127.0.0.1/{{randInt 9 1}}", "MIN <= MAX"), ("http://127.0.0.1/{{randInt x 1}}", "randInt MIN MAX"),
        ("http://127.0.0.1/{{seq 1}}", "unknown placeholder"), ("ftp://127.0.0.1/{{id}}", "data row 1:"),
    ])
    func badTemplatesAreTypedErrorsBeforeAnythingIsSent(_ url: String, _ expected: String) {
        #expect {
            _ = try LoadRequestTemplate(url: url, data: Self.users)
        } throws: { error in
            (error as? LoadRequestTemplate.ParseError)?.description.contains(expected) == true
        }
    }

    /// A data column named `seq` or `uuid` was silently replaced by the generator: every request carried a request
    /// number or a random UUID instead of its row's value, and nothing said so. The placeholder names both, so the
    /// template is refused, naming the column and the generator; other placeholders of such data still work.
    @Test(arguments: [("seq", "{{seq}}"), ("uuid", "{{ uuid }}"), ("randInt 1 2", "{{randInt 1 2}}")])
    func aPlaceholderNamingAColumnAndAGeneratorIsAmbiguous(column: String, placeholder: String) throws {
        let data = LoadData(columns: ["id", column], rows: [["1", "row-value"]])
        #expect {
            _ = try LoadRequestTemplate(url: "http://127.0.0.1/" + placeholder, data: data)
        } throws: { error in
            let description = (error as? LoadRequestTemplate.ParseError)?.description ?? ""
            return description.contains("{{\(column)}} is ambiguous") && description.contains("the generator")
        }
        let unambiguous = try LoadRequestTemplate(url: "http://127.0.0.1/{{id}}", data: data)
        #expect(try request(unambiguous, 0).url == "http://127.0.0.1/1")
    }

    @Test func aRowThatCannotMakeARequestIsNamedUpFront() {
        let data = LoadData(columns: ["v"], rows: [["fine"], ["bad\r\nInjected: 1"]])
        #expect {
            _ = try LoadRequestTemplate(url: "http://127.0.0.1/", headers: [("X-V", "{{v}}")], data: data)
        } throws: { error in
            (error as? LoadRequestTemplate.ParseError)?.description.hasPrefix("data row 2:") == true
        }
        let missing = LoadData(columns: ["a", "b"], rows: [["1", nil]])
        #expect(throws: LoadRequestTemplate.ParseError.self) {
            _ = try LoadRequestTemplate(url: "http://127.0.0.1/{{b}}", data: missing)
        }
    }

    @Test func columnsWithoutDataAndOnceWithoutRowsAreErrors() {
        #expect(throws: LoadRequestTemplate.ParseError.self) {
            _ = try LoadRequestTemplate(url: "http://127.0.0.1/{{id}}")
        }
        #expect(throws: LoadRequestTemplate.ParseError.self) {
            _ = try LoadRequestTemplate(url: "http://127.0.0.1/{{seq}}", rows: .once)
        }
    }
}
