import CurlewEngine
import CurlewTestSupport
import Foundation
import InMemoryLogging
import Logging
import Testing

/// Proxies that demand credentials in front of nginx, which logs what arrived: SOCKS5 by Dante (`danted`, RFC 1929
/// user name and password), HTTP CONNECT and forwarding by pproxy. Proxies from the environment are tested in a
/// process of their own (``ProxyEnvironmentTests``): libcurl reads the variables for every request of the process.
@Suite("Proxies with credentials")
struct CurlewClientProxyTests {
    static let password = "pr0xy-s3cret"

    @Test(arguments: allLoops)
    func socks5hWithCredentialsReachesTheTarget(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await DanteSocksProxy.start(password: Self.password)
        defer { proxy.stop() }
        let marker = "/hits/" + UUID().uuidString + "/"
        let credentials = CurlewClient.Proxy.Credentials(username: proxy.username, password: proxy.password)
        try await withClient(
            loop, configure: { $0.proxy = .url("socks5h://127.0.0.1:\(proxy.port)", credentials: credentials) }
        ) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)a"))
            #expect(response.text == "hit\n")
        }
        // Credentials in the URL work too, for SOCKS5 with local name resolution.
        try await withClient(
            loop,
            configure: { $0.proxy = .url("socks5://\(proxy.username):\(proxy.password)@127.0.0.1:\(proxy.port)") }
        ) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)b"))
            #expect(response.text == "hit\n")
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 2)
        #expect(hits.count == 2)
    }

    @Test(arguments: allLoops)
    func socks5WithWrongCredentialsFailsWithAProxyError(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await DanteSocksProxy.start(password: Self.password)
        defer { proxy.stop() }
        let wrong = CurlewClient.Proxy.Credentials(username: proxy.username, password: "wrong")
        try await withClient(
            loop, configure: { $0.proxy = .url("socks5h://127.0.0.1:\(proxy.port)", credentials: wrong) }
        ) { client in
            let error =
                await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
                } as? CurlewError
            #expect(error?.code == .proxy)
        }
    }

    @Test(arguments: allLoops)
    func anHTTPSRequestTunnelsThroughAnHTTPProxyWithCredentials(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let marker = "/hits/" + UUID().uuidString + "/"
        let credentials = CurlewClient.Proxy.Credentials(username: proxy.username, password: proxy.password)
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.proxy = .url("http://127.0.0.1:\(proxy.port)", credentials: credentials)
            }
        ) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)\(marker)a"))
            #expect(response.text == "hit\n")
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 1)
        #expect(hits.count == 1)
    }

    /// A caller's own `Proxy-Authorization` field goes to the proxy only: on the CONNECT of an https request (libcurl
    /// would send it to the server, through the tunnel) and with a plain request the proxy forwards; a request
    /// without a proxy never sends it.
    @Test(arguments: allLoops)
    func aProxyAuthorizationFieldGoesToTheProxyAndNeverToTheServer(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let marker = "/hits/" + UUID().uuidString + "/"
        let basic = proxy.basicAuthorization
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.proxy = .url("http://127.0.0.1:\(proxy.port)")
            }
        ) { client in
            for base in [nginx.httpsBaseURL, nginx.httpBaseURL] {
                var request = try CurlewRequest(url: "\(base)\(marker)\(base.prefix { $0 != ":" })")
                try request.addHeader("Proxy-Authorization", basic)
                let response = try await client.execute(request)
                #expect(response.text == "hit\n", "\(base)")
            }
        }
        #expect(try await loggedHits(nginx, marker: marker, atLeast: 2).count == 2)
        try await withWireScriptServer({ request in [.response(body: request.target)] }) { server in
            try await withClient(loop, configure: { $0.proxy = .none }) { client in
                var request = try CurlewRequest(url: "\(server.baseURL)/direct")
                try request.addHeader("Proxy-Authorization", basic)
                #expect(try await client.execute(request).text == "/direct")
            }
            #expect(server.requests.count == 1)
            #expect(server.requests.first?.header("proxy-authorization") == nil)
        }
    }

    /// How a server leads a request to another origin, through heads a reader of `Location` fields could misplace.
    enum RedirectElsewhere: String, CaseIterable, Sendable {
        /// `302` with one `Location` to the other origin.
        case oneLocation
        /// A second `Location` back to the origin after it: libcurl follows the first.
        case secondLocationBack
        /// A field named `HTTP/1.1` between the two: a field, not a status line, to libcurl.
        case statusLikeFieldBetween
        /// A first hop within the origin, then one to the other origin.
        case hopWithinTheOriginFirst
        /// A `Location` whose value starts with a bare CR, then one back: libcurl 7.88 skips the CR and follows the
        /// first, 8.x reads it as empty and follows the second.
        case valueLedByACarriageReturn

        func answer(_ target: String, elsewhere: String) -> [WireStep] {
            switch (self, target) {
            case (_, "/back"): return [.response(body: "back")]
            case (.oneLocation, _): return [.response(status: 302, headers: [("Location", elsewhere)], body: "")]
            case (.secondLocationBack, _):
                return [.response(status: 302, headers: [("Location", elsewhere), ("Location", "/back")], body: "")]
            case (.statusLikeFieldBetween, _):
                let headers = [("Location", elsewhere), ("HTTP/1.1", "x"), ("Location", "/back")]
                return [.response(status: 302, headers: headers, body: "")]
            case (.hopWithinTheOriginFirst, "/start"):
                return [.response(status: 302, headers: [("Location", "/hop")], body: "")]
            case (.hopWithinTheOriginFirst, _):
                return [.response(status: 302, headers: [("Location", elsewhere)], body: "")]
            case (.valueLedByACarriageReturn, _):
                return [
                    .response(status: 302, headers: [("Location", "\r" + elsewhere), ("Location", "/back")], body: "")
                ]
            }
        }
    }

    /// A redirect to another origin goes without the request's `Proxy-Authorization`, as without its other
    /// credentials: the other origin may be reached through another proxy (the environment's `http_proxy` and
    /// `https_proxy`). Here the one proxy forwards the requests to the origin with it and refuses the CONNECT to the
    /// other origin without it (a 407): a CONNECT with it would reach nginx (a 200). libcurl's own target decides,
    /// however the head reads.
    @Test(arguments: allLoops, RedirectElsewhere.allCases)
    func aProxyAuthorizationFieldIsWithheldOnARedirectToAnotherOrigin(
        loop: CurlewClient.Configuration.EventLoopKind, redirect: RedirectElsewhere
    ) async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let elsewhere = "\(nginx.httpsBaseURL)/small"
        try await withWireScriptServer({ redirect.answer($0.target, elsewhere: elsewhere) }) { server in
            var followedBack = false
            try await withClient(
                loop,
                configure: {
                    $0.tls.caFile = nginx.caFile
                    $0.proxy = .url("http://127.0.0.1:\(proxy.port)")
                }
            ) { client in
                var request = try CurlewRequest(url: "\(server.baseURL)/start")
                try request.addHeader("Proxy-Authorization", proxy.basicAuthorization)
                do {
                    let response = try await client.execute(request)
                    // Only libcurl 8 reads the CR-led value as empty and follows the second, back to the origin.
                    #expect(redirect == .valueLedByACarriageReturn && LibcurlVersion.running >= LibcurlVersion(8, 0, 0))
                    #expect(response.status == .ok && String(decoding: response.body, as: UTF8.self) == "back")
                    followedBack = true
                } catch let error as CurlewError {
                    #expect(error.code == .proxy)
                    #expect(error.detail.contains("407"), "\(error)")
                }
            }
            let hops = redirect == .hopWithinTheOriginFirst || followedBack ? 2 : 1
            #expect(server.requests.count == hops, "the requests to the origin went through the proxy with the field")
        }
    }

    /// An empty `Proxy-Authorization` (an interceptor that blanked it) is no field at all: the proxy credentials the
    /// client was given still log in.
    @Test func anEmptyProxyAuthorizationFieldLeavesTheClientsProxyCredentials() async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let credentials = CurlewClient.Proxy.Credentials(username: proxy.username, password: proxy.password)
        try await withClient(
            .dispatch,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.proxy = .url("http://127.0.0.1:\(proxy.port)", credentials: credentials)
            }
        ) { client in
            var request = try CurlewRequest(url: "\(nginx.httpsBaseURL)/small")
            try request.addHeader("Proxy-Authorization", "")
            #expect(try await client.execute(request).status == .ok)
        }
    }

    @Test(arguments: allLoops)
    func anHTTPProxysRefusalOfTheCredentialsFailsWithAProxyError(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let wrong = CurlewClient.Proxy.Credentials(username: proxy.username, password: "wrong")
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.proxy = .url("http://127.0.0.1:\(proxy.port)", credentials: wrong)
            }
        ) { client in
            let error =
                await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
                } as? CurlewError
            #expect(error?.code == .proxy)
            #expect(error?.detail.contains("407") == true)
        }
    }

    /// libcurl quotes a proxy URL it cannot read, password included: a scheme it does not take is refused before
    /// libcurl sees it, and a URL it cannot parse (a raw space in the password) fails with its message redacted.
    @Test func aProxyURLLibcurlCannotReadFailsWithoutNamingItsPassword() async throws {
        let nginx = try await NginxServer.shared()
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "curlew.tests", factory: { _ in handler })
        logger.logLevel = .debug
        let cases: [(proxy: String, code: CurlewError.Code?)] = [
            ("htps://user:s3cret@127.0.0.1:1", .invalidRequest),
            ("http://user:s3 cret@127.0.0.1:1", nil),
        ]
        for (proxy, expectedCode) in cases {
            try await withClient(
                .dispatch,
                configure: {
                    $0.logger = logger
                    $0.proxy = .url(proxy)
                }
            ) { client in
                let error = await #expect(throws: CurlewError.self) {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
                }
                let described = error.map { "\($0)" } ?? ""
                if let expectedCode { #expect(error?.code == expectedCode, "\(described)") }
                #expect(!described.contains("s3cret") && !described.contains("s3 cret"), "\(described)")
                // libcurl's message is still there, with the URL's user-info replaced.
                if expectedCode == nil { #expect(described.contains("http://<redacted>@127.0.0.1:1"), "\(described)") }
            }
        }
        #expect(!handler.entries.contains { "\($0.message) \($0.metadata)".contains("s3") })
    }

    @Test func proxyCredentialsAreNeverLoggedOrDescribed() async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "curlew.tests", factory: { _ in handler })
        logger.logLevel = .debug
        for password in [Self.password, "wrong-s3cret"] {
            let credentials = CurlewClient.Proxy.Credentials(username: proxy.username, password: password)
            let configured = CurlewClient.Proxy.url("socks5h://127.0.0.1:\(proxy.port)", credentials: credentials)
            #expect(!"\(configured) \(credentials)".contains(password))
            try await withClient(
                .dispatch,
                configure: {
                    $0.logger = logger
                    $0.proxy = configured
                }
            ) { client in
                _ = try? await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
            }
        }
        let entries = handler.entries
        // Both the success and the failure were logged, and neither names a password.
        #expect(entries.contains { $0.message.description == "received response" })
        #expect(entries.count >= 4)
        #expect(!entries.contains { "\($0.message) \($0.metadata)".contains("s3cret") })
    }
}
