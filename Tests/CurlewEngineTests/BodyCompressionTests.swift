import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Testing

/// Request bodies gzip-compressed on the fly, checked by a server that inflates and hashes what it received.
@Suite("Request body compression")
struct BodyCompressionTests {
    /// Compressible but not trivial: JSON lines with a counter.
    static let jsonLines: [UInt8] = Array(
        (0..<20_000).map { #"{"id": \#($0), "name": "item \#($0)", "tags": ["a", "b"]}"# + "\n" }.joined().utf8)

    @Test(arguments: allLoops, ["bytes", "file", "stream", "multipart"])
    func everyKindOfBodyInflatesToTheOriginalBytes(
        loop: CurlewClient.Configuration.EventLoopKind, kind: String
    ) async throws {
        let original = Self.jsonLines
        let file = try TemporaryFile(text: String(decoding: original, as: UTF8.self))
        var form = MultipartForm()
        form.append(fileAt: file.path, forKey: "f")
        let body: CurlewRequest.Body =
            switch kind {
            case "bytes": .bytes(original)
            case "file": .file(.path(file.path))
            case "stream": .stream(RequestBodyStream(chunkedStream(original, chunkSize: 10_000)))
            default: .multipart(form)
            }
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                var request = try CurlewRequest(method: .post, url: "\(server.baseURL)/upload", body: body)
                request.bodyCompression = .gzip(level: 1)
                let response = try await client.execute(request)
                #expect(response.status == .ok, "\(response.text)")
                let json = try response.json()
                let encoded = try #require(json["encodedBytes"] as? Int)
                // libcurl counts the chunked framing too.
                #expect(response.metrics.bytesSent >= Int64(encoded))
                #expect(response.metrics.bytesSent < Int64(encoded) + 1024)
                if kind == "multipart" {
                    // The form itself: headers around the file, all of it compressed.
                    #expect((json["bytes"] as? Int ?? 0) > original.count)
                } else {
                    #expect(json["bytes"] as? Int == original.count)
                    #expect(json["fnv1a64"] as? String == checksum(original[...]))
                }
                #expect(encoded < original.count / 4)
                // Measured without sending, through the same encoder: what the server received (a stream can be
                // read only once, so it has no such length).
                let measured = try body.encodedLength(compression: .gzip(level: 1))
                #expect(measured == (kind == "stream" ? nil : Int64(encoded)))
            }
        }
    }

    @Test
    func theLevelReachesZlibAndTheRequestSaysGzipChunked() async throws {
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                var sizes: [Int] = []
                // zlib's own sizes for this input: 99,956 bytes at level 1, 101,085 at level 9.
                for level in [1, 9] {
                    var request = try CurlewRequest(
                        method: .post, url: "\(server.baseURL)/upload", body: .bytes(Self.jsonLines))
                    request.bodyCompression = .gzip(level: level)
                    sizes.append(try await client.execute(request).json()["encodedBytes"] as? Int ?? .max)
                }
                #expect(sizes == [99_956, 101_085])

                var echo = try CurlewRequest(method: .post, url: "\(server.baseURL)/headers", body: .bytes([1, 2, 3]))
                echo.bodyCompression = .gzip()
                let headers = try await client.execute(echo).text.lowercased()
                #expect(headers.contains("content-encoding"))
                #expect(headers.contains("gzip"))
                #expect(headers.contains("chunked"))
            }
        }
    }

    @Test(arguments: allLoops)
    func aCompressedFileBodyIsReplayedOnA307(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let file = try TemporaryFile(randomBytes: 50_000)
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            var request = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/redirect-to?url=/anything&status_code=307",
                body: .file(.path(file.path)))
            request.bodyCompression = .gzip(level: 1)
            let response = try await client.execute(request)
            #expect(response.status == .ok)
            #expect(response.metrics.redirectCount == 1)
            let headers = try response.json()["headers"] as? [String: String] ?? [:]
            #expect(headers["Content-Encoding"] == "gzip")
        }
    }
}
