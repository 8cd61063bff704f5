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

    /// The URL is the head's scheme, authority and path joined: a path that does not start with `/` (or an
    /// authority with a delimiter in it) would give the URL another host, port or user-info than the head names.
    @Test(arguments: [
        ("127.0.0.1:8080", "@127.0.0.2:9090/"), ("127.0.0.1:8080", ".evil.example/"), ("127.0.0.1", ":1/"),
        ("127.0.0.1:8080", ""), ("127.0.0.1:8080", "?q=1"), ("evil.example/x", "/"), ("evil.example?", "/"),
        ("evil.example#", "/"),
    ])
    func aHeadWhosePathOrAuthorityWouldMoveTheHostIsATypedError(authority: String, path: String) {
        let error = #expect(throws: CurlewError.self) {
            try CurlewRequest(HTTPRequest(method: .get, scheme: "http", authority: authority, path: path))
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test(arguments: ["https://evil.example/#", "http:", "", "1http", "ht tp"])
    func aHeadWhoseSchemeIsNoSchemeIsATypedError(scheme: String) {
        let error = #expect(throws: CurlewError.self) {
            try CurlewRequest(HTTPRequest(method: .get, scheme: scheme, authority: "good.example", path: "/p"))
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test
    func aHeadWhosePathStartsWithTwoSlashesKeepsItsAuthority() throws {
        let request = try CurlewRequest(
            HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:8080", path: "//evil.example/x"))
        #expect(request.url == "http://127.0.0.1:8080//evil.example/x")
        #expect(request.head.authority == "127.0.0.1:8080")
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
