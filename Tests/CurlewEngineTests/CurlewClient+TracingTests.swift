import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import HTTPTypes
import InMemoryTracing
import Instrumentation
import Synchronization
import Testing
import Tracing

@testable import CurlewEngine

/// A client span per request, checked with swift-distributed-tracing's in-memory tracer; what went out on the
/// wire is checked by the servers' echo of the request's header fields (httpbin, the loopback server).
@Suite("Tracing")
struct CurlewClientTracingTests {
    @Test
    func aRequestGetsAClientSpanWithOpenTelemetryHTTPAttributes() async throws {
        let tracer = InMemoryTracer()
        try await withLoopbackServer { server in
            try await withClient(.thread, configure: { $0.tracer = tracer }) { client in
                var request = try CurlewRequest(method: .post, url: "\(server.baseURL)/echo")
                request.body = .bytes(Array(repeating: 1, count: 1234))
                let response = try await client.execute(request)
                #expect(response.status == .ok)
                let span = try #require(tracer.finishedSpans.only)
                #expect(span.operationName == "POST")
                #expect(span.kind == .client)
                #expect(span.attributes["http.request.method"]?.toSpanAttribute() == "POST")
                #expect(span.attributes["url.full"]?.toSpanAttribute() == .string("\(server.baseURL)/echo"))
                #expect(span.attributes["server.address"]?.toSpanAttribute() == "127.0.0.1")
                #expect(span.attributes["server.port"]?.toSpanAttribute() == .int64(Int64(server.port)))
                #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == 200)
                #expect(span.attributes["http.request.body.size"]?.toSpanAttribute() == 1234)
                #expect(span.attributes["http.response.body.size"]?.toSpanAttribute() == 1234)
                #expect(span.attributes["network.protocol.version"]?.toSpanAttribute() == "1.1")
                #expect(span.status == nil)
            }
        }
    }

    /// The span's context goes out as the tracer propagates it, from the task's `ServiceContext`: httpbin echoes
    /// a W3C `traceparent` whose trace is the caller's and whose parent id is the client span's own.
    @Test
    func theSpanContextGoesOutAsTraceparentFromTheTasksServiceContext() async throws {
        let tracer = W3CInMemoryTracer()
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(.thread, configure: { $0.tracer = tracer }) { client in
            let echoed = try await tracer.withSpan("handler", ofKind: .server) { handler in
                let response = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/headers"))
                let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
                return ((json?["headers"] as? [String: String])?["Traceparent"], handler.context.inMemorySpanContext)
            }
            let clientSpan = try #require(tracer.base.finishedSpans.first { $0.kind == .client })
            let handler = try #require(echoed.1)
            #expect(echoed.0 == "00-\(handler.traceID)-\(clientSpan.spanID)-01")
            #expect(clientSpan.traceID == handler.traceID)
            #expect(clientSpan.parentSpanID == handler.spanID)
        }
    }

    @Test(arguments: [(503, true), (500, true), (404, false), (204, false)])
    func serverErrorsMarkTheSpanAsAnError(status: Int, isError: Bool) async throws {
        let tracer = InMemoryTracer()
        try await withLoopbackServer { server in
            try await withClient(.thread, configure: { $0.tracer = tracer }) { client in
                let response = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/status/\(status)"))
                #expect(response.status.code == status)
                let span = try #require(tracer.finishedSpans.only)
                #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == .int64(Int64(status)))
                #expect((span.status?.code == .error) == isError)
                #expect((span.attributes["error.type"] != nil) == isError)
            }
        }
    }

    @Test
    func aTransportFailureIsRecordedOnTheSpan() async throws {
        let tracer = InMemoryTracer()
        let port = try FreePort.allocate()
        try await withClient(.thread, configure: { $0.tracer = tracer }) { client in
            await #expect(throws: CurlewError.self) {
                _ = try await client.execute(try CurlewRequest(url: "http://127.0.0.1:\(port)/"))
            }
            let span = try #require(tracer.finishedSpans.only)
            #expect(span.status?.code == .error)
            #expect(span.errors.count == 1)
            #expect(span.attributes["error.type"]?.toSpanAttribute() == "connectionRefused")
            #expect(span.attributes["http.response.status_code"] == nil)
        }
    }

    @Test
    func credentialsInTheURLNeverReachTheSpan() async throws {
        let tracer = InMemoryTracer()
        try await withLoopbackServer { server in
            try await withClient(.thread, configure: { $0.tracer = tracer }) { client in
                _ = try await client.execute(
                    try CurlewRequest(url: "http://user:secret@127.0.0.1:\(server.port)/small"))
                let span = try #require(tracer.finishedSpans.only)
                #expect(
                    span.attributes["url.full"]?.toSpanAttribute()
                        == .string("http://REDACTED:REDACTED@127.0.0.1:\(server.port)/small"))
            }
        }
    }

    @Test
    func aRetryingCallersResendCountReachesTheAttemptsSpan() async throws {
        let tracer = InMemoryTracer()
        try await withLoopbackServer { server in
            try await withClient(.thread, configure: { $0.tracer = tracer }) { client in
                var context = ServiceContext.topLevel
                context[HTTPResendCountKey.self] = 2
                _ = try await ServiceContext.withValue(context) {
                    try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
                }
                let span = try #require(tracer.finishedSpans.only)
                #expect(span.attributes["http.request.resend_count"]?.toSpanAttribute() == 2)
            }
        }
    }

    /// Without a tracer nothing is traced and nothing is added to the request.
    @Test
    func withoutATracerNoSpanAndNoPropagationFieldsGoOut() async throws {
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                #expect(client.tracer == nil)
                let response = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/headers"))
                let seen = try JSONDecoder().decode([String: String].self, from: Data(response.body))
                #expect(!seen.keys.contains { $0.contains("trace") })
            }
        }
    }
}

extension Array {
    /// The single element, or `nil` when there are none or several.
    fileprivate var only: Element? { count == 1 ? first : nil }
}

/// The in-memory tracer with W3C-shaped ids and a W3C `traceparent` propagator, as swift-otel's would inject it.
struct W3CInMemoryTracer: Tracer {
    let base = InMemoryTracer(
        idGenerator: .init(
            nextTraceID: { randomHex(bytes: 16) }, nextSpanID: { randomHex(bytes: 8) }))

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        base.startSpan(
            operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID,
            line: line)
    }

    func activeSpan(identifiedBy context: ServiceContext) -> InMemorySpan? {
        base.activeSpan(identifiedBy: context)
    }

    func forceFlush() { base.forceFlush() }

    func inject<Carrier, Inject: Injector>(
        _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {}
}

private func randomHex(bytes: Int) -> String {
    (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}
