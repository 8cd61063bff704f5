import Curlew
import CurlewEngine
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
}
