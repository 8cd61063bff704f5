import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

/// The local end of connections and DNS settings, checked in nginx's log: it records each request's client address.
@Suite("Local address and DNS")
struct CurlewClientLocalAddressAndDNSTests {
    @Test(arguments: allLoops)
    func connectionsComeFromTheClientsLocalAddress(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop, configure: { $0.localAddress = "host!127.0.0.2" }) { client in
            for index in 0..<2 {
                let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)\(index)"))
                #expect(response.text == "hit\n")
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 2)
        #expect(hits.map(\.address) == ["127.0.0.2", "127.0.0.2"])
    }

    @Test(arguments: allLoops)
    func aRequestsLocalAddressOverridesTheClientsAndGetsAConnectionOfItsOwn(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop, configure: { $0.localAddress = "host!127.0.0.2" }) { client in
            for index in 0..<4 {
                var request = try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)\(index)")
                if index % 2 == 1 { request.localAddress = "host!127.0.0.3" }
                let response = try await client.execute(request)
                #expect(response.text == "hit\n")
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 4)
        #expect(hits.map(\.address) == ["127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"])
        // A connection from one address is never handed to a request that asked for the other (libcurl 8.x would).
        let connectionsByAddress = Dictionary(grouping: hits, by: \.address).mapValues { Set($0.map(\.connection)) }
        #expect(connectionsByAddress["127.0.0.2"]?.isDisjoint(with: connectionsByAddress["127.0.0.3"] ?? []) == true)
    }

    @Test(arguments: allLoops)
    func aLocalAddressThatCannotBeBoundFailsAsConnectFailed(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        // 192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails before anything is sent.
        try await withClient(loop, configure: { $0.localAddress = "host!192.0.2.1" }) { client in
            let error =
                await caughtError {
                    _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
                } as? CurlewError
            #expect(error?.code == .connectFailed)
            #expect(error?.detail.contains("local address") == true)
        }
    }

    /// Shuffling and Happy Eyeballs cannot be observed on loopback (one address per family, an instant refusal on
    /// ::1): this checks that libcurl takes every setting and that a name with both families still connects.
    @Test(arguments: allLoops)
    func dnsSettingsAreAcceptedAndANameWithTwoFamiliesStillConnects(
        loop: CurlewClient.Configuration.EventLoopKind
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(
            loop,
            configure: {
                $0.dns = CurlewClient.DNSConfiguration(
                    cacheLifetime: .milliseconds(1500), shufflesAddresses: true, happyEyeballsTimeout: .milliseconds(50)
                )
            }
        ) { client in
            for index in 0..<2 {
                // nginx listens on 127.0.0.1 only; localhost also resolves to ::1.
                let url = "http://localhost:\(nginx.httpPort)\(marker)\(index)"
                let response = try await client.execute(try CurlewRequest(url: url))
                #expect(response.text == "hit\n")
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 2)
        #expect(hits.count == 2)
    }

    @Test func aClientWithDefaultDNSSettingsComparesEqualToTheDefault() {
        #expect(CurlewClient.Configuration().dns == CurlewClient.DNSConfiguration())
        #expect(CurlewClient.Configuration().localAddress == nil)
    }
}
