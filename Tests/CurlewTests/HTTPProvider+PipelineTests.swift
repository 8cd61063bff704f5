import Curlew
import CurlewEngine
import CurlewTesting
import Synchronization
import Testing

@Suite struct HTTPProviderPipelineTests {
    @Test func anInvalidRouteGoesThroughShouldContinueAndThePluginsLikeAnyError() async throws {
        let heard = EntryLog()
        var provider = TestProvider(baseURL: "http://api.local", transport: MockTransport())
        provider.plugins = [
            AnyPlugin(didReceive: { result, _ in heard.append((try? result.get()) == nil ? "failure" : "success") })
        ]
        provider.stopsOn = { error in
            guard error.code == .invalidRoute else { return false }
            heard.append("shouldContinue")
            return true
        }
        // A JSON body on GET is refused before anything is built.
        let route = Route(path: "/search", params: ["q": "x"], encoding: .json)
        do {
            try await provider.request(route)
            Issue.record("a JSON body on GET should be refused")
        } catch  where error.stoppedError?.code == .invalidRoute {
            #expect(error.underlying.invalidRouteReason?.contains("cannot carry") == true)
        } catch {
            Issue.record("unexpected \(error)")
        }
        do {
            _ = try await provider.stream(route)
            Issue.record("a JSON body on GET should be refused")
        } catch  where error.stoppedError?.code == .invalidRoute {
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(heard.entries == ["shouldContinue", "failure", "shouldContinue", "failure"])
    }

    private struct Item: Decodable { let id: Int }

    @Test func decodingFailuresOfRequestObjectAndArrayGoThroughShouldContinue() async throws {
        let mock = MockTransport(stubs: [
            .get("/item", json: ["id": "one"]), .get("/items", json: [["id": 1], ["id": nil]]),
        ])
        var provider = TestProvider(baseURL: "http://api.local", transport: mock)
        let asked = EntryLog()
        provider.stopsOn = { error in
            guard let failure = error.decodingFailure else { return false }
            asked.append(failure.codingPath)
            return true
        }
        await #expect {
            try await provider.requestObject(of: Item.self, Route(path: "/item"))
        } throws: { error in
            (error as? ProviderError)?.stoppedError?.code == .decoding
        }
        await #expect {
            try await provider.requestArray(of: Item.self, Route(path: "/items"))
        } throws: { error in
            (error as? ProviderError)?.stoppedError?.code == .decoding
        }
        #expect(asked.entries == ["id", "[1].id"])
    }

    @Test func aRouteTimeoutKeepsTheClientsConnectAndIdleTimeouts() async throws {
        var configuration = CurlewClient.Configuration()
        configuration.loopCount = 1
        configuration.timeouts = CurlewClient.Timeouts(connect: .seconds(3), total: .seconds(100), idle: .seconds(7))
        let client = CurlewClient(configuration: configuration)
        let provider = TestProvider(baseURL: "http://127.0.0.1:1", transport: client)
        let request = try provider.makeRequest(for: Route(path: "/slow", timeout: .seconds(5)))
        #expect(request.timeouts == .init(total: .seconds(5)))
        #expect(
            request.timeouts.applied(to: configuration.timeouts)
                == CurlewClient.Timeouts(connect: .seconds(3), total: .seconds(5), idle: .seconds(7)))
        #expect(try provider.makeRequest(for: Route(path: "/slow")).timeouts.isEmpty)
        await client.shutdown()
    }
}
