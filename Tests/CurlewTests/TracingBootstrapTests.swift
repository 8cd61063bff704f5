import Curlew
import CurlewTestSupport
import CurlewTesting
import InMemoryTracing
import Instrumentation
import Synchronization
import Testing
import Tracing

/// The process-wide tracer: bootstrapped once, which is why `make test` runs this suite in a process of its own
/// (`--filter TracingBootstrapTests`) and skips it in the others, whose clients must stay untraced.
@Suite("Tracing with a bootstrapped tracer", .serialized)
struct TracingBootstrapTests {
    static let tracer: InMemoryTracer = {
        let tracer = InMemoryTracer()
        InstrumentationSystem.bootstrap(tracer)
        return tracer
    }()

    /// A route-layer call that retries: one client span per attempt, the later ones with their resend count, and
    /// each retry an event on the caller's span. The server counts the attempts.
    @Test
    func retriesAreEventsOnTheCallersSpanAndAttemptsAreClientSpans() async throws {
        let tracer = Self.tracer
        tracer.clearAll()
        let calls = Atomic(0)
        try await withScriptedServer({ _ in
            calls.add(1, ordering: .relaxed).newValue < 3 ? ScriptedResponse(status: 503) : .json("{}")
        }) { server in
            // Created after the bootstrap: the client takes the bootstrapped tracer.
            let client = CurlewClient()
            var provider = TestProvider(baseURL: server.baseURL, transport: client)
            provider.interceptors = [
                RetryPolicy(maxAttempts: 5, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5))
            ]
            let response = try await tracer.withSpan("checkout") { _ in
                try await provider.request(Route(path: "/orders"))
            }
            await client.shutdown()
            #expect(response.status == .ok)
            #expect(server.requestCount == 3)

            let attempts = tracer.finishedSpans.filter { $0.kind == .client }
            #expect(attempts.count == 3)
            #expect(attempts.map { $0.attributes["http.request.resend_count"]?.toSpanAttribute() } == [nil, 1, 2])
            let checkout = try #require(tracer.finishedSpans.first { $0.operationName == "checkout" })
            #expect(checkout.events.map(\.name) == ["http.retry", "http.retry"])
            #expect(checkout.events.first?.attributes["http.response.status_code"]?.toSpanAttribute() == 503)
            #expect(attempts.allSatisfy { $0.traceID == checkout.traceID && $0.parentSpanID == checkout.spanID })
        }
    }

    /// A `Retry-After` too long for milliseconds (about 317 million years), which a policy told to honour any wait
    /// honours: recording its delay on the caller's span overflowed and trapped. It is recorded as the longest.
    @Test
    func aRetryAfterTooLongForMillisecondsIsRecordedAsTheLongestDelayInsteadOfTrapping() async throws {
        let tracer = Self.tracer
        let mock = MockTransport(stubs: [
            .get("/busy", status: .serviceUnavailable, headers: ["Retry-After": "10000000000000000"])
        ])
        var configured = TestProvider(baseURL: "https://api.example.com", transport: mock)
        configured.interceptors = [RetryPolicy(maxRetryAfter: .seconds(Int64.max))]
        let provider = configured
        let events = try await tracer.withSpan("busy") { span in
            let call = Task { try await provider.request(Route(path: "/busy")) }
            defer { call.cancel() }
            try await waitUntil(timeout: .seconds(10), "the retry event") { !span.events.isEmpty }
            return span.events
        }
        #expect(events.first?.name == "http.retry")
        #expect(events.first?.attributes["retry.delay_ms"]?.toSpanAttribute() == .int64(.max))
        #expect(events.first?.attributes["http.response.status_code"]?.toSpanAttribute() == 503)
    }
}
