import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import HTTPTypes
import Testing

/// swift-http-types at the boundary: a request made from an `HTTPRequest` head, the heads of requests and
/// responses, and the string header getters, checked by what the loopback server saw.
@Suite("swift-http-types at the boundary")
struct CurlewRequestHTTPTypesTests {
    @Test
    func aRequestMadeFromAnHTTPRequestHeadReachesTheServerAsDescribed() async throws {
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                var head = HTTPRequest(
                    method: .post, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/headers?q=a%20b")
                head.headerFields[HTTPField.Name("x-trace")!] = "abc"
                let response = try await client.execute(try CurlewRequest(head, body: .bytes(Array("hi".utf8))))
                #expect(response.head.status == .ok)
                #expect(response.header("Content-Type") == "application/json")
                #expect(response.header("not a name") == nil)
                let seen = try JSONDecoder().decode([String: String].self, from: Data(response.body))
                #expect(seen["_method"] == "POST")
                #expect(seen["_uri"] == "/headers?q=a%20b")
                #expect(seen["x-trace"] == "abc")
                #expect(seen["content-length"] == "2")
            }
        }
    }

    @Test
    func aRequestsHeadRoundTripsThroughHTTPTypes() throws {
        var request = try CurlewRequest(method: .put, url: "https://example.com:8443/a/b?c=d#fragment")
        try request.addHeader("X-Trace", "abc")
        let head = request.head
        #expect(head.method == .put)
        #expect(head.scheme == "https")
        #expect(head.authority == "example.com:8443")
        #expect(head.path == "/a/b?c=d")
        #expect(request.header("x-trace") == "abc")
        let again = try CurlewRequest(head)
        #expect(again.url == "https://example.com:8443/a/b?c=d")
        #expect(again.headerFields == request.headerFields)
        #expect(try CurlewRequest(url: "http://example.com?x=1").head.path == "/?x=1")
    }

    @Test
    func aHeadWithoutSchemeOrAuthorityIsATypedError() {
        let error = #expect(throws: CurlewError.self) {
            try CurlewRequest(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/relative"))
        }
        #expect(error?.code == .invalidRequest)
        let file = #expect(throws: CurlewError.self) {
            try CurlewRequest(HTTPRequest(method: .get, scheme: "file", authority: "", path: "/etc/passwd"))
        }
        #expect(file?.code == .protocolNotAllowed)
    }

    @Test
    func aStreamedResponseHasItsHeadAndHeaderGetterBeforeTheBody() async throws {
        try await withLoopbackServer { server in
            try await withClient(.thread) { client in
                let response = try await client.stream(try CurlewRequest(url: "\(server.baseURL)/bytes/1000"))
                #expect(response.head.status == .ok)
                #expect(response.header("content-length") == "1000")
                #expect(try await response.body.collect(upTo: 2000).count == 1000)
            }
        }
    }
}
