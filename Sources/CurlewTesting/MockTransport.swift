public import Curlew
public import CurlewEngine
import Foundation
import HTTPTypes
import Synchronization

/// A transport that answers from stubs and fixture files instead of the network, behind the very same
/// pipeline as the engine: interceptors, retries, validation, processors and decoding all run, so a test
/// behaves as production does.
///
/// ```swift
/// let mock = MockTransport(fixturesDirectory: "Tests/Fixtures")
/// mock.stub(.get("/me/friends", json: [["name": "Ada"]]))
/// mock.stub(.post("/login", status: .unauthorized, delay: .milliseconds(20)))
/// mock.stub(.get("/flaky", error: CurlewError(code: .connectionRefused, detail: "down")))
/// struct API: HTTPProvider { let baseURL = "https://api.example.com"; let transport: any HTTPTransport }
/// let friends = try await API(transport: mock).request(.friends).json()
/// ```
///
/// Responses carry metrics and a final progress report as the engine's would: the request body's size (bytes,
/// files and forms measured, a stream's declared length; a stream is not read), the response body's size, and
/// the stub's delay as the time to the first byte and in total.
///
/// A request is answered by the most recently added stub that matches it; else, when its route names
/// ``Route/mockData`` (LKAPI), by `<fixturesDirectory>/<mockData>.json` with status 200; else it fails with a
/// `CurlewError` of code `invalidRequest` that names it, never silently.
public final class MockTransport: HTTPTransport {
    private struct State {
        var stubs: [Stub] = []
        var received: [CurlewRequest] = []
    }

    private let state = Mutex(State())
    /// Where ``Route/mockData`` fixtures are read from.
    public let fixturesDirectory: String?

    /// A mock serving `stubs` (later ones first) and the fixtures in `fixturesDirectory`.
    public init(fixturesDirectory: String? = nil, stubs: [Stub] = []) {
        self.fixturesDirectory = fixturesDirectory
        state.withLock { $0.stubs = stubs }
    }

    /// Adds a stub; it takes precedence over the stubs added before it.
    public func stub(_ stub: Stub) {
        state.withLock { $0.stubs.append(stub) }
    }

    /// Every request received so far, as sent (after the request interceptors), in order.
    public var receivedRequests: [CurlewRequest] {
        state.withLock { $0.received }
    }

    public func send(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteResponse {
        let stub = state.withLock { state -> Stub? in
            state.received.append(request)
            return state.stubs.last { $0.matches(request) }
        }
        let reply: StubResponse
        if let stub {
            reply = try await stub.reply(to: request)
        } else if let fixture = context.route.mockData {
            reply = try fixtureResponse(named: fixture)
        } else {
            // The provider's own parameters are credentials to it, as in every message the route layer writes.
            let url = URLRedaction.messages.redactingAlso(context.credentialParameterNames).redact(request.url)
            throw CurlewError(
                code: .invalidRequest,
                detail: "MockTransport has no stub for \(request.method) \(url) and the route names no mockData")
        }
        if let delay = reply.delay { try await Task.sleep(for: delay) }
        if let error = reply.error { throw error }
        return RouteResponse.simulated(
            for: request, status: reply.status, headerFields: reply.headerFields, body: reply.body,
            elapsed: reply.delay ?? .zero)
    }

    private func fixtureResponse(named name: String) throws -> StubResponse {
        StubResponse(
            status: .ok, headers: ["Content-Type": "application/json"],
            body: try FixtureTransport.fixture(named: name, in: fixturesDirectory))
    }
}
