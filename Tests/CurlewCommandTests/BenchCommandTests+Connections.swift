import CurlewTestSupport
import Foundation
import Testing

/// `--no-keepalive`, `--connect-to` and client certificates, checked against nginx's log.
extension BenchCommandTests {
    @Test func noKeepaliveOpensAConnectionPerRequest() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let output = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + marker + "x", "--no-keepalive", "-n", "40", "-c", "4", "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 40)
        // Counted by nginx: 40 requests on 40 different connections.
        #expect(hits.count == 40)
        #expect(Set(hits.map(\.connection)).count == 40)
        #expect(try output.json()["connectionsOpened"] as? Int == 40)

        // The default keeps them: at most one per worker.
        let reusing = NginxHit.makeMarker()
        let kept = try await CurlewBinary.run([
            "bench", nginx.httpBaseURL + reusing + "x", "-n", "40", "-c", "4", "--json",
        ])
        #expect(kept.status == 0, "\(kept.stderr)")
        let keptHits = try await NginxHit.read(nginx, marker: reusing, atLeast: 40)
        #expect(Set(keptHits.map(\.connection)).count <= 4)
    }

    @Test func connectToReachesAVirtualHostWithoutDNS() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        // `.test` names never resolve: only --connect-to can get these requests to nginx.
        let output = try await CurlewBinary.run([
            "bench", "http://curlew-virtual.test:8080" + marker + "x", "--connect-to",
            "curlew-virtual.test:8080:127.0.0.1:\(nginx.httpPort)", "-n", "20", "-c", "2", "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 20)
        #expect(hits.count == 20)
        // The URL's host is what the server was asked for.
        #expect(hits.allSatisfy { $0.host == "curlew-virtual.test" })

        let unmapped = try await CurlewBinary.run([
            "bench", "http://curlew-virtual.test:8080/", "-n", "2", "-c", "1", "--json",
        ])
        #expect(unmapped.status == 98)
        #expect((try unmapped.json()["failures"] as? [String: Int])?["dnsFailure"] == 2)
    }

    @Test func clientCertificatesPassNginxsVerification() async throws {
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let output = try await CurlewBinary.run([
            "bench", nginx.mutualTLSBaseURL + marker + "x", "--cacert", nginx.caFile, "--cert",
            nginx.clientCertificateFile,
            "--key", nginx.clientKeyFile, "-n", "20", "-c", "2", "--json",
        ])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(try output.json()["succeeded"] as? Int == 20)
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: 20)
        // nginx logged the verified client certificate's subject for each request.
        #expect(hits.count == 20)
        #expect(hits.allSatisfy { $0.host == "CN=curlew-test-client" }, "\(hits.map(\.host))")

        // Without the certificate nginx answers 400 to every request.
        let anonymous = try await CurlewBinary.run([
            "bench", nginx.mutualTLSBaseURL + marker + "y", "--cacert", nginx.caFile, "-n", "3", "-c", "1", "--json",
        ])
        #expect(anonymous.status == 98)
        #expect((try anonymous.json()["statusCodes"] as? [String: Int])?["400"] == 3)
    }

    @Test(arguments: [
        (["bench", "--connect-to", "a:1:b", "http://127.0.0.1:1/"], "HOST:PORT:HOST2:PORT2"),
        (["bench", "--connect-to", "a:443:b:https", "http://127.0.0.1:1/"], "is not a number from 1 to 65535"),
        (["bench", "--start-at", "1e12", "http://127.0.0.1:1/"], "--start-at"),
        (["bench", "--key", "/dev/null", "http://127.0.0.1:1/"], "--key needs --cert"),
        (["bench", "--cert", "/nonexistent/cert.pem", "http://127.0.0.1:1/"], "/nonexistent/cert.pem"),
    ])
    func badConnectionOptionsAreUsageErrors(arguments: [String], mention: String) async throws {
        let output = try await CurlewBinary.run(arguments)
        #expect(output.status == 64)
        #expect(output.stderr.contains(mention), "\(output.stderr)")
    }
}
