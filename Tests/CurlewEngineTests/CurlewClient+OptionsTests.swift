import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Testing

@Suite("Proxy and Expect: 100-continue")
struct CurlewClientOptionsTests {
    @Test(arguments: allLoops)
    func requestsGoThroughTheConfiguredProxy(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let proxy = try await LoopbackServer.start()
        defer { Task { try? await proxy.shutdown() } }
        try await withClient(loop, configure: { $0.proxy = .url(proxy.baseURL) }) { client in
            // The proxy answers itself, so nothing leaves the machine for the .invalid host.
            let response = try await client.execute(try CurlewRequest(url: "http://example.invalid/x"))
            #expect(response.text == "proxied http://example.invalid/x")
        }
    }

    @Test(arguments: allLoops)
    func noProxyIgnoresTheEnvironment(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop, configure: { $0.proxy = .none }) { client in
            let response = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            #expect(response.body.count == 100)
        }
    }

    @Test(arguments: allLoops)
    func expectContinueIsSentOnlyWhenAskedFor(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        // Above 1 MiB libcurl would add Expect by itself; Curlew must not unless asked.
        let body = CurlewRequest.Body.bytes(Array(repeating: 0x61, count: 1_200_000))
        try await withClient(loop) { client in
            let plain = try CurlewRequest(method: .post, url: "\(httpbin.baseURL)/anything", body: body)
            let plainHeaders = try #require(try await client.execute(plain).json()["headers"] as? [String: String])
            #expect(plainHeaders["Expect"] == nil)

            var asking = plain
            asking.expectContinue = .enabled(timeout: .milliseconds(200))
            let response = try await client.execute(asking)
            let askingHeaders = try #require(try response.json()["headers"] as? [String: String])
            #expect(askingHeaders["Expect"] == "100-continue")
            #expect(response.metrics.bytesSent == 1_200_000)
        }
    }

    /// libcurl 7.88 resends a request whose explicit `Expect: 100-continue` a server refuses, without end; the
    /// engine stops at the first 417 with a typed error.
    @Test(arguments: allLoops)
    func aRefusedExpectationFailsOnceInsteadOfRetryingForever(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withScriptedServer({ _ in ScriptedResponse(status: 417) }) { server in
            try await withClient(loop) { client in
                var request = try CurlewRequest(method: .post, url: server.baseURL, body: .bytes(Array("x".utf8)))
                request.expectContinue = .enabled(timeout: .milliseconds(100))
                let sent = request
                let error = try await withTimeout(.seconds(10), "the 417") {
                    await caughtError { _ = try await client.execute(sent) } as? CurlewError
                }
                #expect(error?.code == .invalidRequest)
                #expect(error?.detail.contains("417") == true)
                #expect(server.requestCount == 1)
            }
        }
    }
}
