import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// Streamed responses (head first, body as an AsyncSequence with backpressure) and downloads to files.
@Suite("Streamed responses and downloads")
struct CurlewClientStreamingTests {
    @Test(arguments: allLoops)
    func aStreamedBodyArrivesInOrderAndComplete(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let count = 3 * 1024 * 1024 + 11
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let response = try await client.stream(try CurlewRequest(url: "\(server.baseURL)/bytes/\(count)"))
                #expect(response.status == .ok)
                #expect(response.headerFields[.contentLength] == String(count))
                #expect(response.body.metrics == nil)
                let expected = patternBytes(count)
                var received = 0
                var intact = true
                for try await chunk in response.body {
                    intact =
                        intact && received + chunk.count <= count
                        && sameBytes(chunk, expected[received..<(received + chunk.count)])
                    received += chunk.count
                }
                #expect(received == count)
                #expect(intact)
                #expect(response.body.metrics?.bytesReceived == Int64(count))
            }
        }
    }

    /// The consumer is far slower than the network and its buffer is small: the transfer pauses and resumes
    /// many times and no byte is lost, duplicated or reordered.
    @Test(arguments: allLoops)
    func aSlowConsumerPausesTheTransferWithoutLosingBytes(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let count = 2 * 1024 * 1024
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                var request = try CurlewRequest(url: "\(server.baseURL)/bytes/\(count)")
                request.timeouts = .init(idle: .milliseconds(300))
                let response = try await client.stream(request, bufferLimit: 32 * 1024)
                var collected: [UInt8] = []
                var chunks = 0
                for try await chunk in response.body {
                    collected += chunk
                    chunks += 1
                    if chunks % 8 == 0 { try await Task.sleep(for: .milliseconds(20)) }  // a slow consumer
                }
                #expect(collected.count == count)
                #expect(sameBytes(collected, patternBytes(count)))
            }
        }
    }

    @Test(arguments: allLoops)
    func theHeadArrivesBeforeABodyTheServerHoldsBack(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                // The only body chunk comes after 60 s: stream() must return with the head long before.
                let request = try CurlewRequest(url: "\(server.baseURL)/fault/slow-body?chunks=1&interval_ms=60000")
                let status = try await withTimeout(.seconds(10), "the head of a held-back body") {
                    let response = try await client.stream(request)
                    #expect(response.body.metrics == nil)
                    return response.status
                }
                #expect(status == .ok)
            }
        }
    }

    @Test(arguments: allLoops)
    func aFailureAfterTheHeadIsThrownByTheBody(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let response = try await client.stream(try CurlewRequest(url: "\(server.baseURL)/fault/close-mid-body"))
                #expect(response.status == .ok)
                let error = await caughtError { _ = try await response.body.collect(upTo: 1 << 26) } as? CurlewError
                #expect(error?.code == .connectionClosed)
            }
        }
    }

    @Test(arguments: allLoops)
    func statusesRedirectsAndEmptyBodiesStream(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let notFound = try await client.stream(try CurlewRequest(url: "\(httpbin.baseURL)/status/404"))
            #expect(notFound.status == .notFound)
            #expect(try await notFound.body.collect(upTo: 1024).isEmpty)

            let redirected = try await client.stream(try CurlewRequest(url: "\(httpbin.baseURL)/redirect/2"))
            #expect(redirected.status == .ok)
            #expect(redirected.url.hasSuffix("/get"))
            let json = try JSONSerialization.jsonObject(with: Data(try await redirected.body.collect(upTo: 1 << 20)))
            #expect((json as? [String: Any])?["url"] as? String == "\(httpbin.baseURL)/get")

            let head = try await client.stream(try CurlewRequest(method: .head, url: "\(httpbin.baseURL)/get"))
            #expect(head.status == .ok)
            #expect(try await head.body.collect(upTo: 1024).isEmpty)
        }
    }

    @Test(arguments: allLoops)
    func abandoningABodyCancelsItsTransfer(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withLoopbackServer { server in
            // One connection in all: the next request can only run if the abandoned transfer let go of it.
            try await withClient(
                loop,
                configure: {
                    $0.loopCount = 1
                    $0.maxConnectionsPerHost = 1
                }
            ) { client in
                do {
                    let response = try await client.stream(
                        try CurlewRequest(url: "\(server.baseURL)/bytes/\(200 * 1024 * 1024)"), bufferLimit: 64 * 1024)
                    var iterator = response.body.makeAsyncIterator()
                    _ = try await iterator.next()
                }
                var next = try CurlewRequest(url: "\(server.baseURL)/small")
                next.timeouts = .init(total: .seconds(5))
                #expect(try await client.execute(next).status == .ok)
            }
        }
    }

    /// The transfer ends when its reader is cancelled, not when the client shuts down: the server sees its
    /// connection closed while the client is still running, and nothing is left in flight.
    @Test(arguments: allLoops)
    func cancellingTheReaderEndsTheTransfer(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        // A head and 10 of the body's 100 bytes, and then nothing, ever: the reader cannot have read it all before
        // it is cancelled, however long the test process stalls.
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"
        try await withWireScriptServer({ _ in [.send(Array(head.utf8)), .waitForRelease("never")] }) { server in
            try await withClient(loop) { client in
                let response = try await client.stream(try CurlewRequest(url: "\(server.baseURL)/stalls"))
                let reader = Task {
                    var total = 0
                    for try await chunk in response.body { total += chunk.count }
                    return total
                }
                reader.cancel()
                let outcome = await reader.result
                #expect(throws: CancellationError.self) { try outcome.get() }
                try await waitUntil(
                    timeout: .seconds(20),
                    "the connection closed at the server (\(server.closedConnectionCount)) and nothing in flight"
                        + " (\(client.inFlightRequestCount))"
                ) { server.closedConnectionCount == 1 && client.inFlightRequestCount == 0 }
                #expect(server.connectionCount == 1)
            }
        }
    }

    /// 50 multiplexed streams on one HTTP/2 connection, each consumer slow, each transfer paused and resumed.
    @Test
    func fiftyPausedHTTP2StreamsAllComplete() async throws {
        let nginx = try await NginxServer.shared()
        let size = 160 * 1024
        let file = nginx.scratchDirectory + "/stream-\(UUID().uuidString).bin"
        let bytes = patternBytes(size)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        let url = "\(nginx.httpsBaseURL)/dav/\(URL(fileURLWithPath: file).lastPathComponent)"
        try await withClient(
            .thread,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.loopCount = 1
            }
        ) { client in
            // Warm the connection so all 50 streams share it (libcurl 7.88 counts a cold one as full at 100).
            _ = try await client.execute(try CurlewRequest(url: url))
            try await withThrowingTaskGroup(of: (Bool, TransferMetrics.HTTPVersion).self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        let response = try await client.stream(try CurlewRequest(url: url), bufferLimit: 16 * 1024)
                        var collected: [UInt8] = []
                        for try await chunk in response.body {
                            collected += chunk
                            await Task.yield()
                        }
                        return (sameBytes(collected, bytes), response.headMetrics.httpVersion)
                    }
                }
                var completed = 0
                for try await (intact, version) in group {
                    #expect(intact)
                    #expect(version == .http2)
                    completed += 1
                }
                #expect(completed == 50)
            }
        }
    }

    /// A consumer that stops reading must not hold up the other streams of its HTTP/2 connection.
    @Test
    func aStalledStreamDoesNotBlockItsConnectionsOtherStreams() async throws {
        let nginx = try await NginxServer.shared()
        let name = "stall-\(UUID().uuidString).bin"
        let file = nginx.scratchDirectory + "/" + name
        try Data(patternBytes(4 * 1024 * 1024)).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        let url = "\(nginx.httpsBaseURL)/dav/\(name)"
        try await withClient(
            .thread,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.loopCount = 1
            }
        ) { client in
            _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
            let stalled = try await client.stream(try CurlewRequest(url: url), bufferLimit: 16 * 1024)
            var iterator = stalled.body.makeAsyncIterator()
            _ = try await iterator.next()  // then never again
            let (count, port, version) = try await withTimeout(.seconds(10), "a second stream on the same connection") {
                let response = try await client.stream(try CurlewRequest(url: url))
                let count = try await response.body.collect(upTo: 8 * 1024 * 1024).count
                return (count, response.headMetrics.localPort, response.headMetrics.httpVersion)
            }
            #expect(count == 4 * 1024 * 1024)
            #expect(version == .http2)
            #expect(port == stalled.headMetrics.localPort)
        }
    }

    /// libcurl 7.88 keeps a handle's receive buffer when its transfer ends on a connection other streams still
    /// use, and then refuses CURLOPT_BUFFERSIZE on it; streaming on such a pooled handle must still work.
    @Test
    func streamsRunOnHandlesReusedFromMultiplexedTransfers() async throws {
        let nginx = try await NginxServer.shared()
        try await withClient(
            .thread,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.loopCount = 1
            }
        ) { client in
            let small = try CurlewRequest(url: "\(nginx.httpsBaseURL)/small")
            _ = try await client.execute(small)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 { group.addTask { _ = try await client.execute(small) } }
                try await group.waitForAll()
            }
            // Concurrent, so they take every pooled handle, not only the one that finished last.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await client.stream(small).body.collect(upTo: 1024).count }
                }
                for try await count in group { #expect(count == LoopbackServer.smallBody.utf8.count) }
            }
        }
    }

    /// The client's size limit bounds memory, so it binds collected bodies only, also when a discarded and a
    /// collected plain GET take turns on one pooled handle (the limit is the one plain-GET option that differs).
    @Test(arguments: allLoops)
    func theClientsSizeLimitBindsCollectedBodiesNotDiscardedOnesOnOneHandle(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withLoopbackServer { server in
            try await withClient(
                loop,
                configure: {
                    $0.loopCount = 1
                    $0.maxResponseBodySize = 1_000
                }
            ) { client in
                let small = try CurlewRequest(url: "\(server.baseURL)/bytes/100")
                let large = try CurlewRequest(url: "\(server.baseURL)/bytes/100000")
                for _ in 0..<2 {
                    #expect(try await client.execute(small).body.count == 100)
                    let discarded = try await client.executeDiscardingBody(large)
                    #expect(discarded.metrics.bytesReceived == 100_000)
                    let code = await curlewErrorCode { _ = try await client.execute(large) }
                    #expect(code == .bodyTooLarge)
                }
            }
        }
    }

    @Test(arguments: allLoops)
    func aDiscardedBodyIsCountedNotKeptAndTheNextRequestCollectsAgain(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop, configure: { $0.loopCount = 1 }) { client in
                let request = try CurlewRequest(url: "\(server.baseURL)/bytes/100000")
                for _ in 0..<3 {
                    // Alternating on one pooled handle: the plain-GET options fit both, the sink is per transfer.
                    let discarded = try await client.executeDiscardingBody(request)
                    #expect(discarded.status == .ok)
                    #expect(discarded.body.isEmpty)
                    #expect(discarded.metrics.bytesReceived == 100_000)
                    let collected = try await client.execute(request)
                    #expect(sameBytes(collected.body, patternBytes(100_000)))
                }
            }
        }
    }

    // MARK: downloads

    @Test(arguments: allLoops)
    func aDownloadLandsWhole(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/download.bin"
        let count = 4 * 1024 * 1024 + 1
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let response = try await client.download(
                    try CurlewRequest(url: "\(server.baseURL)/bytes/\(count)"), to: path)
                #expect(response.status == .ok)
                #expect(response.body.isEmpty)
                #expect(response.metrics.bytesReceived == Int64(count))
            }
        }
        let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(written.count == count)
        #expect(sameBytes(written, patternBytes(count)))
        #expect(try directory.entries() == ["download.bin"])
    }

    @Test(arguments: allLoops)
    func anEmptyDownloadIsAnEmptyFile(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let directory = try TemporaryDirectory()
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let response = try await client.download(
                    try CurlewRequest(url: "\(server.baseURL)/bytes/0"), to: directory.path + "/empty")
                #expect(response.status == .ok)
            }
        }
        #expect(try directory.entries() == ["empty"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/empty")).isEmpty)
    }

    @Test(arguments: allLoops)
    func aFailedOrRefusedDownloadLeavesNoFile(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/download.bin"
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let broken = await curlewErrorCode {
                    _ = try await client.download(
                        try CurlewRequest(url: "\(server.baseURL)/fault/close-mid-body"), to: path)
                }
                #expect(broken == .connectionClosed)

                let missing = try await client.download(
                    try CurlewRequest(url: "\(server.baseURL)/status/404"), to: path)
                #expect(missing.status == .notFound)

                let unwritable = await curlewErrorCode {
                    _ = try await client.download(
                        try CurlewRequest(url: "\(server.baseURL)/small"), to: directory.path + "/missing/dir/file")
                }
                #expect(unwritable == .downloadFailed)
            }
        }
        #expect(try directory.entries().isEmpty)
    }

    @Test(arguments: allLoops)
    func aCancelledDownloadLeavesNoFile(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let directory = try TemporaryDirectory()
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                // The body's one chunk comes after 10 minutes: the download cannot end before it is cancelled,
                // however long the test process stalls (a 5 s body once could, on CI).
                let download = Task {
                    try await client.download(
                        try CurlewRequest(url: "\(server.baseURL)/fault/slow-body?chunks=1&interval_ms=600000"),
                        to: directory.path + "/download.bin")
                }
                // Cancelled while the body is awaited: the partial file exists and the server has the request.
                try await waitUntil(timeout: .seconds(30)) {
                    (try? directory.entries().count) == 1 && server.requestsServed >= 1
                }
                download.cancel()
                let outcome = await download.result
                #expect(throws: CancellationError.self) { try outcome.get() }
            }
        }
        #expect(try directory.entries().isEmpty)
    }

    // MARK: progress

    @Test(arguments: allLoops)
    func uploadProgressIsMonotonicAndEndsWithTheWholeBody(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let file = try TemporaryFile(randomBytes: 8 * 1024 * 1024)
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                var request = try CurlewRequest(
                    method: .put, url: "\(server.baseURL)/upload", body: .file(.path(file.path)))
                request.progressInterval = .milliseconds(1)
                let updates = request.progressUpdates()
                let collector = Task {
                    var seen: [TransferProgress] = []
                    for await progress in updates { seen.append(progress) }
                    return seen
                }
                _ = try await client.execute(request)
                let seen = await collector.value
                let last = try #require(seen.last)
                #expect(last.isComplete)
                #expect(last.bytesSent == Int64(file.bytes.count))
                #expect(last.totalBytesToSend == Int64(file.bytes.count))
                #expect(last.uploadFraction == 1)
                #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.bytesSent <= $1.bytesSent })
            }
        }
    }

    @Test(arguments: allLoops)
    func downloadProgressReportsTheAnnouncedTotalAndIsThrottled(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let count = 2 * 1024 * 1024
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let calls = Mutex<[TransferProgress]>([])
                var request = try CurlewRequest(url: "\(server.baseURL)/fault/slow-body?chunks=6&interval_ms=60")
                request.progressInterval = .milliseconds(100)
                request.onProgress = { progress in calls.withLock { $0.append(progress) } }
                let clock = ContinuousClock()
                let started = clock.now
                _ = try await client.execute(request)
                let elapsed = clock.now - started
                let seen = calls.withLock { $0 }
                // About 360 ms of transfer: at most one report per 100 ms of it, plus the first and the final one.
                // Bounded by the time the transfer really took, which a stalled CI machine stretches.
                let allowed = Int(elapsed / .milliseconds(100)) + 2
                #expect(seen.count >= 2 && seen.count <= allowed, "\(seen.count) reports in \(elapsed)")
                #expect(seen.last?.isComplete == true)

                var sized = try CurlewRequest(url: "\(server.baseURL)/bytes/\(count)")
                let last = Mutex<TransferProgress?>(nil)
                sized.onProgress = { progress in last.withLock { $0 = progress } }
                _ = try await client.execute(sized)
                let final = try #require(last.withLock { $0 })
                #expect(final.bytesReceived == Int64(count))
                #expect(final.totalBytesToReceive == Int64(count))
                #expect(final.downloadFraction == 1)
            }
        }
    }
}

/// A fresh temporary directory, removed with its contents when released.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "curlew-dir-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    func entries() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
