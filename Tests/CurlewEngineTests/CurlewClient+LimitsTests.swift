import CurlewEngine
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
