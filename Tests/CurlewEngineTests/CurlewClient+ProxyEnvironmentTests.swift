import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The default ``CurlewClient/Proxy/environment``: `http_proxy`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY`, read by
/// libcurl for every request, against pproxy demanding credentials (`--auth 0`) in front of nginx.
///
/// The variables steer every request of the process, so this suite runs in a process of its own (`make test` step
/// `proxy-environment`; the main run skips it) and its tests one at a time. That a request went through the proxy
/// is shown by the proxy itself: the same request with a wrong password in the variable is refused (407).
@Suite("Proxies from the environment", .serialized)
struct ProxyEnvironmentTests {
    static let password = "env-pr0xy-s3cret"
    static let variables = [
        "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
    ]

    /// Runs `body` with exactly `variables` set (every other proxy variable unset), and unsets them after.
    private func withEnvironment<T>(_ variables: [String: String], _ body: () async throws -> T) async rethrows -> T {
        for name in Self.variables { unsetenv(name) }
        for (name, value) in variables { setenv(name, value, 1) }
        defer { for name in Self.variables { unsetenv(name) } }
        return try await body()
    }

    @Test(arguments: allLoops)
    func httpProxyWithCredentialsInItsURLCarriesPlainHTTPRequests(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let marker = "/hits/" + UUID().uuidString + "/"
        let proxyURL = "http://\(proxy.username):\(proxy.password)@127.0.0.1:\(proxy.port)"
        try await withEnvironment(["http_proxy": proxyURL]) {
            try await withClient(loop) { client in
                let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)a"))
                #expect(response.text == "hit\n")
            }
        }
        // The same request with a wrong password in the variable: the proxy answers 407 itself (a forwarded request
        // gets the proxy's response, not an error, as with curl), so the first one went through it.
        try await withEnvironment(["http_proxy": "http://\(proxy.username):wrong@127.0.0.1:\(proxy.port)"]) {
            try await withClient(loop) { client in
                let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)b"))
                #expect(response.status.code == 407)
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 1)
        #expect(hits.count == 1)
    }

    @Test(arguments: allLoops)
    func httpsProxyTunnelsHTTPSRequestsWithItsCredentials(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let marker = "/hits/" + UUID().uuidString + "/"
        for name in ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"] {
            try await withEnvironment([name: "http://\(proxy.username):\(proxy.password)@127.0.0.1:\(proxy.port)"]) {
                try await withClient(loop, configure: { $0.tls.caFile = nginx.caFile }) { client in
                    let response = try await client.execute(
                        try CurlewRequest(url: "\(nginx.httpsBaseURL)\(marker)\(name)"))
                    #expect(response.text == "hit\n", "\(name)")
                }
            }
            try await withEnvironment([name: "http://\(proxy.username):wrong@127.0.0.1:\(proxy.port)"]) {
                try await withClient(loop, configure: { $0.tls.caFile = nginx.caFile }) { client in
                    let code = await curlewErrorCode {
                        _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
                    }
                    #expect(code == .proxy, "\(name)")
                }
            }
        }
        #expect(try await loggedHits(nginx, marker: marker, atLeast: 3).count == 3)
    }

    @Test(arguments: allLoops)
    func allProxyWithASocks5hURLGoesThroughDante(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let socks = try await DanteSocksProxy.start(password: Self.password)
        defer { socks.stop() }
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withEnvironment(["ALL_PROXY": "socks5h://\(socks.username):\(socks.password)@127.0.0.1:\(socks.port)"]
        ) {
            try await withClient(loop) { client in
                let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)a"))
                #expect(response.text == "hit\n")
            }
        }
        try await withEnvironment(["ALL_PROXY": "socks5h://\(socks.username):wrong@127.0.0.1:\(socks.port)"]) {
            try await withClient(loop) { client in
                let code = await curlewErrorCode {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)b"))
                }
                #expect(code == .proxy)
            }
        }
        #expect(try await loggedHits(nginx, marker: marker, atLeast: 1).count == 1)
    }

    /// With every variable pointing at a port nothing listens on, a request reaches nginx only if it bypasses them.
    @Test(arguments: allLoops)
    func noProxyNoneAndAnExplicitProxyBypassTheVariables(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let nginx = try await NginxServer.shared()
        let proxy = try await AuthenticatingProxy.start(password: Self.password)
        defer { proxy.stop() }
        let nowhere = "http://127.0.0.1:\(try FreePort.allocate())"
        let marker = "/hits/" + UUID().uuidString + "/"
        let deadEnds = ["http_proxy": nowhere, "HTTPS_PROXY": nowhere, "ALL_PROXY": nowhere]
        try await withEnvironment(deadEnds) {
            try await withClient(loop) { client in
                let code = await curlewErrorCode {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
                }
                #expect(code == .connectionRefused, "the variables are read by default")
            }
            try await withClient(loop, configure: { $0.proxy = .none }) { client in
                let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)none"))
                #expect(response.text == "hit\n")
            }
            let credentials = CurlewClient.Proxy.Credentials(username: proxy.username, password: proxy.password)
            try await withClient(
                loop, configure: { $0.proxy = .url("socks5h://127.0.0.1:\(proxy.port)", credentials: credentials) }
            ) { client in
                let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)url"))
                #expect(response.text == "hit\n")
            }
        }
        for name in ["NO_PROXY", "no_proxy"] {
            try await withEnvironment(deadEnds.merging([name: "localhost,127.0.0.1"]) { $1 }) {
                try await withClient(loop) { client in
                    let response = try await client.execute(
                        try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)\(name)"))
                    #expect(response.text == "hit\n", "\(name)")
                }
            }
        }
        #expect(try await loggedHits(nginx, marker: marker, atLeast: 4).count == 4)
    }

    /// `NO_PROXY` steers only the environment's proxies: a client given a proxy of its own goes through it, here a
    /// port nothing listens on, whatever the variable says.
    @Test(arguments: allLoops)
    func anExplicitProxyIgnoresNoProxyFromTheEnvironment(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let nowhere = "http://127.0.0.1:\(try FreePort.allocate())"
        for name in ["NO_PROXY", "no_proxy"] {
            try await withEnvironment([name: "localhost,127.0.0.1"]) {
                try await withClient(loop, configure: { $0.proxy = .url(nowhere) }) { client in
                    let code = await curlewErrorCode {
                        _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
                    }
                    #expect(code == .connectionRefused, "\(name)")
                }
                // The client's own list still applies.
                try await withClient(loop, configure: { $0.proxy = .url(nowhere, noProxy: "127.0.0.1") }) { client in
                    let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
                    #expect(response.status == .ok, "\(name)")
                }
            }
        }
    }

    /// A proxy variable libcurl cannot parse (a raw space in its password) fails the request with libcurl's
    /// message, which quotes the URL, redacted.
    @Test func aProxyVariableLibcurlCannotReadFailsWithoutNamingItsPassword() async throws {
        let nginx = try await NginxServer.shared()
        try await withEnvironment(["http_proxy": "http://user:s3 cret@127.0.0.1:1"]) {
            try await withClient(.dispatch) { client in
                let error = await #expect(throws: CurlewError.self) {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
                }
                let described = error.map { "\($0)" } ?? ""
                #expect(!described.contains("s3 cret"), "\(described)")
                #expect(described.contains("http://<redacted>@127.0.0.1:1"), "\(described)")
            }
        }
    }
}
