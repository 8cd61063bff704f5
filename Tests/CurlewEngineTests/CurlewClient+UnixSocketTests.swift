import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

/// Requests over nginx's Unix domain sockets, checked in nginx's log: the client address of a request that came
/// over a socket is `unix:`.
@Suite("Unix domain sockets")
struct CurlewClientUnixSocketTests {
    /// Whether connections over a Unix socket are pooled: on libcurl 8, which checks a pooled connection for stray
    /// bytes itself; on 7.x the engine must check it and cannot tell one socket's connections apart, so every request
    /// gets a connection of its own (`bytesAfterABodyOverAUnixSocketNeverAnswerTheNextRequest`).
    static let socketConnectionsArePooled = LibcurlVersion.running.refusesPooledConnectionsWithPendingInput

    @Test(arguments: allLoops)
    func anHTTPUnixURLReachesTheServerOverItsSocket(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop) { client in
            let url = "http+unix://\(encodedSocketPath(nginx.httpUnixSocketPath))\(marker)a"
            let response = try await client.execute(try CurlewRequest(url: url))
            #expect(response.status == .ok)
            #expect(response.text == "hit\n")
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 1)
        #expect(hits.map(\.address) == ["unix:"])
        #expect(hits.map(\.host) == ["localhost"])
    }

    @Test(arguments: allLoops)
    func anHTTPSUnixURLVerifiesTheCertificateForLocalhost(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop, configure: { $0.tls.caFile = nginx.caFile }) { client in
            let url = "https+unix://\(encodedSocketPath(nginx.httpsUnixSocketPath))\(marker)a"
            let response = try await client.execute(try CurlewRequest(url: url))
            #expect(response.text == "hit\n")
            #expect(response.metrics.httpVersion == .http2)
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 1)
        #expect(hits.map(\.address) == ["unix:"])
    }

    /// https over a socket too, though nginx's socket speaks HTTP/2 here: another server's ALPN may choose HTTP/1.1,
    /// and on libcurl 7.x nothing could check such a connection before its reuse.
    @Test(arguments: allLoops)
    func httpsRequestsOverASocketArePooledOnlyWhereLibcurlChecksThem(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop, configure: { $0.tls.caFile = nginx.caFile }) { client in
            for index in 0..<3 {
                let url = "https+unix://\(encodedSocketPath(nginx.httpsUnixSocketPath))\(marker)\(index)"
                let response = try await client.execute(try CurlewRequest(url: url))
                #expect(response.text == "hit\n")
                #expect(response.metrics.httpVersion == .http2)
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 3)
        #expect(hits.map(\.address) == ["unix:", "unix:", "unix:"])
        #expect(Set(hits.map(\.connection)).count == (Self.socketConnectionsArePooled ? 1 : 3))
    }

    @Test(arguments: allLoops)
    func theClientsSocketPathCarriesEveryRequest(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop, configure: { $0.unixSocketPath = nginx.httpUnixSocketPath }) { client in
            for index in 0..<3 {
                // Plain GETs: the repeated-GET path must keep the socket too.
                let response = try await client.execute(try CurlewRequest(url: "http://app.invalid\(marker)\(index)"))
                #expect(response.text == "hit\n")
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 3)
        #expect(hits.map(\.address) == ["unix:", "unix:", "unix:"])
        #expect(Set(hits.map(\.host)) == ["app.invalid"])
        #expect(Set(hits.map(\.connection)).count == (Self.socketConnectionsArePooled ? 1 : 3))
    }

    /// libcurl keys its pool by host and port; a connection over a socket must still never carry a TCP request to
    /// the same host and port, nor the reverse.
    @Test(arguments: allLoops)
    func socketAndTCPConnectionsToTheSameHostAreNeverMixed(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop) { client in
            for index in 0..<6 {
                let overSocket = index % 2 == 0
                var request = try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)\(index)")
                try request.addHeader("X-Test-Tag", overSocket ? "unix" : "tcp")
                if overSocket { request.unixSocketPath = nginx.httpUnixSocketPath }
                let response = try await client.execute(request)
                #expect(response.text == "hit\n")
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 6)
        #expect(hits.count == 6)
        let socketHits = hits.filter { $0.tag == "unix" }
        let tcpHits = hits.filter { $0.tag == "tcp" }
        #expect(socketHits.map(\.address) == ["unix:", "unix:", "unix:"])
        #expect(tcpHits.map(\.address) == ["127.0.0.1", "127.0.0.1", "127.0.0.1"])
        // Each kind reuses its own connection (a socket's where libcurl checks them itself), and none is shared
        // between the two.
        #expect(Set(socketHits.map(\.connection)).count == (Self.socketConnectionsArePooled ? 1 : 3))
        #expect(Set(tcpHits.map(\.connection)).count == 1)
        #expect(Set(socketHits.map(\.connection)).isDisjoint(with: tcpHits.map(\.connection)))
    }

    @Test(arguments: allLoops)
    func aMissingSocketFailsAsARefusedOrFailedConnection(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        try await withClient(loop) { client in
            let url = "http+unix://\(encodedSocketPath("/nonexistent-curlew-\(UUID().uuidString).sock"))/x"
            let error = await caughtError { _ = try await client.execute(try CurlewRequest(url: url)) } as? CurlewError
            #expect(error?.code == .connectionRefused || error?.code == .connectFailed)
        }
    }
}

/// A socket path as the host of an `http+unix` URL: every byte but letters and digits percent-encoded.
func encodedSocketPath(_ path: String) -> String {
    path.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? path
}

/// One `/hits/` line of nginx's log (``NginxServer/hitsAccessLogPath``).
struct LoggedHit {
    let connection: Int
    let host: String
    let tag: String
    let address: String
}

/// Waits (boundedly) until nginx logged `expected` requests under `marker` and returns them in log order.
func loggedHits(_ nginx: NginxServer, marker: String, atLeast expected: Int) async throws -> [LoggedHit] {
    var hits: [LoggedHit] = []
    try await waitUntil(timeout: .seconds(10), "nginx to log \(expected) requests under \(marker)") {
        hits = nginx.hitsLog.lines(inGroupOf: marker).compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            // The mutual-TLS server's lines stop after the length: no tag, no address.
            guard fields.count >= 6, let connection = Int(fields[1]) else { return nil }
            return LoggedHit(
                connection: connection, host: fields[5], tag: fields.count > 7 ? fields[7] : "-",
                address: fields.count > 8 ? fields[8] : "-")
        }
        return hits.count >= expected
    }
    return hits
}
