import Crypto
import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import HTTPTypes
import MultipartKit
import NIOCore
import Testing

/// Multipart forms, checked by parsers that are not Curlew's: multipart-kit in the test, Werkzeug (httpbin)
/// on the server.
@Suite("Multipart forms")
struct MultipartFormTests {
    @Test(arguments: allLoops)
    func fieldsDataAndFilesArriveInOrderAndIntact(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let file = try TemporaryFile(randomBytes: 300_000 + 3)
        let data = try randomBytes(10_000)
        var form = MultipartForm()
        form.append(value: "holiday", forKey: "album")
        form.append(data: data, forKey: "thumbnail", fileName: "thumb.bin", mimeType: "image/x-test")
        var extra = HTTPFields()
        extra[HTTPField.Name("X-Part-Note")!] = "kept"
        form.append(fileAt: file.path, forKey: "image", mimeType: "image/jpeg", headerFields: extra)

        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/echo", body: .multipart(form))
                let response = try await client.execute(request)
                #expect(response.metrics.bytesSent == Int64(response.body.count))
                let parts = try parseMultipart(response.body, boundary: form.boundary)
                try #require(parts.count == 3)
                #expect(parts[0].header("Content-Disposition") == #"form-data; name="album""#)
                #expect(parts[0].header("Content-Type") == nil)
                #expect(parts[0].body == Array("holiday".utf8))
                #expect(parts[1].header("Content-Disposition") == #"form-data; name="thumbnail"; filename="thumb.bin""#)
                #expect(parts[1].header("Content-Type") == "image/x-test")
                #expect(parts[1].body == data)
                let fileName = URL(fileURLWithPath: file.path).lastPathComponent
                #expect(parts[2].header("Content-Disposition") == "form-data; name=\"image\"; filename=\"\(fileName)\"")
                #expect(parts[2].header("Content-Type") == "image/jpeg")
                #expect(parts[2].header("X-Part-Note") == "kept")
                #expect(SHA256.hash(data: parts[2].body) == SHA256.hash(data: file.bytes))
            }
        }
    }

    @Test(arguments: allLoops)
    func aFormOfKnownSizesAnnouncesItsExactLengthAndWerkzeugReadsIt(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let file = try TemporaryFile(text: "file contents\n")
        var form = MultipartForm()
        form.append(value: "1", forKey: "a")
        form.append(value: "two", forKey: "b")
        form.append(fileAt: file.path, forKey: "upload")
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let response = try await client.execute(
                try CurlewRequest(method: .post, url: "\(httpbin.baseURL)/post", body: .multipart(form)))
            let json = try response.json()
            let headers = json["headers"] as? [String: String] ?? [:]
            #expect(headers["Content-Length"] == String(response.metrics.bytesSent))
            // What the form says of its size before sending is what went out.
            #expect(form.encodedLength == response.metrics.bytesSent)
            #expect(CurlewRequest.Body.multipart(form).knownLength == response.metrics.bytesSent)
            #expect(headers["Content-Type"] == form.contentType)
            #expect(json["form"] as? [String: String] == ["a": "1", "b": "two"])
            #expect(json["files"] as? [String: String] == ["upload": "file contents\n"])
        }
    }

    @Test
    func eachPartsContentIsReadBackThroughItsOwnPropertyOnly() {
        var form = MultipartForm()
        form.append(value: "text", forKey: "t")
        form.append(fileAt: "/tmp/photo.jpg", forKey: "f")
        form.append(stream: RequestBodyStream(AsyncStream<[UInt8]> { $0.finish() }, length: 9), forKey: "s")
        let contents = form.parts.map(\.content)
        #expect(contents.map { $0.bytes } == [Array("text".utf8), nil, nil])
        #expect(contents.map { $0.file } == [nil, .path("/tmp/photo.jpg"), nil])
        #expect(contents.map { $0.stream?.length } == [nil, nil, 9])
        #expect(!form.isReplayable)
        let part = MultipartForm.Part(name: "b", content: .bytes([0xFF]))
        #expect(part.content.bytes == [0xFF])
    }

    @Test
    func aFormWithAStreamOfUnknownLengthOrAMissingFileHasNoKnownLength() throws {
        var streamed = MultipartForm()
        streamed.append(stream: RequestBodyStream(AsyncStream<[UInt8]> { $0.finish() }), forKey: "s")
        #expect(streamed.encodedLength == nil)
        var missing = MultipartForm()
        missing.append(fileAt: "/nonexistent/curlew-\(UInt64.random(in: 0...UInt64.max))", forKey: "f")
        #expect(missing.encodedLength == nil)
    }

    /// RFC 7578 and WHATWG: `"`, CR and LF percent-encoded, a backslash escaped as a quoted-pair, UTF-8 as is.
    /// Werkzeug decodes `%22` but leaves `%0D%0A` as sent: a line break in a name can never start a header.
    @Test(arguments: allLoops)
    func namesWithQuotesBackslashesAndNonASCIIArriveIntactAndLineBreaksCannotInjectHeaders(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let names = ["quote\"d", "back\\slash\\", "line\r\nbreak", "ünïcødé ✓", "semi;colon=eq"]
        var form = MultipartForm()
        for (index, name) in names.enumerated() { form.append(value: "v\(index)", forKey: name) }
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let json = try await client.execute(
                try CurlewRequest(method: .post, url: "\(httpbin.baseURL)/post", body: .multipart(form))
            ).json()
            let received = json["form"] as? [String: String] ?? [:]
            var expected = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, "v\($0)") })
            expected["line\r\nbreak"] = nil
            expected["line%0D%0Abreak"] = "v2"
            #expect(received == expected)
        }
    }

    @Test
    func fileNamesAreEncodedOnTheWireAsBrowsersDo() async throws {
        var form = MultipartForm()
        form.append(data: [1], forKey: "f", fileName: "a\"b\\c\r\nd é.txt")
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                let response = try await client.execute(
                    try CurlewRequest(method: .post, url: "\(server.baseURL)/echo", body: .multipart(form)))
                let parts = try parseMultipart(response.body, boundary: form.boundary)
                #expect(
                    parts.first?.header("Content-Disposition")
                        == #"form-data; name="f"; filename="a%22b\\c%0D%0Ad é.txt""#)
            }
        }
    }

    @Test(arguments: allLoops)
    func aBoundaryInsideAPartIsReplacedAndCannotBreakTheForm(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        var form = MultipartForm()
        let original = form.boundary
        let hostile = "before\r\n--\(original)--\r\nafter"
        form.append(value: hostile, forKey: "payload")
        form.append(value: "still here", forKey: "next")
        // Replaced as the part was added, so what the form says is what goes out.
        #expect(form.boundary != original)
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let json = try await client.execute(
                try CurlewRequest(method: .post, url: "\(httpbin.baseURL)/post", body: .multipart(form))
            ).json()
            #expect(json["form"] as? [String: String] == ["payload": hostile, "next": "still here"])
            let contentType = (json["headers"] as? [String: String])?["Content-Type"] ?? ""
            #expect(contentType == form.contentType)
            #expect(!contentType.contains(original))
        }
    }

    @Test
    func aContentTypeCopiedFromTheFormAfterTheLastPartIsSentAsIs() async throws {
        var form = MultipartForm()
        form.append(value: "x", forKey: "a")
        let bytes = Array("--\(form.boundary)".utf8)
        form.append(data: bytes, forKey: "b", fileName: "b.bin")
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                var request = try CurlewRequest(method: .post, url: "\(server.baseURL)/echo", body: .multipart(form))
                try request.setHeader("Content-Type", form.contentType)
                let response = try await client.execute(request)
                let parts = try parseMultipart(response.body, boundary: form.boundary)
                try #require(parts.count == 2)
                #expect(parts[0].body == Array("x".utf8))
                #expect(parts[1].body == bytes)
            }
        }
    }

    @Test
    func aContentTypeNamingAnotherBoundaryIsRefusedBeforeSending() async throws {
        var form = MultipartForm()
        let stale = form.contentType
        form.append(value: "contains --\(form.boundary) inside", forKey: "a")
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                for contentType in [stale, "multipart/form-data", "multipart/form-data; boundary=\"other\""] {
                    var request = try CurlewRequest(
                        method: .post, url: "\(server.baseURL)/echo", body: .multipart(form))
                    try request.setHeader("Content-Type", contentType)
                    let error = await caughtError { _ = try await client.execute(request) } as? CurlewError
                    #expect(error?.code == .invalidRequest, "\(contentType)")
                    #expect(error?.detail.contains("boundary") == true)
                }
                // Quoted, in another case, among other parameters: the same boundary is accepted.
                var request = try CurlewRequest(method: .post, url: "\(server.baseURL)/echo", body: .multipart(form))
                try request.setHeader(
                    "Content-Type", "Multipart/Form-Data; charset=utf-8; BOUNDARY=\"\(form.boundary)\"")
                let response = try await client.execute(request)
                #expect(try parseMultipart(response.body, boundary: form.boundary).count == 1)
            }
            #expect(server.requestsServed == 1)
        }
    }

    @Test
    func aFixedBoundaryThatOccursInAPartOrIsInvalidIsRefusedBeforeSending() async throws {
        var colliding = MultipartForm(boundary: "fixed-boundary")
        colliding.append(value: "x--fixed-boundary", forKey: "a")
        let invalid = MultipartForm(boundary: "no\"quotes")
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                for form in [colliding, invalid] {
                    let request = try CurlewRequest(
                        method: .post, url: "\(server.baseURL)/echo", body: .multipart(form))
                    #expect(await curlewErrorCode { _ = try await client.execute(request) } == .invalidRequest)
                }
            }
            #expect(server.requestsServed == 0)
        }
    }

    /// Found by `make fuzz` (the multipart target): a content type was written into the part's header as given.
    @Test
    func aPartContentTypeWithALineBreakOrNulIsRefusedBeforeSending() async throws {
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                for contentType in ["text/plain\r\nX-Injected: 1", "text/plain\nX: 1", "text/\0plain"] {
                    var form = MultipartForm()
                    form.append(data: [1, 2, 3], forKey: "file", fileName: "a.bin", mimeType: contentType)
                    let request = try CurlewRequest(
                        method: .post, url: "\(server.baseURL)/echo", body: .multipart(form))
                    #expect(
                        await curlewErrorCode { _ = try await client.execute(request) } == .invalidRequest,
                        "\(contentType.debugDescription)")
                }
            }
            #expect(server.requestsServed == 0)
        }
    }

    @Test(arguments: allLoops)
    func aStreamPartOfUnknownLengthSendsTheFormChunked(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let streamed = try randomBytes(300_000)
        var form = MultipartForm()
        form.append(value: "first", forKey: "a")
        form.append(
            stream: RequestBodyStream(chunkedStream(streamed, chunkSize: 7000)), forKey: "s", fileName: "s.bin")
        form.append(value: "last", forKey: "z")
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let response = try await client.execute(
                    try CurlewRequest(method: .post, url: "\(server.baseURL)/echo", body: .multipart(form)))
                let parts = try parseMultipart(response.body, boundary: form.boundary)
                #expect(parts.map(\.body) == [Array("first".utf8), streamed, Array("last".utf8)])
            }
        }
    }

    @Test(arguments: allLoops)
    func aStreamPartOfKnownLengthKeepsTheFormsContentLength(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        var form = MultipartForm()
        form.append(
            stream: RequestBodyStream(chunkedStream(Array("streamed".utf8), chunkSize: 3), length: 8), forKey: "s",
            fileName: "s.txt")
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let response = try await client.execute(
                try CurlewRequest(method: .post, url: "\(httpbin.baseURL)/post", body: .multipart(form)))
            let json = try response.json()
            #expect((json["headers"] as? [String: String])?["Content-Length"] == String(response.metrics.bytesSent))
            #expect(json["files"] as? [String: String] == ["s": "streamed"])
        }
    }

    @Test(arguments: allLoops)
    func aMissingFileFailsTheFormBeforeAnythingIsSent(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        var form = MultipartForm()
        form.append(value: "a", forKey: "a")
        form.append(fileAt: "/nonexistent/curlew-\(UUID().uuidString)", forKey: "f")
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let request = try CurlewRequest(method: .post, url: "\(server.baseURL)/echo", body: .multipart(form))
                #expect(await curlewErrorCode { _ = try await client.execute(request) } == .requestBodyFailed)
            }
            #expect(server.requestsServed == 0)
        }
    }

    @Test(arguments: allLoops)
    func aFormOfReplayablePartsIsSentAgainOnA307(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let file = try TemporaryFile(text: "again")
        var form = MultipartForm()
        form.append(value: "v", forKey: "k")
        form.append(fileAt: file.path, forKey: "f")
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let json = try await client.execute(
                try CurlewRequest(
                    method: .post, url: "\(httpbin.baseURL)/redirect-to?url=/anything&status_code=307",
                    body: .multipart(form))
            ).json()
            #expect(json["form"] as? [String: String] == ["k": "v"])
            #expect(json["files"] as? [String: String] == ["f": "again"])
        }
    }

    @Test
    func anEmptyFormIsAValidForm() async throws {
        let form = MultipartForm()
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(.thread) { client in
            let response = try await client.execute(
                try CurlewRequest(method: .post, url: "\(httpbin.baseURL)/post", body: .multipart(form)))
            #expect(response.status == .ok)
            #expect(try response.json()["form"] as? [String: String] == [:])
        }
    }
}

/// A part as multipart-kit's parser saw it.
struct ParsedPart {
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Splits a multipart body with vapor/multipart-kit, not with Curlew's own code.
func parseMultipart(_ body: [UInt8], boundary: String) throws -> [ParsedPart] {
    let parser = MultipartParser(boundary: boundary)
    var parts: [ParsedPart] = []
    var current = ParsedPart()
    parser.onHeader = { name, value in current.headers.append((name, value)) }
    parser.onBody = { buffer in current.body += buffer.readBytes(length: buffer.readableBytes) ?? [] }
    parser.onPartComplete = {
        parts.append(current)
        current = ParsedPart()
    }
    try parser.execute(body)
    return parts
}
