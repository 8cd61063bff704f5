import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

/// TLS versions, public-key pinning and certificates from memory, against nginx's test CA and certificates (made
/// with openssl by the test support) and its TLS 1.2-only socket.
@Suite("TLS versions, pinning and certificates from memory")
struct CurlewClientTLSOptionsTests {
    /// A well-formed pin no key has: the hash of nothing in particular.
    static let unknownPin = "sha256//" + Data(repeating: 0, count: 32).base64EncodedString()

    @Test(arguments: allLoops)
    func aServerWhoseKeyIsAmongThePinsIsAccepted(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.tls.pinnedPublicKeys = [Self.unknownPin, nginx.serverPublicKeyPin]
            }
        ) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
            #expect(response.status == .ok)
        }
    }

    @Test(arguments: allLoops)
    func aServerWhoseKeyIsNotPinnedFailsWithAPinningError(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.tls.pinnedPublicKeys = [Self.unknownPin]
            }
        ) { client in
            let error =
                await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
                } as? CurlewError
            #expect(error?.code == .tlsPinnedKeyMismatch)
            #expect(error?.code.name == "tlsPinnedKeyMismatch")
        }
    }

    @Test(arguments: ["sha256/abc", "AAAA", "sha256//not-base64-at-all-but-forty-four-chars-long!!!"])
    func aMalformedPinFailsAsAnInvalidRequest(pin: String) async throws {
        let nginx = try await NginxServer.shared()
        try await withClient(.dispatch, configure: { $0.tls.pinnedPublicKeys = [pin] }) { client in
            let error =
                await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
                } as? CurlewError
            #expect(error?.code == .invalidRequest)
        }
    }

    /// A configuration that fails part-way leaves the pooled easy handle with the options set before the failure.
    /// The next plain GET on that handle must be configured in full and fail the same way, never go out with the
    /// options it had (here: trusting the CA, but no pinning at all).
    @Test(arguments: allLoops)
    func aMalformedPinFailsEveryRequestNotOnlyTheFirst(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.tls.pinnedPublicKeys = ["sha256/abc"]
            }
        ) { client in
            for attempt in 1...3 {
                let error =
                    await caughtError {
                        _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
                    } as? CurlewError
                #expect(error?.code == .invalidRequest, "request \(attempt): \(String(describing: error))")
            }
        }
    }

    @Test(arguments: allLoops)
    func aMinimumOfTLS13FailsAgainstATLS12OnlyServer(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let url = "https+unix://\(encodedSocketPath(nginx.tls12OnlyUnixSocketPath))/small"
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.tls.minimumVersion = .v1_3
            }
        ) { client in
            let error = await caughtError { _ = try await client.execute(try CurlewRequest(url: url)) } as? CurlewError
            #expect(error?.code == .tls)
        }
        // The same server with TLS 1.2 allowed (and capped there): the failure above was the version.
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.tls.minimumVersion = .v1_2
                $0.tls.maximumVersion = .v1_2
            }
        ) { client in
            let response = try await client.execute(try CurlewRequest(url: url))
            #expect(response.status == .ok)
        }
    }

    @Test func aMaximumBelowTheMinimumFailsAsAnInvalidRequest() async throws {
        let nginx = try await NginxServer.shared()
        try await withClient(
            .dispatch,
            configure: {
                $0.tls.minimumVersion = .v1_3
                $0.tls.maximumVersion = .v1_2
            }
        ) { client in
            let error =
                await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
                } as? CurlewError
            #expect(error?.code == .invalidRequest)
            #expect(error?.detail.contains("TLSv1.2") == true)
        }
        #expect(CurlewClient.TLSVersion.v1_2 < .v1_3)
        #expect("\(CurlewClient.TLSVersion.v1_0)" == "TLSv1.0")
    }

    @Test(arguments: allLoops)
    func aCAFromMemoryVerifiesTheServerAndAnotherRefusesIt(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let caPEM = try #require(FileManager.default.contents(atPath: nginx.caFile))
        try await withClient(loop, configure: { $0.tls.caCertificatesPEM = Array(caPEM) }) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
            #expect(response.status == .ok)
        }
        // The client certificate is no CA: nothing the server sends chains to it.
        let notACA = try #require(FileManager.default.contents(atPath: nginx.clientCertificateFile))
        try await withClient(loop, configure: { $0.tls.caCertificatesPEM = Array(notACA) }) { client in
            let error =
                await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpsBaseURL)/small"))
                } as? CurlewError
            #expect(error?.code == .tls)
        }
    }

    @Test(arguments: allLoops)
    func aClientCertificateAndKeyFromMemoryPassMutualTLS(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let certificate = try #require(FileManager.default.contents(atPath: nginx.clientCertificateFile))
        let key = try #require(FileManager.default.contents(atPath: nginx.clientKeyFile))
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.tls.clientCertificatePEM = Array(certificate)
                $0.tls.clientKeyPEM = Array(key)
            }
        ) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(nginx.mutualTLSBaseURL)\(marker)a"))
            #expect(response.text == "hit\n")
        }
        // The mutual-TLS server logs the client certificate's subject where the hits log has the host.
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 1)
        #expect(hits.map(\.host) == ["CN=curlew-test-client"])
    }
}
