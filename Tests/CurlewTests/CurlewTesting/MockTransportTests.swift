import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
import Synchronization
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
        #expect(response.metrics.bytesReceived == Int64(response.body.count))
        #expect(response.metrics.bytesSent == 0)
        #expect(response.metrics.total == .zero)
        do {
            try await provider(mock).request(Route(path: "/users/2", method: .delete))
            Issue.record("403 should fail as it would from a server")
        } catch  where error.code == .status {
            let failed = try #require(error.response)
            #expect(failed.status == .forbidden)
            #expect(try failed.json() == ["error": "no"])
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(
            mock.receivedRequests.map(\.url) == [
                "https://api.example.com/users/1?expand=all", "https://api.example.com/users/2",
            ])
    }

    @Test func stubsWrittenWithOrWithoutPercentEncodingMatchTheEncodedRequest() async throws {
        let mock = MockTransport(stubs: [
            .get("/files/my report.pdf", json: ["plain": true]),
            .get("/users/jos%C3%A9", json: ["encoded": true]),
            .get("/tags/ü*", json: ["prefix": true]),
        ])
        let provider = provider(mock)
        let segment = Route.segment("my report.pdf")
        #expect(try await provider.request(Route(path: "/files/\(segment)")).json() == ["plain": true])
        #expect(try await provider.request(Route(path: "/users/\(Route.segment("josé"))")).json() == ["encoded": true])
        #expect(try await provider.request(Route(path: "/tags/\(Route.segment("über"))/x")).json() == ["prefix": true])
        #expect(mock.receivedRequests.first?.url == "https://api.example.com/files/my%20report.pdf")
        await #expect(throws: (any Error).self) { try await provider.request(Route(path: "/files/other.pdf")) }
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
            .stub(.put, "/slow", json: [:], delay: .milliseconds(200)),
            .failing(
                .get, "/timeout", with: CurlewError(code: .timeout(.total), detail: "total timeout"),
                delay: .milliseconds(10)),
        ])
        let started = ContinuousClock.now
        let slow = try await provider(mock).request(Route(path: "/slow", method: .put, params: ["a": 1]))
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        #expect(slow.metrics.total == .milliseconds(200))
        #expect(slow.metrics.firstByte == .milliseconds(200))
        #expect(slow.metrics.bytesSent == Int64(#"{"a":1}"#.utf8.count))
        #expect(slow.metrics.bytesReceived == 2)
        do {
            try await provider(mock).request(Route(path: "/timeout"))
            Issue.record("should fail")
        } catch  where error.code == .transport {
            #expect(error.transportError?.code == .timeout(.total))
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

    /// An encoded `/` is data within a segment: a stub for `/files/a%2Fb` must not answer `/files/a/b`, which a
    /// real server routes elsewhere, or a test passes for code that forgot `Route.segment`.
    @Test func anEncodedSlashMatchesOnlyAnEncodedSlash() async throws {
        let mock = MockTransport(stubs: [.get("/files/\(Route.segment("a/b"))", json: ["file": "a/b"])])
        let provider = provider(mock)
        #expect(try await provider.request(Route(path: "/files/\(Route.segment("a/b"))")).json() == ["file": "a/b"])
        #expect(try await provider.request(Route(path: "/files/a%2fb")).json() == ["file": "a/b"], "either case")
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/files/a/b")) }
        // A literal `%2F` in a name (sent as `%252F`) is not an encoded `/` either.
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/files/a%252Fb")) }
    }

    /// A stub written with a `%` that starts no escape is text as typed: it answers the request the route layer
    /// sends for the same path (`/files/100%25`).
    @Test func aStubWithALiteralPercentMatchesItsRoute() async throws {
        let mock = MockTransport(stubs: [
            .get("/files/100%", json: ["full": true]), .get("/off/50% off", json: ["off": true]),
        ])
        let provider = provider(mock)
        #expect(try await provider.request(Route(path: "/files/100%")).json() == ["full": true])
        #expect(try await provider.request(Route(path: "/off/50% off")).json() == ["off": true])
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/files/100")) }
    }

    @Test func anUnmatchedRequestFailsLoudly() async throws {
        await #expect {
            try await provider(MockTransport()).request(Route(path: "/nothing"))
        } throws: { error in
            guard let inner = (error as? ProviderError)?.transportError else { return false }
            return inner.detail.contains("no stub for GET https://api.example.com/nothing")
        }
    }

    private struct DeezerError: Error, Equatable { let message: String }

    /// A provider with the API-wide behaviour the mock must not skip: a validation of 200-with-error bodies.
    private struct ValidatingProvider: HTTPProvider {
        let baseURL = "https://api.example.com"
        let transport: any HTTPTransport
        let interceptors: [any Interceptor]

        func validate(_ response: RouteResponse) throws {
            if let message = try? response.json()["error"]["message"].string { throw DeezerError(message: message) }
        }
    }

    private struct Track: Decodable { let id: Int }

    @Test func theMockRunsInterceptorsRetriesValidationAndDecodingAsTheEngineDoes() async throws {
        let mock = MockTransport(stubs: [
            Stub(.get, "/track/1", responses: [StubResponse(status: .serviceUnavailable), .json(["id": 1])]),
            .get("/track/2", json: ["error": ["message": "no data"]]),
            .get("/tracks", json: [["id": 1], ["id": "two"]]),
        ])
        let provider = ValidatingProvider(
            transport: mock,
            interceptors: [
                HeadersInterceptor(["X-Api-Key": "k"]),
                RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(1)),
            ])

        // Request interceptors adapt what the mock receives; the policy retries its 503.
        #expect(try await provider.requestObject(of: Track.self, Route(path: "/track/1")).id == 1)
        #expect(mock.receivedRequests.count == 2)
        #expect(mock.receivedRequests.allSatisfy { $0.headerFields[HTTPField.Name("X-Api-Key")!] == "k" })

        // The provider's validation turns a 200 into the user's error.
        do {
            try await provider.request(Route(path: "/track/2"))
            Issue.record("the error body should fail validation")
        } catch  where error.code == .validation {
            #expect(error.cause as? DeezerError == DeezerError(message: "no data"))
            #expect(error.status == .ok)
        } catch {
            Issue.record("unexpected \(error)")
        }

        // Decoding reports where it failed.
        do {
            _ = try await provider.requestArray(of: Track.self, Route(path: "/tracks"))
            Issue.record("the second id is not a number")
        } catch  where error.code == .decoding {
            #expect(error.decodingFailure?.codingPath == "[1].id")
            #expect(error.decodingFailure?.bodyExcerpt.contains("two") == true)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}

/// The mock's last progress report and its metrics count what the engine would send: a form's and a file's real
/// sizes (checked against the engine sending the same bodies to the loopback server).
@Suite struct MockTransportProgressTests {
    @Test func formsAndFilesReportTheirRealSize() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "curlew-mock-\(UInt64.random(in: 0...UInt64.max))"
        ).path
        try Data(repeating: 7, count: 12_345).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        var form = MultipartForm()
        form.append(value: "1", forKey: "a")
        form.append(fileAt: path, forKey: "file")

        let mock = MockTransport(stubs: [.stub(.post, "/upload", status: .ok)])
        let provider = TestProvider(baseURL: "https://api.example.com", transport: mock)
        let reports = ProgressLog()
        let formResponse = try await provider.request(
            Route(path: "/upload", method: .post, multipartForm: form), progress: { reports.append($0) })
        let fileResponse = try await provider.request(
            Route(path: "/upload", method: .post, body: .file(path)), progress: { reports.append($0) })

        let sentByTheEngine = try await withLoopbackServer { server in
            let client = CurlewClient()
            let formSent = try await client.execute(
                try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .multipart(form)))
            await client.shutdown()
            // The server's own count of the body it read.
            let receipt = try JSONSerialization.jsonObject(with: Data(formSent.body)) as? [String: Any]
            return try #require(receipt?["bytes"] as? Int).int64
        }
        #expect(formResponse.metrics.bytesSent == sentByTheEngine)
        #expect(fileResponse.metrics.bytesSent == 12_345)
        #expect(reports.values.map(\.totalBytesToSend) == [Optional(sentByTheEngine), 12_345])
        #expect(reports.values.allSatisfy { $0.isComplete })
    }
}

extension Int {
    fileprivate var int64: Int64 { Int64(self) }
}

private final class ProgressLog: Sendable {
    private let stored = Mutex<[TransferProgress]>([])
    func append(_ progress: TransferProgress) { stored.withLock { $0.append(progress) } }
    var values: [TransferProgress] { stored.withLock { $0 } }
}
