import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Testing

@testable import curlew

/// `--prometheus`: an endpoint that cannot be had is a usage error before anything is sent.
extension BenchCommandTests {
    @Test func aPrometheusPortInUseIsAUsageErrorAndNothingIsSent() async throws {
        try await withLoopbackServer { server in
            // The target server's own port: taken, and the server counts whatever is sent.
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "-n", "50", "--prometheus", "127.0.0.1:\(server.port)",
            ])
            #expect(output.status == 64)
            #expect(
                output.stderr.contains("--prometheus 127.0.0.1:\(server.port): cannot listen on"), "\(output.stderr)")
            #expect(output.stderr.contains("in use"), "\(output.stderr)")
            #expect(server.requestsServed == 0)
        }
    }

    @Test(arguments: [
        (["--prometheus", "192.0.2.1:9464"], "cannot listen on 192.0.2.1:9464"),
        (["--prometheus", "localhost:http"], "--prometheus"),
        (["--prometheus", "::1:9464"], "--prometheus"),
        (["--prometheus", ":70000"], "--prometheus"),
        (["--prometheus-hold", "5s"], "--prometheus-hold keeps --prometheus's endpoint up"),
    ])
    func badPrometheusOptionsAreUsageErrors(arguments: [String], mention: String) async throws {
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run(["bench", server.baseURL + "/small", "-n", "20"] + arguments)
            #expect(output.status == 64)
            #expect(output.stderr.contains(mention), "\(output.stderr)")
            #expect(server.requestsServed == 0)
        }
    }

    @Test(arguments: [
        (":9464", "127.0.0.1", 9464), ("9464", "127.0.0.1", 9464), ("0.0.0.0:80", "0.0.0.0", 80),
        ("[::1]:9464", "::1", 9464), ("localhost:0", "localhost", 0),
    ])
    func prometheusAddressesDefaultToLoopback(text: String, host: String, port: Int) throws {
        let address = try #require(PrometheusAddressArgument(argument: text))
        #expect(address.host == host)
        #expect(address.port == port)
    }

    @Test(arguments: ["", ":", "host:", "[::1]", "[]:1", "::1:9464", ":65536", ":-1", "a:b", ":९"])
    func malformedPrometheusAddressesAreRejected(text: String) {
        #expect(PrometheusAddressArgument(argument: text) == nil)
    }

    /// A scrape of `/metrics` on 127.0.0.1:`port`, parsed.
    static func scrape(port: Int) async throws -> [ExpositionSample] {
        let output = try await CurlewBinary.runProgram(
            ["curl", "-sf", "--max-time", "5", "http://127.0.0.1:\(port)/metrics"], timeout: .seconds(10))
        guard output.status == 0 else { throw TestSupportError("curl: \(output.status) \(output.stderr)") }
        return try ExpositionSample.parse(output.stdout)
    }
}
