import Curlew
import CurlewEngine
import CurlewTesting
import MetricsTestKit
import Testing

@Suite struct MetricsInterceptorTests {
    @Test func eachAttemptIsCountedByMethodAndStatusAndTimed() async throws {
        let metrics = TestMetrics()
        let mock = MockTransport(stubs: [
            .get("/ok", json: [:]),
            .stub(.delete, "/gone", status: .notFound),
            .failing(.get, "/down", with: CurlewError(code: .connectionRefused, detail: "refused")),
        ])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        provider.interceptors = [MetricsInterceptor(factory: metrics)]
        try await provider.request(Route(path: "/ok"))
        try await provider.request(Route(path: "/ok"))
        _ = try? await provider.request(Route(path: "/gone", method: .delete))
        _ = try? await provider.request(Route(path: "/down"))

        #expect(
            try metrics.expectCounter("curlew_requests_total", [("method", "GET"), ("status", "200")]).totalValue == 2)
        #expect(
            try metrics.expectCounter("curlew_requests_total", [("method", "DELETE"), ("status", "404")]).totalValue
                == 1)
        #expect(
            try metrics.expectCounter("curlew_requests_total", [("method", "GET"), ("status", "error")]).totalValue == 1
        )
        #expect(try metrics.expectTimer("curlew_request_duration", [("method", "GET")]).values.count == 3)
    }
}
