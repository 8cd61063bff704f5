import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Testing

@Suite("Body size limits")
struct CurlewClientLimitsTests {
    @Test(arguments: allLoops)
    func announcedBodyOverTheLimitIsRefused(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.maxResponseBodySize = 10_000 }) { client in
            let code = await curlewErrorCode {
                _ = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/bytes/20000"))
            }
            #expect(code == .bodyTooLarge)
            // Exactly at the limit is fine.
            let exact = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/bytes/10000"))
            #expect(exact.body.count == 10_000)
        }
    }

    @Test(arguments: allLoops)
    func unannouncedBodyOverTheLimitIsStopped(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            // /stream-bytes is chunked: no length to check up front, so the write callback enforces the limit.
            var request = try CurlewRequest(url: "\(httpbin.baseURL)/stream-bytes/50000?chunk_size=1000")
            request.maxResponseBodySize = 20_000
            let code = await curlewErrorCode { _ = try await client.execute(request) }
            #expect(code == .bodyTooLarge)
        }
    }

    @Test(arguments: allLoops)
    func decodedSizeOfCompressedBodiesHasItsOwnLimit(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.decompression = .enabledWithLimit(64) }) { client in
            let code = await curlewErrorCode {
                _ = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/gzip"))
            }
            #expect(code == .bodyTooLarge)
            // An uncompressed body of the same size is not affected by the decompression limit.
            let plain = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/bytes/1000"))
            #expect(plain.body.count == 1000)
        }
    }
}

@Suite("Large bodies")
struct CurlewClientLargeBodyTests {
    @Test(arguments: allLoops)
    func aLargeBodyArrivesByteForByte(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let size = 16 * 1024 * 1024
                let response = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/bytes/\(size)"))
                #expect(response.body.count == size)
                let firstMismatch = response.body.indices.first { response.body[$0] != LoopbackServer.patternByte(at: $0) }
                #expect(firstMismatch == nil)
                #expect(response.metrics.bytesReceived == Int64(size))
            }
        }
    }
}
