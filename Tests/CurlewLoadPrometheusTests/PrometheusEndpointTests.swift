import CurlewEngine
import CurlewLoadPrometheus
import CurlewTestSupport
import Foundation
import Testing

/// The `/metrics` server: what it answers where, and why it cannot start.
@Suite struct PrometheusEndpointTests {
    @Test func getMetricsAnswersTheExpositionAndOtherPathsAre404() async throws {
        let endpoint = try await PrometheusEndpoint.start(host: "127.0.0.1", port: 0) { buffer in
            buffer += Array("curlew_test_total 7\n".utf8)
        }
        let client = CurlewClient(configuration: .init())
        do {
            #expect(endpoint.port > 0)
            #expect(endpoint.url == "http://127.0.0.1:\(endpoint.port)/metrics")
            let metrics = try await client.execute(try CurlewRequest(url: endpoint.url + "?x=1"))
            #expect(metrics.status.code == 200)
            #expect(metrics.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
            #expect(String(decoding: metrics.body, as: UTF8.self) == "curlew_test_total 7\n")
            // Twice on the same connection (Prometheus keeps its connection).
            let again = try await client.execute(try CurlewRequest(url: endpoint.url))
            #expect(again.status.code == 200 && again.metrics.reusedConnection)
            let elsewhere = try await client.execute(
                try CurlewRequest(url: "http://127.0.0.1:\(endpoint.port)/metrics/more"))
            #expect(elsewhere.status.code == 404)
            let posted = try await client.execute(try CurlewRequest(method: .post, url: endpoint.url))
            #expect(posted.status.code == 405)
        } catch {
            await client.shutdown()
            await endpoint.shutdown()
            throw error
        }
        await client.shutdown()
        await endpoint.shutdown()
    }

    @Test func aPortInUseIsAnErrorNamingTheAddress() async throws {
        let first = try await PrometheusEndpoint.start(host: "127.0.0.1", port: 0) { _ in }
        let port = first.port
        do {
            _ = try await PrometheusEndpoint.start(host: "127.0.0.1", port: port) { _ in }
            Issue.record("a second endpoint bound 127.0.0.1:\(port)")
        } catch {
            #expect(error.description.hasPrefix("cannot listen on 127.0.0.1:\(port): "))
            #expect(error.description.contains("in use"))
        }
        await first.shutdown()
    }

    @Test func anAddressOfNoInterfaceIsAnError() async throws {
        // 192.0.2.0/24 is TEST-NET-1: never an address of this host.
        await #expect(throws: PrometheusEndpointError.self) {
            _ = try await PrometheusEndpoint.start(host: "192.0.2.1", port: 0) { _ in }
        }
    }
}
