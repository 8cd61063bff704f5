import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

// Konex's README in Curlew's API. A request is a struct conforming to `Routable` (Konex's `KonexRequest`), the
// client is a provider, and plugins, processors and validators exist at the client, request and call levels.
// httpbin echoes a POST, so a request-level processor takes the posts out of the echo: the same processor
// serves both backends.

/// Konex's `Post: KonexJSONDecodable`, as `Decodable`.
private struct Post: Decodable, Equatable {
    var id: Int?
    var title: String?
}

/// Konex's `struct GetAllPostsRequest: KonexRequest { let path = "…/posts/"; let method = .post }`.
private struct GetAllPostsRequest: Routable {
    let path: String
    let method: HTTPRequest.Method = .post
    var parameters: Parameters? {
        ["posts": [["id": 1, "title": "Konex"], ["id": 2, "title": "Curlew"]] as JSONValue]
    }
    /// Unwraps httpbin's echo: `{"json": {"posts": [...]}}` → `[...]`.
    var requestResponseProcessors: [any ResponseProcessor] {
        [AnyResponseProcessor.json { $0["json"]["posts"] }]
    }
}

/// Konex's `KonexBasicRequest`, subclassed for shared behaviour: here a protocol with defaults does it.
private protocol AuthenticatedRequest: Routable {}
extension AuthenticatedRequest {
    var headers: [String: String]? { ["Authorization": "Bearer konex"] }
}

private struct GetProfileRequest: AuthenticatedRequest {
    let path: String
}

/// Konex's `KonexClient`: a provider with client-level components.
private struct KonexClient: HTTPProvider {
    let baseURL: String
    let transport: any HTTPTransport
    var plugins: [any Plugin] = []
    var responseProcessors: [any ResponseProcessor] = []
    var responseValidators: [any ResponseValidator] = []

    init(_ backend: Backend) {
        baseURL = backend.baseURL
        transport = backend.transport
    }
}

private struct NotAnArray: Error {}

private final class Journal: Sendable {
    private let entries = Mutex<[String]>([])
    func note(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// A request whose components note their level in a journal.
private struct JournaledRequest: Routable {
    let path: String
    let journal: Journal
    var requestPlugins: [any Plugin] { [plugin("request", journal)] }
    var requestResponseProcessors: [any ResponseProcessor] { [processor("request", journal)] }
    var requestResponseValidators: [any ResponseValidator] { [validator("request", journal)] }
}

private func plugin(_ level: String, _ journal: Journal) -> AnyPlugin {
    AnyPlugin(
        didSend: { _, _ in journal.note("\(level) plugin didSend") },
        didReceive: { _, _ in journal.note("\(level) plugin didReceive") })
}

private func processor(_ level: String, _ journal: Journal) -> AnyResponseProcessor {
    AnyResponseProcessor { response in
        journal.note("\(level) processor")
        return response
    }
}

private func validator(_ level: String, _ journal: Journal) -> AnyResponseValidator {
    AnyResponseValidator { _ in journal.note("\(level) validator") }
}

@Suite struct KonexReadmeTests {
    @Test(arguments: BackendKind.allCases)
    func requestArrayDecodesThePosts(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        let client = KonexClient(backend)
        let request = GetAllPostsRequest(path: backend.baseURL + "/anything/posts/")
        // client.requestArray(of: Post.self, request: request, onSuccess: { posts in … }, onError: { error in … })
        let posts = try await client.requestArray(of: Post.self, request)
        #expect(posts == [Post(id: 1, title: "Konex"), Post(id: 2, title: "Curlew")])
        // requestObject(ofType:request:) for a single object.
        let first = try await client.requestObject(
            of: Post.self, GetProfileRequest(path: "/anything/posts/1"))
        #expect(first == Post(id: nil, title: nil))
    }

    @Test(arguments: BackendKind.allCases)
    func sharedBehaviourThroughAProtocolInsteadOfASubclass(kind: BackendKind) async throws {
        let client = KonexClient(try await Backend.make(kind))
        let echo = try Echo(try await client.request(GetProfileRequest(path: "/anything/profile")))
        #expect(echo.header("Authorization") == "Bearer konex")
        #expect(echo.method == "GET")
    }

    @Test(arguments: BackendKind.allCases)
    func pluginsProcessorsAndValidatorsRunAtClientRequestAndCallLevels(kind: BackendKind) async throws {
        let journal = Journal()
        var client = KonexClient(try await Backend.make(kind))
        client.plugins = [plugin("client", journal)]
        client.responseProcessors = [processor("client", journal)]
        client.responseValidators = [validator("client", journal)]
        try await client.request(
            JournaledRequest(path: "/anything/journal", journal: journal),
            plugins: [plugin("call", journal)],
            responseProcessors: [processor("call", journal)],
            responseValidators: [validator("call", journal)])
        #expect(
            journal.all == [
                "client plugin didSend", "request plugin didSend", "call plugin didSend",
                "client processor", "request processor", "call processor",
                "client validator", "request validator", "call validator",
                "client plugin didReceive", "request plugin didReceive", "call plugin didReceive",
            ])
    }

    @Test(arguments: BackendKind.allCases)
    func aValidatorErrorReachesTheCallerAndThePlugins(kind: BackendKind) async throws {
        let received = Mutex<[Bool]>([])
        let client = KonexClient(try await Backend.make(kind))
        do {
            try await client.request(
                Route(path: "/anything/not-an-array"),
                plugins: [
                    AnyPlugin(didReceive: { result, _ in received.withLock { $0.append((try? result.get()) != nil) } })
                ],
                responseValidators: [
                    AnyResponseValidator { response in
                        if try response.json().array == nil { throw NotAnArray() }
                    }
                ])
            Issue.record("the validator should have failed the call")
        } catch  where error.code == .validation {
            #expect(error.cause is NotAnArray)
        } catch {
            Issue.record("unexpected \(error)")
        }
        // Konex delivered validator errors on another queue than the rest; here the plugin hears it like any outcome.
        #expect(received.withLock { $0 } == [false])
    }
}
