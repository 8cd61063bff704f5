import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

/// The opt-in cookie store, against httpbin: `/cookies/set?NAME=VALUE` sets a cookie and redirects to `/cookies`,
/// which answers the cookies the request carried.
@Suite("Cookie store")
struct CurlewClientCookiesTests {
    @Test(arguments: allLoops)
    func cookiesAreKeptSentBackReadAndCleared(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.storesCookies = true }) { client in
            // The redirect to /cookies already carries the cookie its 302 set.
            let set = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/cookies/set?flavour=oat"))
            #expect(try Self.cookies(in: set) == ["flavour": "oat"])
            let again = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/cookies"))
            #expect(try Self.cookies(in: again) == ["flavour": "oat"])
            let stored = client.cookies()
            #expect(stored.map(\.name) == ["flavour"])
            #expect(stored.first?.value == "oat")
            #expect(stored.first?.domain == "127.0.0.1")

            client.clearCookies()
            #expect(client.cookies().isEmpty)
            let cleared = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/cookies"))
            #expect(try Self.cookies(in: cleared).isEmpty)
        }
    }

    @Test(arguments: allLoops)
    func aCookieIsNeverSentToAnotherHostNotEvenOnARedirect(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let httpbin = try await HTTPBinServer.shared()
        let otherHost = "http://localhost:\(httpbin.port)"
        try await withClient(loop, configure: { $0.storesCookies = true }) { client in
            _ = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/cookies/set?flavour=oat"))
            let direct = try await client.execute(try CurlewRequest(url: "\(otherHost)/cookies"))
            #expect(try Self.cookies(in: direct).isEmpty)
            let target = "\(otherHost)/cookies".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let redirected = try await client.execute(
                try CurlewRequest(url: "\(httpbin.baseURL)/redirect-to?url=\(target)"))
            #expect(redirected.url.hasPrefix(otherHost))
            #expect(try Self.cookies(in: redirected).isEmpty)
            // The origin that set it still gets it.
            let same = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/cookies"))
            #expect(try Self.cookies(in: same) == ["flavour": "oat"])
        }
    }

    @Test(arguments: allLoops)
    func withoutTheStoreNoCookieIsKept(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let set = try await client.execute(try CurlewRequest(url: "\(httpbin.baseURL)/cookies/set?flavour=oat"))
            #expect(try Self.cookies(in: set).isEmpty)
            #expect(client.cookies().isEmpty)
        }
    }

    private static func cookies(in response: CurlewResponse) throws -> [String: String] {
        try #require(try response.json()["cookies"] as? [String: String])
    }
}
