import CurlewEngine
import CurlewLoad
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Testing

/// `--check`: the grammar, and checks counted on real responses apart from transport failures.
@Suite(.serialized) struct LoadCheckTests {
    @Test(arguments: [
        "status in 200", "status in 200,201", "status in 200-299,404", "header content-type exists",
        "header Content-Type == \"text/plain\"", "header etag ~ \"^W/\"", "body contains \"ok\"",
        "body ~ \"id\\\":[0-9]+\"", "json .user.id exists", "json .items.0.name == \"x\"", "json .n == 1.5",
        "json .flag == true", "json .gone == null", "json . exists",
    ])
    func validChecksParse(_ text: String) throws {
        #expect(try LoadCheck(text).text == text)
    }

    @Test(arguments: [
        "", "status", "status 200", "status in", "status in 99", "status in 300-200", "status in 2xx", "header",
        "header a:b exists", "header x", "header x ~ unquoted", "header x ~ \"[\"", "body", "body contains ok",
        "body contains \"open", "json user exists", "json .a..b exists", "json .a == {}", "json .a == [1]",
        "json .a", "cookie x exists", "status in 200 extra", "body contains \"a\" extra",
    ])
    func badChecksAreTypedErrorsNamingTheGrammar(_ text: String) {
        #expect {
            _ = try LoadCheck(text)
        } throws: { error in
            let description = (error as? LoadCheck.ParseError)?.description ?? ""
            return description.hasPrefix("check \(text.debugDescription):") && description.contains("status in")
        }
    }

    @Test func onlyBodyChecksReadTheBody() throws {
        #expect(try !LoadCheck("status in 200").needsBody)
        #expect(try !LoadCheck("header a exists").needsBody)
        #expect(try LoadCheck("body contains \"a\"").needsBody)
        #expect(try LoadCheck("json .a exists").needsBody)
    }

    /// The loopback server's `/json` is an array of 150 items, the first `{"id":1,"name":"item-0001",…}`.
    @Test func checksAreCountedPerResponseAndTheServerSawEveryRequest() async throws {
        let server = try await LoopbackServer.start()
        var plan = try LoadPlan(target: server.baseURL + "/json", shape: .requests(200))
        plan.connections = 4
        plan.progressInterval = nil
        plan.checks = try [
            "status in 200-299", "header content-type == \"application/json\"", "json .0.name == \"item-0001\"",
            "json .149.id == 150", "body contains \"no such text\"", "json .150 exists", "body ~ \"\\\"id\\\":1,\"",
        ].map { try LoadCheck($0) }
        plan.thresholds = try ["checks>99%", "check1>=100%", "check5<1%", "check5>50%"].map { try LoadThreshold($0) }
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let summary = try await LoadTest(plan, client: client).run()
        await client.shutdown()
        let served = server.requestsServed
        try await server.shutdown()

        #expect(summary.requests == 200)
        #expect(served == 200)
        #expect(summary.succeeded == 200)
        #expect(summary.checkedResponses == 200)
        #expect(summary.checkPasses == [200, 200, 200, 200, 0, 0, 200])
        // 5 of 7 checks hold on every response.
        let overall = try #require(summary.thresholds.first?.actual)
        #expect(abs(overall - 500.0 / 7) < 1e-9)
        #expect(summary.thresholds.map(\.passed) == [false, true, true, false])
    }

    /// A check's work on one response (here a regular expression scanning a body for text it lacks, tens of
    /// milliseconds) is the client's time: the next request's latency counts from when its worker is ready to send
    /// it, not from when the last response ended. So the latencies stay a small part of a run the checks fill.
    @Test func aChecksTimeIsNotTheNextRequestsLatency() async throws {
        let server = try await LoopbackServer.start()
        var plan = try LoadPlan(target: server.baseURL + "/bytes/50000", shape: .requests(12))
        plan.connections = 1
        plan.progressInterval = nil
        plan.checks = [try LoadCheck(#"body ~ "q[^a-z]z""#)]
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let summary = try await LoadTest(plan, client: client).run()
        await client.shutdown()
        try await server.shutdown()
        #expect(summary.checkedResponses == 12 && summary.checkPasses == [0])
        let latencies = try #require(summary.latency(percentile: 50)) * 12
        #expect(latencies * 4 < summary.duration, "latencies \(latencies) of a run of \(summary.duration)")
    }

    /// Checks run on every response, 5xx included, and not on transport failures; a body beyond the limit fails.
    @Test func failedResponsesAreCheckedAndTransportFailuresAreNot() async throws {
        let server = try await LoopbackServer.start()
        var plan = LoadPlan(
            requests: [
                try CurlewRequest(url: server.baseURL + "/status/503"),
                try CurlewRequest(url: server.baseURL + "/bytes/5000"),
                try CurlewRequest(url: server.baseURL + "/small"),
            ], shape: .requests(90))
        plan.connections = 3
        plan.progressInterval = nil
        plan.checkBodyLimit = 1000
        plan.checks = [try LoadCheck("status in 200"), try LoadCheck("body contains \"curlew-small-body\"")]
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let summary = try await LoadTest(plan, client: client).run()
        await client.shutdown()
        try await server.shutdown()

        #expect(summary.requests == 90)
        #expect(summary.statusCodes[503] == 30)
        #expect(summary.failures["bodyTooLarge", default: 0] == 30)
        // The 503s and the small bodies were checked; the too-large bodies are transport failures.
        #expect(summary.checkedResponses == 60)
        #expect(summary.checkPasses == [30, 30])
    }

    /// Against nginx, whose access log counts what arrived: status checks need no body.
    @Test func statusChecksAgainstNginxMatchItsAccessLog() async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        var plan = try LoadPlan(target: nginx.httpBaseURL + marker + "checked", shape: .requests(120))
        plan.connections = 6
        plan.progressInterval = nil
        plan.checks = [try LoadCheck("status in 200"), try LoadCheck("status in 201-599")]
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let summary = try await LoadTest(plan, client: client).run()
        await client.shutdown()

        var logged: [String] = []
        try await waitUntil(timeout: .seconds(10), "nginx to log 120 requests under \(marker)") {
            logged = nginx.hitsLog.lines(inGroupOf: marker)
            return logged.count >= 120
        }
        #expect(logged.count == 120)
        let okInLog = logged.filter { $0.split(separator: " ").dropFirst(3).first == "200" }.count
        #expect(summary.checkedResponses == 120)
        #expect(summary.checkPasses == [okInLog, 120 - okInLog])
    }

    /// httpbin's `/json` is a fixed slideshow document, and `/status/N` answers N: JSON and status checks on a
    /// server that is not ours.
    @Test func jsonAndStatusChecksAgainstHTTPBin() async throws {
        let httpbin = try await HTTPBinServer.shared()
        var plan = LoadPlan(
            requests: [
                try CurlewRequest(url: httpbin.baseURL + "/json"),
                try CurlewRequest(url: httpbin.baseURL + "/status/418"),
            ], shape: .requests(40))
        plan.connections = 2
        plan.progressInterval = nil
        plan.checks = try [
            "status in 200", "json .slideshow.title == \"Sample Slide Show\"", "json .slideshow.slides.1.title exists",
            "header content-type ~ \"json\"",
        ].map { try LoadCheck($0) }
        let client = CurlewClient(configuration: plan.clientConfiguration())
        let summary = try await LoadTest(plan, client: client).run()
        await client.shutdown()

        #expect(summary.requests == 40)
        #expect(summary.statusCodes == [200: 20, 418: 20])
        #expect(summary.checkedResponses == 40)
        #expect(summary.checkPasses == [20, 20, 20, 20])
    }
}
