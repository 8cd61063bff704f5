import CurlewEngine
import CurlewTesting
import HTTPTypes
import InMemoryLogging
import Logging
import Testing

@testable import Curlew

@Suite struct LoggingInterceptorTests {
    @Test func fieldsMarkedAsSecretsAreRedactedWhateverTheirName() throws {
        var request = try CurlewRequest(url: "https://api.example.com/")
        try request.setCredentialHeader("X-Api-Key", "secret-key")
        try request.setHeader("X-Plain", "shown")
        let metadata = LoggingInterceptor(logger: Logger(label: "test")).metadata(for: request.headerFields)
        #expect(metadata["x-api-key"] == "<redacted>")
        #expect(metadata["x-plain"] == "shown")
    }

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
            Route(
                path: "/me",
                headers: ["Authorization": "Bearer t0k3n", "Cookie": "a=b", "X-Api-Key": "k", "Accept": "text/plain"]))

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

    @Test func theEnginesCredentialFieldsAndRedirectTargetsAreRedacted() throws {
        let fields: HTTPFields = [
            HTTPField.Name("X-Amz-Security-Token")!: "session-token",
            .location: "https://user:hunter2@files.local/o?X-Amz-Signature=sig1&part=2",
            HTTPField.Name("Content-Location")!: "/o?access_token=t0k3n",
            .contentType: "text/plain",
        ]
        let metadata = LoggingInterceptor(logger: Logger(label: "test")).metadata(for: fields)
        #expect(metadata["x-amz-security-token"] == "<redacted>")
        #expect(metadata["location"] == "https://user:<redacted>@files.local/o?X-Amz-Signature=<redacted>&part=2")
        #expect(metadata["content-location"] == "/o?access_token=<redacted>")
        #expect(metadata["content-type"] == "text/plain")
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

@Suite struct LoggingInterceptorURLTests {
    let interceptor = LoggingInterceptor(logger: Logger(label: "test"), redactedQueryParameters: ["Session"])

    @Test(arguments: [
        (
            "https://api.local/v1/items?page=2&access_token=abc123&sort=name",
            "https://api.local/v1/items?page=2&access_token=<redacted>&sort=name"
        ),
        ("https://user:hunter2@api.local:8443/path?q=1#frag", "https://user:<redacted>@api.local:8443/path?q=1#frag"),
        ("https://user@api.local/", "https://user@api.local/"),
        (
            "https://b.s3.local/o?X-Amz-Credential=AK%2F1&X-Amz-Signature=f00&x-id=GetObject",
            "https://b.s3.local/o?X-Amz-Credential=<redacted>&X-Amz-Signature=<redacted>&x-id=GetObject"
        ),
        (
            "http://api.local/p?SESSION=s3cr3t&%6Bey=k&keys=visible&flag&=x",
            "http://api.local/p?SESSION=<redacted>&%6Bey=<redacted>&keys=visible&flag&=x"
        ),
        ("http://api.local/p%3Ftoken=x?a=b#token=c", "http://api.local/p%3Ftoken=x?a=b#token=c"),
    ])
    func credentialsInTheURLAreRedactedAndEverythingElseIsKept(url: String, logged: String) {
        #expect(interceptor.redacted(url: url) == logged)
    }

    @Test func theLoggedRequestAndResponseLinesCarryTheRedactedURL() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let mock = MockTransport(stubs: [Stub(.get, "/me", responses: [StubResponse()])])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [LoggingInterceptor(logger: logger)]
        try await provider.request(Route(path: "/me", params: ["access_token": "t0k3n", "page": "2"]))
        let lines = handler.entries.map(\.message.description)
        #expect(lines.count == 2)
        #expect(
            lines.allSatisfy {
                $0.contains("access_token=<redacted>") && $0.contains("page=2") && !$0.contains("t0k3n")
            })
    }

    @Test func theProvidersAdditionalParametersAreRedactedAndTheRoutesAreNot() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let mock = MockTransport(stubs: [
            Stub(.get, "/weather", responses: [StubResponse(headers: ["Content-Location": "/weather?APPID=s3cr3t"])])
        ])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.additionalParameters = ["appid": "s3cr3t"]
        provider.interceptors = [LoggingInterceptor(logger: logger)]
        try await provider.request(Route(path: "/weather", params: ["q": "London"]))
        let lines = handler.entries.map(\.message.description)
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.contains("appid=<redacted>") && $0.contains("q=London") }, "\(lines)")
        let everything = handler.entries.map { "\($0.message) \($0.metadata)" }.joined()
        #expect(!everything.contains("s3cr3t"), "\(everything)")
    }

    @Test func theLoggedTransportFailureCarriesTheRedactedRoute() async throws {
        let handler = InMemoryLogHandler()
        let logger = Logger(label: "test", factory: { _ in handler })
        let refused = CurlewError(code: .connectionRefused, detail: "refused")
        let mock = MockTransport(stubs: [Stub(.get, "/me", responses: [StubResponse(error: refused)])])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [LoggingInterceptor(logger: logger)]
        await #expect(throws: ProviderError.self) {
            try await provider.request(Route(path: "http://user:hunter2@api.local/me?access_token=t0k3n&page=2"))
        }
        let warnings = handler.entries.filter { $0.level == .warning }.map(\.message.description)
        #expect(warnings.count == 1)
        #expect(
            warnings.allSatisfy {
                $0.contains("user:<redacted>@api.local/me?access_token=<redacted>&page=2")
                    && !$0.contains("hunter2") && !$0.contains("t0k3n")
            }, "\(warnings)")
    }
}
