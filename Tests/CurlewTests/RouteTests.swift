import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import HTTPTypes
import Testing

@Suite struct RouteTests {
    @Test func aRouteTimeoutStopsASlowRequestWithATypedError() async throws {
        try await withLoopbackServer { server in
            let provider = TestProvider(baseURL: server.baseURL)
            do throws(ProviderError) {
                // The server would answer after 30 s: the timeout, not the server, must end the request.
                try await provider.request(Route(path: "/delay/30000", timeout: .milliseconds(200)))
                Issue.record("should time out")
            } catch  where error.code == .transport {
                #expect(error.transportError?.code == .timeout(.total))
                // The transfer's own clock, read on the loop thread: far below the server's 30 s. Not the test's
                // wall clock, which also counts the time this task waits for a thread of the cooperative pool
                // (a CI run saw 19.7 s there while the timeout itself fired on time).
                let total = try #require(error.transportError?.metrics?.total)
                #expect(total < .seconds(10))
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }

    @Test func fullURLsAreRecognisedInAnyCase() {
        #expect(Route(path: "https://a.example/x").isFullURL)
        #expect(Route(path: "HTTP://a.example/x").isFullURL)
        #expect(!Route(path: "/http://x").isFullURL)
        #expect(!Route(path: "httpbin/x").isFullURL)
    }

    @Test func addingAHeaderReplacesOneOfTheSameName() {
        let route = Route(path: "/x", headers: ["Accept": "text/plain"]).adding(header: "accept", "application/json")
        #expect(route.headers.map(\.name) == ["accept"])
        #expect(route.headers.map(\.value) == ["application/json"])
    }

    @Test func nikkasMultipartLabelIsAFormBody() {
        var form = MultipartForm()
        form.append(value: "a", forKey: "b")
        let route = Route(path: "/upload", method: .post, multipartForm: form)
        #expect(route.body?.contentType == form.contentType)
        #expect(route.body?.isReplayable == true)
    }

    /// What a generic `Routable` call sees of a value.
    private static func seen(_ routable: some Routable) -> (parameters: [String: JSONValue], headers: [String: String])
    {
        ((routable.parameters ?? [:]).mapValues(\.parameterValue), routable.headers ?? [:])
    }

    @Test func aRouteIsTheRoutableItDescribes() {
        let route = Route(
            path: "/search", method: .post, params: ["q": "swift", "page": 2], headers: ["Accept": "text/plain"],
            encoding: .form, timeout: .seconds(3), plugins: [AnyPlugin()], mockData: "search"
        ).adding(header: "X-Trace", "t1")
        #expect(route.route.path == "/search")
        #expect(route.route.headers.map(\.name) == ["Accept", "X-Trace"])
        // Read through the protocol, every requirement reports the route's own value, none the protocol's default.
        let seen = Self.seen(route)
        #expect(seen.parameters == ["q": "swift", "page": 2])
        #expect(seen.headers == ["Accept": "text/plain", "X-Trace": "t1"])
        let routable: any Routable = route
        #expect(routable.method == .post)
        #expect(routable.encoding == .form)
        #expect(routable.timeout == .seconds(3))
        #expect(routable.requestPlugins.count == 1)
        #expect(routable.mockData == "search")
        // On a `Route` value, the stored properties keep their own types.
        let parameters: [String: JSONValue] = route.parameters
        #expect(parameters["page"] == 2)
    }

    @Test func theRoutableMethodsTakeARouteAsItIs() async throws {
        struct Item: Decodable { let id: Int }
        let mock = MockTransport(stubs: [.get("/item", json: ["id": 7]), .get("/items", json: [["id": 8]])])
        let provider = TestProvider(baseURL: "http://api.local", transport: mock)
        let route = Route(path: "/item").adding(header: "X-Trace", "t2")
        #expect(try await provider.requestObject(of: Item.self, route).id == 7)
        #expect(try await provider.requestArray(of: Item.self, Route(path: "/items")).map(\.id) == [8])
        let streamed = try await provider.stream(route)
        #expect(String(decoding: try await streamed.body.collect(upTo: 1024), as: UTF8.self).contains("7"))
        #expect(mock.receivedRequests.map { $0.headerFields[HTTPField.Name("X-Trace")!] } == ["t2", nil, "t2"])
    }

    @Test func everyPrintingShowsTheEndpointButNotItsCredentials() {
        let route = Route(
            path: "https://user:url-secret@api.example.com/login?access_token=query-secret&lang=en", method: .post,
            params: [
                "email": "foo@example.com", "password": "param-secret", "profile": ["client_secret": "nested-secret"],
            ],
            headers: ["Authorization": "Bearer header-secret", "X-Client": "curlew"],
            body: .string("{\"password\":\"body-secret\"}", contentType: "application/json"))
        for (way, text) in everyPrinting(of: route) {
            for secret in [
                "url-secret", "query-secret", "param-secret", "nested-secret", "header-secret", "body-secret",
            ] {
                #expect(!text.contains(secret), "\(way): \(text)")
            }
            #expect(text.contains("POST") && text.contains("api.example.com/login"), "\(way): \(text)")
            #expect(text.contains("lang=en") && text.contains("foo@example.com"), "\(way): \(text)")
            #expect(text.contains("password") && text.contains("client_secret"), "\(way): \(text)")
            #expect(text.contains("Authorization") && text.contains("X-Client: curlew"), "\(way): \(text)")
            #expect(text.contains("26 bytes") && !text.contains("112, 97, 115, 115"), "the body's size, not its bytes")
        }
    }
}
