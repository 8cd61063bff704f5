import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import Testing

/// Where a two-transport test runs: the same test body against a real httpbin through the engine, and against
/// ``HTTPBinMock`` through `MockTransport` (Hummingbird's `.live` / `.router` pattern).
enum BackendKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case httpbin
    case mock

    var testDescription: String { rawValue }
}

struct Backend: Sendable {
    let kind: BackendKind
    /// httpbin's root: `http://127.0.0.1:PORT`, or the mock's made-up host.
    let baseURL: String
    let transport: any HTTPTransport

    static func make(_ kind: BackendKind) async throws -> Backend {
        switch kind {
        case .httpbin:
            let server = try await HTTPBinServer.shared()
            return Backend(kind: kind, baseURL: server.baseURL, transport: CurlewClient.shared)
        case .mock:
            return Backend(kind: kind, baseURL: HTTPBinMock.baseURL, transport: HTTPBinMock.transport())
        }
    }
}

/// A provider for tests: a base URL and a transport, everything else as given.
struct TestProvider: HTTPProvider {
    var baseURL: String
    var transport: any HTTPTransport
    var additionalHeaders: [String: String] = [:]
    var additionalParameters: Parameters = [:]
    var credentialOrigins: [String] = []
    var interceptors: [any Interceptor] = []
    var plugins: [any Plugin] = []
    var responseProcessors: [any ResponseProcessor] = []
    var responseValidators: [any ResponseValidator] = []
    var arrayEncoding: ArrayEncoding = .brackets
    var maxAttempts: Int = 3
    var stopsOn: (@Sendable (ProviderError) -> Bool)? = nil

    init(baseURL: String, transport: any HTTPTransport = CurlewClient.shared) {
        self.baseURL = baseURL
        self.transport = transport
    }

    init(_ backend: Backend, path: String = "") {
        self.init(baseURL: backend.baseURL + path, transport: backend.transport)
    }

    func shouldContinue(with error: ProviderError) -> Bool {
        !(stopsOn?(error) ?? false)
    }
}

/// What httpbin's `/anything` echoes, read the same way for both backends.
struct Echo: Sendable {
    let json: JSONValue

    init(_ response: RouteResponse) throws {
        json = try response.json()
    }

    var method: String { json["method"].stringValue }
    var url: String { json["url"].stringValue }
    var args: JSONValue { json["args"] }
    var form: JSONValue { json["form"] }
    var body: JSONValue { json["json"] }
    var data: String { json["data"].stringValue }

    /// A header value, whatever the case of its name.
    func header(_ name: String) -> String? {
        json["headers"].object?.first { $0.key.lowercased() == name.lowercased() }?.value.string
    }
}
