import Curlew
import CurlewEngine
import CurlewTestSupport
import Testing

@Suite struct RouteTests {
    @Test func aRouteTimeoutStopsASlowRequestWithATypedError() async throws {
        try await withLoopbackServer { server in
            let provider = TestProvider(baseURL: server.baseURL)
            let started = ContinuousClock.now
            do throws(ProviderError) {
                // The server would answer after 30 s: the timeout, not the server, must end the request.
                try await provider.request(Route(path: "/delay/30000", timeout: .milliseconds(200)))
                Issue.record("should time out")
            } catch .transport(let error, _) {
                #expect(error.code == .timeout(.total))
            } catch {
                Issue.record("unexpected \(error)")
            }
            // Far below the server's 30 s, with room for a loaded two-core machine running the whole suite.
            #expect(ContinuousClock.now - started < .seconds(15))
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
}
