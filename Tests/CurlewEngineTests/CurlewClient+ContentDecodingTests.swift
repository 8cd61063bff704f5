import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewEngine

/// Content-encoded responses from the fault server over HTTP/1.1 and HTTP/2, each framed by an exact Content-Length,
/// so libcurl sees nothing wrong with any of them: the engine decodes them itself, and a coding that ends before the
/// body does, or has bytes after its end, fails the request instead of arriving as a shorter body.
@Suite struct ContentDecodingTests {
    static let wholeKinds = ["gzip", "deflate", "raw-deflate", "raw-deflate-adler", "br", "gzip-members"]
    static let brokenKinds = ["gzip-cut", "deflate-cut", "br-cut", "gzip-trailing", "compress"]

    /// Runs `body` with a fault server of its own and a client on `loop` that trusts its CA.
    private func withFaultServerAndClient(
        _ loop: CurlewClient.Configuration.EventLoopKind,
        configure: (inout CurlewClient.Configuration) -> Void = { _ in },
        _ body: (FaultServer, CurlewClient) async throws -> Void
    ) async throws {
        let server = try await FaultServer.start()
        defer { server.stop() }
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = server.caFile
                configure(&$0)
            }
        ) { client in try await body(server, client) }
    }

    @Test(arguments: allLoops)
    func encodedBodiesDecodeToTheBodyTheServerMeant(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withFaultServerAndClient(loop) { server, client in
            for base in [server.http1BaseURL, server.http2BaseURL] {
                for kind in Self.wholeKinds {
                    let id = "\(kind)-\(UUID().uuidString.prefix(8))"
                    let response = try await client.execute(try CurlewRequest(url: "\(base)/\(kind)/\(id)/200000"))
                    #expect(response.body == FaultServer.body(requestID: id, size: 200_000), "\(kind) from \(base)")
                    #expect(response.metrics.bytesReceived < 200_000, "\(kind) came encoded")
                }
            }
        }
    }

    @Test(arguments: allLoops)
    func anEncodedBodyCutShortOrWithStrayBytesFailsAndTheNextRequestIsWhole(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withFaultServerAndClient(loop) { server, client in
            for base in [server.http1BaseURL, server.http2BaseURL] {
                for kind in Self.brokenKinds {
                    let request = try CurlewRequest(url: "\(base)/\(kind)/broken/100000")
                    let error = try await #require(throws: CurlewError.self, "\(kind) from \(base)") {
                        _ = try await client.execute(request)
                    }
                    #expect(error.code == .invalidResponse, "\(kind) from \(base): \(error)")
                    let whole = try await client.execute(try CurlewRequest(url: "\(base)/gzip/after-\(kind)/5000"))
                    #expect(whole.body == FaultServer.body(requestID: "after-\(kind)", size: 5000))
                }
            }
        }
    }

    @Test func aCutBodyFailsStreamedDownloadedAndDiscardedAlike() async throws {
        let directory = try TemporaryDirectory()
        try await withFaultServerAndClient(.thread) { server, client in
            // Large enough that the streamed body arrives in many pieces, paused for a consumer with little room.
            let cut = try CurlewRequest(url: "\(server.http1BaseURL)/gzip-cut/cut/3000000")
            let streamed = try await client.stream(cut, bufferLimit: 16_384)
            var received: [UInt8] = []
            let streamError = try await #require(throws: CurlewError.self) {
                for try await chunk in streamed.body { received += chunk }
            }
            #expect(streamError.code == .invalidResponse)
            // What arrived before the error is the body's start, in order: no byte decoded twice across pauses.
            #expect(FaultServer.body(requestID: "cut", size: 3_000_000).starts(with: received))

            let path = directory.path + "/cut.bin"
            let downloadError = try await #require(throws: CurlewError.self) {
                _ = try await client.download(cut, to: path)
            }
            #expect(downloadError.code == .invalidResponse)
            #expect(!FileManager.default.fileExists(atPath: path), "a cut body never becomes the file")

            let discardError = try await #require(throws: CurlewError.self) {
                _ = try await client.executeDiscardingBody(cut)
            }
            #expect(discardError.code == .invalidResponse)

            // The whole body, streamed through the same small buffer, arrives byte for byte.
            let whole = try await client.stream(
                try CurlewRequest(url: "\(server.http1BaseURL)/gzip/whole/3000000"), bufferLimit: 16_384)
            var body: [UInt8] = []
            for try await chunk in whole.body { body += chunk }
            #expect(body == FaultServer.body(requestID: "whole", size: 3_000_000))
        }
    }

    @Test(arguments: allLoops)
    func aThreeHundredNoOneFollowsIsDecodedAndAnEncodedRedirectLeavesTheFinalLimitAlone(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withFaultServerAndClient(loop, configure: { $0.decompression = .enabledWithLimit(1000) }) {
            server, client in
            for base in [server.http1BaseURL, server.http2BaseURL] {
                // A 3xx libcurl does not follow (no Location) is the response, and its body is decoded and checked.
                let choices = try await client.execute(try CurlewRequest(url: "\(base)/gzip-300/choices/900"))
                #expect(choices.status.code == 300)
                #expect(choices.body == FaultServer.body(requestID: "choices", size: 900), "\(base)")
                // A gzip-encoded 301 lowers no limit of the identity body it leads to (5,000 bytes, over the
                // decoded-size limit of 1,000 that binds encoded bodies only).
                let landed = try await client.execute(try CurlewRequest(url: "\(base)/gzip-redirect/landed/5000"))
                #expect(landed.metrics.redirectCount == 1)
                #expect(landed.body == FaultServer.body(requestID: "landed", size: 5000), "\(base)")
                // An encoded body over that limit is refused.
                let error = try await #require(throws: CurlewError.self) {
                    _ = try await client.execute(try CurlewRequest(url: "\(base)/gzip/large/5000"))
                }
                #expect(error.code == .bodyTooLarge)
            }
        }
    }

    @Test func zstdBodiesAreDecodedAndACutOneFails() async throws {
        try #require(ContentCoding.zstd.isAvailable, "Debian's libcurl links libzstd")
        let body = Array(String(repeating: "zstd through libcurl; ", count: 5000).utf8)
        let frame = try #require(ContentEncoding.zstd(body))
        try await withWireScriptServer({ request in
            let bytes = request.target == "/cut" ? Array(frame.dropLast(5)) : frame
            let head = "HTTP/1.1 200 OK\r\nContent-Length: \(bytes.count)\r\nContent-Encoding: zstd\r\n\r\n"
            return [.send(Array(head.utf8) + bytes)]
        }) { server in
            try await withClient(.thread) { client in
                let whole = try await client.execute(try CurlewRequest(url: server.baseURL + "/whole"))
                #expect(whole.body == body)
                #expect(server.requests.first?.header("Accept-Encoding")?.contains("zstd") == true)
                let error = try await #require(throws: CurlewError.self) {
                    _ = try await client.execute(try CurlewRequest(url: server.baseURL + "/cut"))
                }
                #expect(error.code == .invalidResponse)
            }
        }
    }

    @Test func withDecompressionOffTheBodyArrivesAsSent() async throws {
        try await withFaultServerAndClient(.thread, configure: { $0.decompression = .disabled }) { server, client in
            let response = try await client.execute(try CurlewRequest(url: "\(server.http1BaseURL)/gzip-cut/raw/1000"))
            #expect(response.body.prefix(2) == [0x1F, 0x8B], "the gzip magic, undecoded")
            #expect(response.headerFields[.contentEncoding] == "gzip")
        }
    }
}
