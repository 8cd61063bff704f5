import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Synchronization
import Testing

/// Request bodies produced while they are sent: backpressure both ways, exact lengths, chunked when unknown,
/// and a typed error instead of a wrong body when a one-shot stream would have to be sent twice.
@Suite("Stream request bodies")
struct RequestBodyStreamTests {
    @Test(arguments: allLoops)
    func aStreamOfKnownLengthArrivesByteForByteWithContentLength(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let bytes = try randomBytes(3 * 1024 * 1024 + 5)
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let stream = RequestBodyStream(chunkedStream(bytes, chunkSize: 70_000), length: Int64(bytes.count))
                let request = try CurlewRequest(method: .put, url: "\(server.baseURL)/upload", body: .stream(stream))
                let response = try await client.execute(request)
                let json = try response.json()
                #expect(json["bytes"] as? Int == bytes.count)
                #expect(json["fnv1a64"] as? String == checksum(bytes[...]))
                #expect(response.metrics.bytesSent == Int64(bytes.count))
            }
        }
    }

    @Test(arguments: allLoops)
    func aStreamOfUnknownLengthGoesOutChunked(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let bytes = try randomBytes(1_000_003)
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let upload = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/upload",
                    body: .stream(RequestBodyStream(chunkedStream(bytes, chunkSize: 4096))))
                let json = try await client.execute(upload).json()
                #expect(json["bytes"] as? Int == bytes.count)
                #expect(json["fnv1a64"] as? String == checksum(bytes[...]))

                let headers = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/headers",
                    body: .stream(RequestBodyStream(chunkedStream(Array("abc".utf8), chunkSize: 1))))
                let echoed = try await client.execute(headers).text.lowercased()
                #expect(echoed.contains("chunked"))
                #expect(!echoed.contains("content-length"))
            }
        }
    }

    /// The producer is slower than the network, so the read callback finds the buffer empty again and again
    /// and the transfer pauses and resumes each time.
    @Test(arguments: allLoops)
    func aSlowWriterPausesTheUploadWithoutLosingOrReorderingBytes(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let chunks = try (0..<40).map { _ in try randomBytes(3000) }
        let all = chunks.flatMap { $0 }
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let (stream, writer) = RequestBodyStream.makeStream(bufferLimit: 4096)
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                async let response = client.execute(request)
                for chunk in chunks {
                    try await writer.write(chunk)
                    try await Task.sleep(for: .milliseconds(2))  // a slow producer, not synchronisation
                }
                writer.finish()
                let json = try await response.json()
                #expect(json["bytes"] as? Int == all.count)
                #expect(json["fnv1a64"] as? String == checksum(all[...]))
            }
        }
    }

    @Test(arguments: allLoops)
    func theWriterWaitsWhileTheBufferIsFull(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let listener = try UnreadListener()
        do {
            try await withClient(loop) { client in
                // The server never reads: once the socket buffers are full the writer must wait.
                let (stream, writer) = RequestBodyStream.makeStream(bufferLimit: 64 * 1024)
                var request = try CurlewRequest(
                    method: .post, url: "http://127.0.0.1:\(listener.port)/upload", body: .stream(stream))
                request.timeouts = .init(total: .seconds(20))
                let transfer = Task { try await client.execute(request) }
                let written = Counter()
                let producer = Task {
                    let chunk = [UInt8](repeating: 1, count: 16 * 1024)
                    while true {
                        try await writer.write(chunk)
                        written.add(chunk.count)
                    }
                }
                // The socket buffers take some; then the writer must block well below 64 MiB.
                try await waitUntil(timeout: .seconds(10)) { written.value > 64 * 1024 }
                let settled = written.value
                try await Task.sleep(for: .milliseconds(300))
                #expect(written.value < 32 * 1024 * 1024, "the writer ran \(written.value) bytes ahead")
                #expect(written.value - settled < 16 * 1024 * 1024)
                transfer.cancel()
                _ = await transfer.result
                // The transfer ended: the blocked writer is released with an error rather than hanging.
                let outcome = await producer.result
                #expect(throws: CurlewError.self) { try outcome.get() }
            }
        }
    }

    @Test(arguments: allLoops)
    func aStreamThatFailsFailsTheRequest(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        struct ProducerFailure: Error {}
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let failing = AsyncThrowingStream<[UInt8], any Error> { continuation in
                    continuation.yield(Array(repeating: 1, count: 1000))
                    continuation.finish(throwing: ProducerFailure())
                }
                let request = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/upload", body: .stream(RequestBodyStream(failing)))
                let error = await caughtError { _ = try await client.execute(request) } as? CurlewError
                #expect(error?.code == .requestBodyFailed)
                #expect(error?.detail.contains("ProducerFailure") == true)
            }
        }
    }

    @Test(arguments: allLoops, [999, 1001])
    func aStreamThatDoesNotMatchItsDeclaredLengthFails(
        loop: CurlewClient.Configuration.EventLoopKind, produced: Int
    ) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let stream = RequestBodyStream(
                    chunkedStream([UInt8](repeating: 2, count: produced), chunkSize: 100), length: 1000)
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                #expect(await curlewErrorCode { _ = try await client.execute(request) } == .requestBodyFailed)
            }
        }
    }

    /// libcurl reads no body of a request announced as empty: the request waits for its producer, and a byte or a
    /// failure fails it before anything is sent.
    @Test(arguments: allLoops)
    func aStreamAnnouncedAsEmptyThatWritesOrFailsSendsNothing(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        struct ProducerFailure: Error {}
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let writing = RequestBodyStream(chunkedStream(Array("late".utf8), chunkSize: 2), length: 0)
                let failing = RequestBodyStream(
                    AsyncThrowingStream<[UInt8], any Error> { $0.finish(throwing: ProducerFailure()) }, length: 0)
                for stream in [writing, failing] {
                    let request = try CurlewRequest(
                        method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                    let error = await caughtError { _ = try await client.execute(request) } as? CurlewError
                    #expect(error?.code == .requestBodyFailed, "\(String(describing: error))")
                }
                #expect(server.requestsServed == 0)

                // A writer that finishes without a byte, after the request was made: sent once, empty.
                let (stream, writer) = RequestBodyStream.makeStream(length: 0)
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                async let response = client.execute(request)
                writer.finish()
                #expect(try await response.json()["bytes"] as? Int == 0)
                #expect(server.requestsServed == 1)
                #expect(await curlewErrorCode { _ = try await client.execute(request) } == .requestBodyNotReplayable)

                // A writer past the announced zero, after the request was made.
                let (late, lateWriter) = RequestBodyStream.makeStream(length: 0)
                let lateRequest = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/upload", body: .stream(late))
                async let lateCode = curlewErrorCode { _ = try await client.execute(lateRequest) }
                try? await lateWriter.write([1])
                #expect(await lateCode == .requestBodyFailed)
                #expect(server.requestsServed == 1)
            }
        }
    }

    @Test func aRequestWaitingForItsEmptyStreamCountsTheWaitAgainstItsTotalTimeout() async throws {
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                let (stream, writer) = RequestBodyStream.makeStream(length: 0)
                var request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                request.timeouts = .init(total: .milliseconds(300))
                let bounded = request
                let code = try await withTimeout(.seconds(30), "the waiting request") {
                    await curlewErrorCode { _ = try await client.execute(bounded) }
                }
                #expect(code == .timeout(.total))
                await #expect(throws: CurlewError.self) { try await writer.write([1]) }
                #expect(server.requestsServed == 0)
            }
        }
    }

    @Test func aShutDownClientRefusesARequestWithAnEmptyStreamWithoutWaitingForIt() async throws {
        let client = CurlewClient()
        await client.shutdown()
        let (stream, _) = RequestBodyStream.makeStream(length: 0)
        let request = try CurlewRequest(method: .post, url: "http://127.0.0.1:9/upload", body: .stream(stream))
        let code = try await withTimeout(.seconds(30), "the refused request") {
            await curlewErrorCode { _ = try await client.execute(request) }
        }
        #expect(code == .clientShutdown)
    }

    @Test func cancellingARequestWaitingForItsEmptyStreamEndsItAndReleasesTheWriter() async throws {
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                let (stream, writer) = RequestBodyStream.makeStream(length: 0)
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                let transfer = Task { try await client.execute(request) }
                transfer.cancel()
                let outcome = try await withTimeout(.seconds(30), "the cancelled request") { await transfer.result }
                #expect(throws: CancellationError.self) { try outcome.get() }
                await #expect(throws: CurlewError.self) { try await writer.write([1]) }
                #expect(server.requestsServed == 0)
            }
        }
    }

    /// The last byte of a declared length waits for the producer; a producer that goes on writing must fail the
    /// request even when its buffer holds a single byte.
    @Test(arguments: allLoops)
    func aWriterPastTheDeclaredLengthFailsTheRequestWithATinyBuffer(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let (stream, writer) = RequestBodyStream.makeStream(length: 3, bufferLimit: 1)
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                async let code = curlewErrorCode { _ = try await client.execute(request) }
                // A bound against a hang, not a measure: 10 s ran out in CI's main run when the machine stalled.
                try await withTimeout(.seconds(30), "the writer") {
                    for byte in Array("abcd".utf8) { try? await writer.write([byte]) }
                }
                #expect(await code == .requestBodyFailed)
            }
        }
    }

    @Test(arguments: allLoops)
    func aStreamIsSentOnceAndASecondExecutionFailsWithoutSending(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let request = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/upload",
                    body: .stream(RequestBodyStream(chunkedStream(Array("once".utf8), chunkSize: 2))))
                let first = try await client.execute(request).json()
                #expect(first["bytes"] as? Int == 4)
                #expect(await curlewErrorCode { _ = try await client.execute(request) } == .requestBodyNotReplayable)
                #expect(server.requestsServed == 1)
            }
        }
    }

    /// The server reads the whole body before it answers 307, so the stream has been sent when libcurl must
    /// send it again.
    @Test(arguments: allLoops)
    func aSentStreamIsNotReplayedOnA307(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withScriptedServer({ request in
            request.path == "/first"
                ? ScriptedResponse(status: 307, headers: [("Location", "/second")])
                : .json(#"{"bytes": \#(request.body.count)}"#)
        }) { server in
            try await withClient(loop) { client in
                let request = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/first",
                    body: .stream(RequestBodyStream(chunkedStream(Array("streamed once".utf8), chunkSize: 4))))
                let error = await caughtError { _ = try await client.execute(request) } as? CurlewError
                #expect(error?.code == .requestBodyNotReplayable)
                #expect(server.requestCount == 1)
            }
        }
    }

    /// libcurl 7.88 does not report a transfer done while its send side is paused, even when the server has
    /// answered in full without reading the body; the engine resumes the upload when the final response arrives.
    @Test(arguments: allLoops)
    func aServerThatAnswersBeforeReadingAPausedStreamEndsTheRequest(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let (stream, writer) = RequestBodyStream.makeStream()
            let request = try CurlewRequest(method: .post, url: "\(httpbin.baseURL)/status/413", body: .stream(stream))
            try await writer.write(Array("the producer then goes quiet".utf8))
            let status = try await withTimeout(.seconds(10), "the early answer") {
                try await client.execute(request).status.code
            }
            #expect(status == 413)
        }
    }

    /// The same for a redirect the engine would follow (it cannot send a stream again) and for a 417 (the engine
    /// sends `Expect` itself, so libcurl does not retry it): answered before the paused stream was read, the request
    /// ends at once rather than when the producer next writes.
    @Test(arguments: allLoops, [307, 417])
    func aRedirectOrA417BeforeAPausedStreamWasReadEndsTheRequest(
        loop: CurlewClient.Configuration.EventLoopKind, status: Int
    ) async throws {
        try await withWireScriptServer({ request in
            request.target == "/early"
                ? [.response(status: status, headers: [("Location", "/elsewhere")], body: "")]
                : [.response(body: "elsewhere")]
        }) { server in
            try await withClient(loop) { client in
                let (stream, writer) = RequestBodyStream.makeStream()
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/early", body: .stream(stream))
                try await writer.write(Array("the producer then goes quiet".utf8))
                let outcome = try await withTimeout(.seconds(10), "the early answer") {
                    do {
                        return "status \(try await client.execute(request).status.code)"
                    } catch let error as CurlewError {
                        return error.code.name
                    }
                }
                #expect(outcome == (status == 307 ? CurlewError.Code.requestBodyNotReplayable.name : "status 417"))
                #expect(!server.requests.contains { $0.target == "/elsewhere" })
            }
        }
    }

    @Test
    func aRequestToAShutDownClientReleasesItsWriterAndEndsItsProgress() async throws {
        let client = CurlewClient()
        await client.shutdown()
        let (stream, writer) = RequestBodyStream.makeStream(bufferLimit: 16)
        var request = try CurlewRequest(method: .post, url: "http://127.0.0.1:9/upload", body: .stream(stream))
        let updates = request.progressUpdates()
        #expect(await curlewErrorCode { _ = try await client.execute(request) } == .clientShutdown)
        var last: TransferProgress?
        for await progress in updates { last = progress }
        #expect(last?.isComplete == true)
        await #expect(throws: CurlewError.self) {
            for _ in 0..<10 { try await writer.write(Array(repeating: 1, count: 16)) }
        }
    }

    /// Waiting for one's own producer is not the server being silent.
    @Test(arguments: allLoops)
    func anUploadPausedForItsProducerIsNotIdle(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let (stream, writer) = RequestBodyStream.makeStream()
                var request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                // Wide enough that a test machine busy with other suites answers well within it once the body is
                // sent (an idle wait for the response is real idleness, and 200 ms was once not enough).
                request.timeouts = .init(idle: .seconds(1))
                async let response = client.execute(request)
                try await writer.write(Array("first".utf8))
                try await Task.sleep(for: .milliseconds(2_500))  // the producer is slow: two and a half idle periods
                try await writer.write(Array("second".utf8))
                writer.finish()
                #expect(try await response.json()["bytes"] as? Int == 11)
            }
        }
    }

    @Test(arguments: allLoops)
    func cancellingAPausedUploadEndsItAndReleasesTheWriter(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let (stream, writer) = RequestBodyStream.makeStream(bufferLimit: 1024)
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: .stream(stream))
                let transfer = Task { try await client.execute(request) }
                try await writer.write(Array(repeating: 3, count: 100))
                transfer.cancel()
                let outcome = await transfer.result
                #expect(throws: CancellationError.self) { try outcome.get() }
                await #expect(throws: CurlewError.self) {
                    for _ in 0..<100 { try await writer.write(Array(repeating: 3, count: 1024)) }
                }
            }
        }
    }

    @Test
    func aStreamUploadOverHTTP2GoesOutAsDataFramesWithoutALength() async throws {
        let nginx = try await NginxServer.shared()
        let bytes = try randomBytes(2 * 1024 * 1024)
        try await withClient(.thread, configure: { $0.tls.caFile = nginx.caFile }) { client in
            let request = try CurlewRequest(
                method: .post, url: "\(nginx.httpsBaseURL)/upload",
                body: .stream(RequestBodyStream(chunkedStream(bytes, chunkSize: 50_000))))
            let response = try await client.execute(request)
            #expect(response.metrics.httpVersion == .http2)
            #expect(try response.json()["bytes"] as? Int == bytes.count)
        }
    }

    /// 50 uploads multiplexed on one HTTP/2 connection, each producer slower than the network, so every stream
    /// pauses and resumes while the others go on.
    @Test
    func fiftyPausedHTTP2UploadsAllArriveWhole() async throws {
        let nginx = try await NginxServer.shared()
        let chunk = try randomBytes(8 * 1024)
        try await withClient(
            .thread,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.loopCount = 1
            }
        ) { client in
            // Warm the connection so all 50 streams share it (libcurl 7.88 counts a cold one as full at 100).
            _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
            try await withThrowingTaskGroup(of: (Int?, TransferMetrics).self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        let (stream, writer) = RequestBodyStream.makeStream(bufferLimit: 8 * 1024)
                        let request = try CurlewRequest(
                            method: .post, url: "\(nginx.httpsBaseURL)/upload", body: .stream(stream))
                        async let response = client.execute(request)
                        for _ in 0..<8 {
                            try await writer.write(chunk)
                            try await Task.sleep(for: .milliseconds(5))  // a slow producer, not synchronisation
                        }
                        writer.finish()
                        let finished = try await response
                        return (try finished.json()["bytes"] as? Int, finished.metrics)
                    }
                }
                var ports = Set<Int>()
                var completed = 0
                for try await (bytes, metrics) in group {
                    #expect(bytes == 8 * chunk.count)
                    #expect(metrics.httpVersion == .http2)
                    ports.insert(metrics.localPort)
                    completed += 1
                }
                #expect(completed == 50)
                #expect(ports.count == 1)
            }
        }
    }
}

/// A thread-safe counter for producers observed from the test.
final class Counter: Sendable {
    private let storage = Mutex(0)
    var value: Int { storage.withLock { $0 } }
    func add(_ amount: Int) { storage.withLock { $0 += amount } }
}
