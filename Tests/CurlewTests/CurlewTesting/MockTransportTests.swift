import Curlew
import CurlewEngine
import CurlewTesting
import Foundation
import Testing

@Suite struct MockTransportTests {
    private func provider(_ mock: MockTransport) -> TestProvider {
        TestProvider(baseURL: "https://api.example.com", transport: mock)
    }

    @Test func stubsAnswerWithStatusHeadersAndBodyThroughTheWholePipeline() async throws {
        let mock = MockTransport(stubs: [
            .get("/users/1", headers: ["ETag": "\"v1\""], json: ["id": 1, "name": "Ada"]),
            .stub(.delete, "/users/*", status: .forbidden, json: ["error": "no"]),
        ])
        let response = try await provider(mock).request(Route(path: "/users/1", params: ["expand": "all"]))
        #expect(try response.json() == ["id": 1, "name": "Ada"])
        #expect(response.header("etag") == "\"v1\"")
        #expect(response.metrics == nil)
        do {
            try await provider(mock).request(Route(path: "/users/2", method: .delete))
            Issue.record("403 should fail as it would from a server")
        } catch .status(let failed) {
            #expect(failed.status == .forbidden)
            #expect(try failed.json() == ["error": "no"])
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(mock.receivedRequests.map(\.url) == ["https://api.example.com/users/1?expand=all", "https://api.example.com/users/2"])
    }

    @Test func laterStubsWinAndSequencesKeepTheirLastAnswer() async throws {
        let mock = MockTransport()
        mock.stub(.get("/status", json: ["v": 1]))
        mock.stub(Stub(.get, "/status", responses: [.json(["v": 2]), .json(["v": 3])]))
        let provider = provider(mock)
        var seen: [JSONValue] = []
        for _ in 0..<3 { seen.append(try await provider.request(Route(path: "/status")).json()["v"]) }
        #expect(seen == [2, 3, 3])
    }

    @Test func delaysAreObservedAndInjectedErrorsArriveAsTransportErrors() async throws {
        let mock = MockTransport(stubs: [
            .get("/slow", json: [:], delay: .milliseconds(200)),
            .failing(.get, "/timeout", with: CurlewError(code: .timeout(.total), detail: "total timeout"), delay: .milliseconds(10)),
        ])
        let started = ContinuousClock.now
        try await provider(mock).request(Route(path: "/slow"))
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        do {
            try await provider(mock).request(Route(path: "/timeout"))
            Issue.record("should fail")
        } catch .transport(let error, _) {
            #expect(error.code == .timeout(.total))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func mockDataFixturesAreServedFromTheDirectory() async throws {
        let directory = NSTemporaryDirectory() + "curlew-fixtures-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #"{"token":"abc"}"#.write(toFile: directory + "/login.json", atomically: true, encoding: .utf8)
        let mock = MockTransport(fixturesDirectory: directory)
        let json = try await provider(mock).request(Route(path: "/login", method: .post, mockData: "login")).json()
        #expect(json == ["token": "abc"])
    }

    @Test func anUnmatchedRequestFailsLoudly() async throws {
        await #expect {
            try await provider(MockTransport()).request(Route(path: "/nothing"))
        } throws: { error in
            guard case .transport(let inner, _) = error as? ProviderError else { return false }
            return inner.detail.contains("no stub for GET https://api.example.com/nothing")
        }
    }
}
