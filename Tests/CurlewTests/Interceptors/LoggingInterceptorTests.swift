@testable import Curlew
import HTTPTypes
import CurlewTesting
import InMemoryLogging
import Logging
import Testing

@Suite struct LoggingInterceptorTests {
    @Test func credentialsAndCookiesAreRedactedInBothDirections() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let mock = MockTransport(stubs: [
            Stub(.get, "/me", responses: [StubResponse(headers: ["Set-Cookie": "session=s3cr3t", "X-Visible": "yes"])])
        ])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [LoggingInterceptor(logger: logger, redactedHeaders: ["X-Api-Key"])]
        try await provider.request(
            Route(path: "/me", headers: ["Authorization": "Bearer t0k3n", "Cookie": "a=b", "X-Api-Key": "k", "Accept": "text/plain"]))

        let entries = handler.entries
        #expect(entries.count == 2)
        guard case .dictionary(let sent)? = entries.first?.metadata["curlew.request.headers"],
            case .dictionary(let received)? = entries.last?.metadata["curlew.response.headers"]
        else {
            Issue.record("headers missing from the metadata: \(entries)")
            return
        }
        #expect(sent["authorization"] == "<redacted>")
        #expect(sent["cookie"] == "<redacted>")
        #expect(sent["x-api-key"] == "<redacted>")
        #expect(sent["accept"] == "text/plain")
        #expect(received["set-cookie"] == "<redacted>")
        #expect(received["x-visible"] == "yes")
        let everything = entries.map { "\($0.message) \($0.metadata)" }.joined()
        #expect(!everything.contains("t0k3n") && !everything.contains("s3cr3t"))
    }

    @Test func redactionIgnoresTheCaseOfNames() {
        let interceptor = LoggingInterceptor(logger: Logger(label: "test"), redactedHeaders: ["x-API-key"])
        var fields = HTTPFields()
        for name in ["AUTHORIZATION", "cOOKIE", "sEt-CoOkIe", "Proxy-Authorization", "X-Api-KEY", "X-Other"] {
            fields.append(HTTPField(name: HTTPField.Name(name)!, value: "secret"))
        }
        let metadata = interceptor.metadata(for: fields)
        #expect(metadata.count == 6)
        for (name, value) in metadata {
            #expect(value == (name == "x-other" ? "secret" : "<redacted>"), "\(name)")
        }
    }
}
