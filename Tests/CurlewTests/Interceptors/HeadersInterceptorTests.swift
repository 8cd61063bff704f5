import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import HTTPTypes
import Testing

@Suite struct HeadersInterceptorTests {
    @Test func setsItsFieldsReplacingThoseOfTheSameName() async throws {
        let mock = MockTransport(stubs: [.get("/x", json: [:])])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [HeadersInterceptor(["X-Client": "curlew", "Accept": "text/csv"])]
        try await provider.request(Route(path: "/x", headers: ["Accept": "application/json"]))
        let sent = try #require(mock.receivedRequests.first)
        #expect(sent.headerFields[HTTPField.Name("X-Client")!] == "curlew")
        #expect(sent.headerFields[values: .accept] == ["text/csv"])
    }

    @Test func refusesValuesWithLineBreaks() async throws {
        let mock = MockTransport(stubs: [.get("/x", json: [:])])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [HeadersInterceptor(["X-Evil": "a\r\nInjected: 1"])]
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/x")) }
        #expect(mock.receivedRequests.isEmpty)
    }

    @Test func jsonHeadersLeaveAnExistingContentTypeAlone() async throws {
        let mock = MockTransport(stubs: [.post("/x", json: [:])])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [JSONHeadersInterceptor()]
        try await provider.request(Route(path: "/x", method: .post, body: .string("a,b", contentType: "text/csv")))
        try await provider.request(Route(path: "/x", method: .post))
        let sent = mock.receivedRequests
        #expect(sent.map { $0.headerFields[.contentType] } == ["text/csv", nil])
        #expect(sent.map { $0.headerFields[.accept] } == ["application/json", "application/json"])
    }

    @Test func everyPrintingOfCredentialHeadersNamesThemButHidesTheirValues() {
        let interceptor = HeadersInterceptor(
            ["X-Api-Key": "key-secret", "X-Tenant": "tenant-7"], attachesCredentials: true)
        for (way, text) in everyPrinting(of: interceptor) {
            #expect(!text.contains("key-secret") && !text.contains("tenant-7"), "\(way): \(text)")
            #expect(text.contains("X-Api-Key") && text.contains("X-Tenant"), "\(way): \(text)")
            #expect(text.contains("<redacted>"), "\(way): \(text)")
        }
    }

    @Test func everyPrintingOfPlainHeadersShowsTheirValuesButNotTheOnesLogsRedact() {
        // Not marked as credentials, but `Authorization` and `Cookie` are secrets wherever they are set.
        let interceptor = HeadersInterceptor([
            "Authorization": "Bearer plain-token", "cookie": "session=cookie-secret", "X-Client": "curlew",
        ])
        for (way, text) in everyPrinting(of: interceptor) {
            #expect(!text.contains("plain-token") && !text.contains("cookie-secret"), "\(way): \(text)")
            #expect(text.contains("Authorization") && text.contains("cookie"), "\(way): \(text)")
            #expect(text.contains("X-Client") && text.contains("curlew"), "\(way): \(text)")
        }
    }
}
