import Curlew
import CurlewEngine
import CurlewTestSupport
import Foundation
import Synchronization
import Testing

@Suite struct RouteBodyTests {
    @Test func streamedBodiesAreSentAsProduced() async throws {
        let provider = TestProvider(baseURL: try await HTTPBinServer.shared().baseURL)
        let chunks = AsyncStream<[UInt8]> { continuation in
            for index in 0..<5 { continuation.yield(Array("line \(index)\n".utf8)) }
            continuation.finish()
        }
        let echo = try Echo(
            try await provider.request(
                Route(
                    path: "/anything", method: .post,
                    body: .stream(RequestBodyStream(chunks), contentType: "text/plain"))))
        #expect(echo.data == "line 0\nline 1\nline 2\nline 3\nline 4\n")
        #expect(echo.header("Content-Type") == "text/plain")
    }

    @Test func aStreamedBodyIsNeverRetried() async throws {
        try await withScriptedServer({ _ in ScriptedResponse(status: 503) }) { server in
            var provider = TestProvider(baseURL: server.baseURL)
            provider.interceptors = [
                RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1), retriesNonIdempotentMethods: true)
            ]
            let chunks = AsyncStream<[UInt8]> { continuation in
                continuation.yield(Array("once".utf8))
                continuation.finish()
            }
            await #expect(throws: ProviderError.self) {
                try await provider.request(
                    Route(path: "/upload", method: .put, body: .stream(RequestBodyStream(chunks))))
            }
            #expect(server.requestCount == 1)
            // The same route with bytes is retried.
            await #expect(throws: ProviderError.self) {
                try await provider.request(Route(path: "/upload", method: .put, body: .bytes(Array("again".utf8))))
            }
            #expect(server.requestCount == 1 + 3)
        }
    }

    @Test func replayabilityFollowsTheKindOfBody() {
        var form = MultipartForm()
        form.append(value: "a", forKey: "b")
        #expect(RouteBody.multipart(form).isReplayable)
        #expect(RouteBody.bytes([1]).isReplayable)
        #expect(RouteBody.file("/etc/hostname").isReplayable)
        let (stream, _) = RequestBodyStream.makeStream()
        #expect(!RouteBody.stream(stream).isReplayable)
        form.append(stream: stream, forKey: "c")
        #expect(!RouteBody.multipart(form).isReplayable)
    }

    @Test func fileBodiesAreSentFromDisk() async throws {
        let path = NSTemporaryDirectory() + "curlew-body-" + UUID().uuidString
        try "from a file".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let provider = TestProvider(baseURL: try await HTTPBinServer.shared().baseURL)
        let echo = try Echo(
            try await provider.request(
                Route(path: "/anything", method: .put, body: .file(path, contentType: "text/plain"))))
        #expect(echo.data == "from a file")
        #expect(
            try provider.curlCommand(for: Route(path: "/x", method: .put, body: .file(path))).contains(
                "--data-binary @\(path)"))
    }
}
