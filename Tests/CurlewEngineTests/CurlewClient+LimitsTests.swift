import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Glibc
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
                #expect(firstPatternMismatch(in: response.body) == nil)
                #expect(response.metrics.bytesReceived == Int64(size))
            }
        }
    }
}

/// The first offset whose byte differs from the loopback server's pattern (byte i is i % 251), compared one
/// 251-byte period at a time with memcmp: a byte-by-byte loop in a debug build keeps a cooperative thread busy for
/// seconds, which delays every other test's continuations.
func firstPatternMismatch(in body: [UInt8]) -> Int? {
    let period = (0..<251).map { LoopbackServer.patternByte(at: $0) }
    return body.withUnsafeBytes { bytes -> Int? in
        period.withUnsafeBytes { expected -> Int? in
            var offset = 0
            while offset < bytes.count {
                let length = min(251, bytes.count - offset)
                if memcmp(bytes.baseAddress! + offset, expected.baseAddress!, length) != 0 {
                    return (offset..<offset + length).first { bytes[$0] != expected[$0 - offset] }
                }
                offset += length
            }
            return nil
        }
    }
}
