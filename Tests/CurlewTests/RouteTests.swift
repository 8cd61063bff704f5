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
                try await provider.request(Route(path: "/delay/5000", timeout: .milliseconds(200)))
                Issue.record("should time out")
            } catch .transport(let error, _) {
                #expect(error.code == .timeout(.total))
            } catch {
                Issue.record("unexpected \(error)")
            }
            #expect(ContinuousClock.now - started < .seconds(4))
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
