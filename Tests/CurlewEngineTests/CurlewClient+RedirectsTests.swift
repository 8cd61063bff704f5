import CurlewEngine
import CurlewTestSupport
import Foundation
import HTTPTypes
import Testing

@Suite("Redirects and what crosses them")
struct CurlewClientRedirectsTests {
    @Test(arguments: allLoops)
    func relativeAndAbsoluteRedirectsAreFollowed(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            for path in ["relative-redirect/3", "absolute-redirect/3", "redirect/3"] {
                let response = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/\(path)"))
                #expect(response.status == .ok, "\(path)")
                #expect(response.metrics.redirectCount == 3, "\(path)")
                #expect(response.url.hasSuffix("/get"), "\(path)")
            }
        }
    }

    @Test(arguments: allLoops)
    func redirectLimitIsEnforced(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.redirects.maximum = 2 }) { client in
            let code = await curlewErrorCode {
                _ = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/redirect/3"))
            }
            #expect(code == .tooManyRedirects)
            var request = try CurlewRequest(url: "\(httpbin.baseURL)/redirect/3")
            request.redirects = .init(maximum: 3)
            #expect(try await client.execute(request).status == .ok)
        }
    }

    @Test(arguments: allLoops)
    func disabledRedirectsReturnTheRedirectItself(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.redirects = .disabled }) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/redirect/1"))
            #expect(response.status == .found)
            #expect(response.headerFields[.location] != nil)
            #expect(response.metrics.redirectCount == 0)
        }
    }

    @Test(arguments: allLoops)
    func postBecomesGetAfter303AndStaysPostWithItsBodyAfter307(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let body = CurlewRequest.Body.bytes(Array("replayed body".utf8))
            let seeOther = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/redirect-to?url=/anything&status_code=303", body: body)
            let afterSeeOther = try await client.execute(seeOther).json()
            #expect(afterSeeOther["method"] as? String == "GET")
            #expect(afterSeeOther["data"] as? String == "")

            let temporary = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/redirect-to?url=/anything&status_code=307", body: body)
            let afterTemporary = try await client.execute(temporary).json()
            #expect(afterTemporary["method"] as? String == "POST")
            #expect(afterTemporary["data"] as? String == "replayed body")
        }
    }

    @Test(arguments: allLoops)
    func putAndPatchKeepTheirMethodAndBodyAcrossRedirects(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            for method in [HTTPRequest.Method.put, .patch] {
                for status in [301, 302, 303, 307] {
                    let request = try CurlewRequest(
                        method: method, url: "\(httpbin.baseURL)/redirect-to?url=/anything&status_code=\(status)",
                        body: .bytes(Array("payload".utf8)))
                    let json = try await client.execute(request).json()
                    #expect(json["method"] as? String == method.rawValue, "\(method) \(status)")
                    #expect(json["data"] as? String == "payload", "\(method) \(status)")
                }
            }
        }
    }

    @Test(arguments: allLoops)
    func postIsKeptAfter302WhenConfigured(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.redirects.keepPost = [.after302] }) { client in
            let request = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/redirect-to?url=/anything&status_code=302",
                body: .bytes(Array("kept".utf8)))
            let json = try await client.execute(request).json()
            #expect(json["method"] as? String == "POST")
            #expect(json["data"] as? String == "kept")
        }
    }

    @Test(arguments: allLoops)
    func credentialsAreNotSentToAnotherHostAfterARedirect(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let headers = [("Authorization", "Bearer secret-token"), ("Cookie", "session=secret")]
            // Same host: the credentials stay.
            let sameHost = try CurlewRequest(
                url: "\(httpbin.baseURL)/redirect-to?url=\(httpbin.baseURL)/headers", headers: headers)
            let kept = try #require(try await client.execute(sameHost).json()["headers"] as? [String: String])
            #expect(kept["Authorization"] == "Bearer secret-token")

            // "localhost" is another host name for the same server: the credentials must not follow.
            let otherHost = "http://localhost:\(httpbin.port)/headers"
            let crossHost = try CurlewRequest(
                url:
                    "\(httpbin.baseURL)/redirect-to?url=\(otherHost.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
                headers: headers)
            let response = try await client.execute(crossHost)
            #expect(response.url.hasPrefix("http://localhost:"))
            let dropped = try #require(try response.json()["headers"] as? [String: String])
            #expect(dropped["Authorization"] == nil)
            #expect(dropped["Cookie"] == nil)
        }
    }

    @Test(arguments: allLoops)
    func redirectsToOtherProtocolsAreRefused(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            for target in ["file:///etc/passwd", "gopher://127.0.0.1:70/", "dict://127.0.0.1:2628/"] {
                let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let code = await curlewErrorCode {
                    _ = try await client.execute(
                        try CurlewRequest(url: "\(httpbin.baseURL)/redirect-to?url=\(encoded)"))
                }
                #expect(code == .protocolNotAllowed, "\(target)")
            }
        }
    }
}
