import CurlewTestSupport
import HTTPTypes
import Testing

@testable import CurlewEngine

/// The lines a request's header fields go out as, and what reaches a server that reads exactly what was sent.
@Suite("Request header lines")
struct RequestHeaderLinesTests {
    /// A whole request inside a body: a server that believed a shorter `Content-Length` would read it as another.
    static let smuggled = "GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    @Test func framingFieldsNeverGoOutAsGiven() throws {
        var request = try CurlewRequest(method: .post, url: "http://127.0.0.1/upload")
        try request.addHeader("Content-Length", "0")
        try request.addHeader("X-Trace", "abc")
        try request.addHeader("transfer-encoding", "gzip, chunked")
        var lines: [String] = []
        request.headerFields.forEachRequestHeaderLine(withholdingCredentials: false) { lines.append($0) }
        #expect(lines == ["X-Trace: abc"])
        // The caller's request still holds them.
        #expect(request.header("content-length") == "0")
    }

    /// libcurl sends a caller's `Content-Length` in place of its own and then the whole body: the server would read
    /// the body's tail as a request of its own (or wait for bytes that never come). The engine frames the body.
    @Test(arguments: allLoops, ["0", "10", "1000"])
    func aCallersContentLengthNeverFramesTheBody(
        loop: CurlewClient.Configuration.EventLoopKind, contentLength: String
    ) async throws {
        try await withWireScriptServer({ request in [.response(body: "own:\(request.target)")] }) { server in
            try await withClient(loop, configure: { $0.timeouts.total = .seconds(10) }) { client in
                var request = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/upload", body: .bytes(Array(Self.smuggled.utf8)))
                try request.addHeader("Content-Length", contentLength)
                let response = try await client.execute(request)
                #expect(response.text == "own:/upload")
                let next = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/next"))
                #expect(next.text == "own:/next")
            }
            // Counted by the server: the body was a body, not a request.
            #expect(server.requests.map(\.target) == ["/upload", "/next"])
            #expect(server.requests.first?.header("content-length") == String(Self.smuggled.utf8.count))
        }
    }

    @Test(arguments: allLoops)
    func aCallersTransferEncodingIsNotSent(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ request in [.response(body: "own:\(request.target)")] }) { server in
            try await withClient(loop, configure: { $0.timeouts.total = .seconds(10) }) { client in
                var upload = try CurlewRequest(method: .put, url: "\(server.baseURL)/upload", body: .bytes([1, 2, 3]))
                try upload.addHeader("Transfer-Encoding", "gzip")
                #expect(try await client.execute(upload).text == "own:/upload")
                var get = try CurlewRequest(url: "\(server.baseURL)/get")
                try get.addHeader("Content-Length", "5")
                try get.addHeader("Transfer-Encoding", "chunked")
                #expect(try await client.execute(get).text == "own:/get")
            }
            let requests = server.requests
            #expect(requests.map(\.target) == ["/upload", "/get"])
            #expect(requests.allSatisfy { $0.header("transfer-encoding") == nil })
            #expect(requests.map { $0.header("content-length") } == ["3", nil])
        }
    }
}
