import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

/// Notes each call of each side, tagged with its level.
private struct RecordingInterceptor: Interceptor {
    let level: String
    let journal: EntryLog
    /// The global level sees every request of the process; it records only this test's.
    let marker: String?

    func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        if level == "call", let marker { try request.setHeader("X-Order-Test", marker) }
        guard marker == nil || request.headerFields[HTTPField.Name("X-Order-Test")!] == marker else { return }
        journal.append("adapt \(level)")
        try request.addHeader("X-Level", level)
    }

    func intercept(_ response: RouteResponse, context: InterceptorContext) async throws -> InterceptorDecision {
        guard marker == nil || response.request.headerFields[HTTPField.Name("X-Order-Test")!] == marker else {
            return .pass
        }
        journal.append("response \(level)")
        return .pass
    }
}

@Suite(.serialized) struct InterceptorTests {
    @Test(arguments: BackendKind.allCases)
    func fourLevelsRunCallRouteProviderGlobalThenBackInReverse(kind: BackendKind) async throws {
        let journal = EntryLog()
        let marker = UUID().uuidString
        let global = RecordingInterceptor(level: "global", journal: journal, marker: marker)
        GlobalInterceptors.append(global)
        defer { GlobalInterceptors.removeAll() }
        var provider = TestProvider(try await Backend.make(kind))
        provider.interceptors = [RecordingInterceptor(level: "provider", journal: journal, marker: marker)]
        let route = Route(
            path: "/anything", interceptors: [RecordingInterceptor(level: "route", journal: journal, marker: marker)])

        let response = try await provider.request(
            route, interceptors: [RecordingInterceptor(level: "call", journal: journal, marker: marker)])

        #expect(
            journal.entries == [
                "adapt call", "adapt route", "adapt provider", "adapt global",
                "response global", "response provider", "response route", "response call",
            ])
        // The request sent is the one every level adapted, in that order.
        #expect(try Echo(response).header("X-Level") == "call,route,provider,global")
        #expect(
            response.request.headerFields[values: HTTPField.Name("X-Level")!] == [
                "call", "route", "provider", "global",
            ])
    }

    @Test func aResponseInterceptorCanReplaceTheResponse() async throws {
        let provider = TestProvider(baseURL: HTTPBinMock.baseURL, transport: HTTPBinMock.transport())
        let replacing = AnyInterceptor(response: { response, _ in
            var replaced = response
            replaced.body = Array(#"{"replaced":true}"#.utf8)
            return .replace(replaced)
        })
        let json = try await provider.request(
            Route(path: "/status/500"),
            interceptors: [
                AnyInterceptor(response: { response, _ in
                    .replace(
                        RouteResponse(
                            status: .ok, body: Array(#"{"replaced":true}"#.utf8), url: response.url,
                            request: response.request))
                })
            ]
        ).json()
        #expect(json == ["replaced": true])
        let second = try await provider.request(Route(path: "/anything"), interceptors: [replacing]).json()
        #expect(second == ["replaced": true])
    }

    private struct Refused: Error {}

    @Test func aFailDecisionBecomesAValidationErrorWithTheResponse() async throws {
        let provider = TestProvider(baseURL: HTTPBinMock.baseURL, transport: HTTPBinMock.transport())
        do {
            try await provider.request(
                Route(path: "/anything"), interceptors: [AnyInterceptor(response: { _, _ in .fail(Refused()) })])
            Issue.record("should fail")
        } catch  where error.code == .validation {
            #expect(error.cause is Refused)
            #expect(error.status == .ok)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func anAdapterThatThrowsFailsTheCallBeforeAnythingIsSent() async throws {
        let mock = HTTPBinMock.transport()
        let provider = TestProvider(baseURL: HTTPBinMock.baseURL, transport: mock)
        await #expect {
            try await provider.request(
                Route(path: "/anything"), interceptors: [AnyInterceptor(adapt: { _, _ in throw Refused() })])
        } throws: { error in
            guard let error = error as? ProviderError, error.code == .interceptor else { return false }
            return error.cause is Refused
        }
        #expect(mock.receivedRequests.isEmpty)
    }

    private struct Recovering: Interceptor {
        func intercept(_ error: CurlewError, context: InterceptorContext) async throws -> InterceptorDecision {
            guard error.code == .connectionRefused else { return .pass }
            let request = try CurlewRequest(url: "http://cache.local/")
            return .replace(RouteResponse(status: .ok, body: Array("cached".utf8), url: request.url, request: request))
        }
    }

    @Test func aTransportFailureCanBeRecoveredOrReachesTheCallerTyped() async throws {
        let mock = MockTransport(stubs: [
            .failing(.get, "/down", with: CurlewError(code: .connectionRefused, detail: "refused"))
        ])
        let provider = TestProvider(baseURL: "http://api.local", transport: mock)
        #expect(try await provider.request(Route(path: "/down"), interceptors: [Recovering()]).string() == "cached")
        do {
            try await provider.request(Route(path: "/down"))
            Issue.record("should fail")
        } catch  where error.code == .transport {
            #expect(error.transportError?.code == .connectionRefused)
            #expect(error.request?.url == "http://api.local/down")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func cancellingTheCallingTaskThrowsCancelled() async throws {
        let mock = MockTransport(stubs: [.get("/slow", json: [:], delay: .seconds(30))])
        let provider = TestProvider(baseURL: "http://api.local", transport: mock)
        let task = Task { () async throws(ProviderError) -> RouteResponse in
            try await provider.request(Route(path: "/slow"))
        }
        try await waitUntil(timeout: .seconds(30)) { !mock.receivedRequests.isEmpty }
        task.cancel()
        let result = await task.result
        guard case .failure(let error) = result, (error as? ProviderError)?.code == .cancelled else {
            Issue.record("expected .cancelled, got \(result)")
            return
        }
    }

    @Test func everyDecisionNamesItsActionAndKeepsWhatCameWithIt() throws {
        let request = try CurlewRequest(url: "http://api.local/x")
        let response = RouteResponse(status: .accepted, url: request.url, request: request)
        let decisions: [(InterceptorDecision, InterceptorDecision.Action, String)] = [
            (.pass, .pass, "pass"), (.replace(response), .replace, "replace"), (.fail(Refused()), .fail, "fail"),
            (.retry(after: .seconds(2)), .retry, "retry"), (.retry, .retry, "retry"),
        ]
        for (decision, action, name) in decisions {
            #expect(decision.action == action)
            #expect(decision.action.name == name)
            #expect("\(decision.action)" == name)
        }
        #expect(Set(decisions.map(\.1)).count == 4, "four distinct actions")

        #expect(InterceptorDecision.replace(response).replacement?.status == .accepted)
        #expect(InterceptorDecision.pass.replacement == nil)
        #expect(InterceptorDecision.fail(Refused()).error is Refused)
        #expect(InterceptorDecision.retry(after: .seconds(2)).error == nil)
        #expect(InterceptorDecision.retry(after: .seconds(2)).retryDelay == .seconds(2))
        #expect(InterceptorDecision.retry.retryDelay == nil)
        #expect(InterceptorDecision.pass.retryDelay == nil)
    }
}
