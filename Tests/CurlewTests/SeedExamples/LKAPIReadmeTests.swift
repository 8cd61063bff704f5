import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
import Testing

// LKAPI's README in Curlew's API. The environment comes from a YAML file chosen by a variable: "local" calls
// httpbin, "testing" serves the routes' mockData fixtures through the same pipeline.

/// LKAPI's `enum Router: Routable`.
private enum Router: Routable {
    case login(email: String, password: String)
    case signup(name: String, email: String, password: String)
    case me(token: String?)

    /// HTTP Method for the request
    var method: HTTPRequest.Method {
        switch self {
        case .login, .signup: .post
        case .me: .get
        }
    }

    /// Path to the endpoint
    var path: String {
        switch self {
        case .login: "/anything/sessions/"
        case .signup: "/anything/signup"
        case .me: "/anything/me"
        }
    }

    /// Optional parameters to send up with each request
    var parameters: Parameters? {
        switch self {
        case .login(let email, let password): ["email": email, "password": password]
        case .signup(let name, let email, let password): ["name": name, "email": email, "password": password]
        case .me: nil
        }
    }

    /// Optional headers to send up with each request
    var headers: [String: String]? {
        switch self {
        case .me(let token?): ["Authorization": "Token \(token)"]
        default: nil
        }
    }

    /// Mock data to return for tests
    var mockData: String? {
        switch self {
        case .login: "login"
        case .signup: "signup"
        case .me: "me"
        }
    }
}

private struct API: HTTPProvider {
    let environment: Environment
    var baseURL: String { environment.baseURL }
    var transport: any HTTPTransport { environment.transport() }
    var additionalHeaders: [String: String] { ["X-Api-Key": environment["apiKey"] ?? ""] }
}

private struct User: Decodable {
    let email: String
}

extension Router {
    /// LKAPI's `extension API { class func login(email:password:success:failure:) }`.
    fileprivate static func login(email: String, password: String, on api: API) async throws(ProviderError) -> User {
        let json = try await Router.login(email: email, password: password).request(with: api).json()
        return try RouteResponseStandIn.decode(User.self, from: json["json"])
    }
}

/// Decodes a JSON fragment of a response.
private enum RouteResponseStandIn {
    static func decode<T: Decodable>(_ type: T.Type, from json: JSONValue) throws(ProviderError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: JSONEncoder().encode(json))
        } catch {
            throw .interceptor(error)
        }
    }
}

@Suite struct LKAPIReadmeTests {
    private static func environment(_ kind: BackendKind, in directory: String) async throws -> Environment {
        let httpbin = kind == .httpbin ? try await HTTPBinServer.shared().baseURL : "http://unused.invalid"
        let yaml = """
            default: local
            environments:
              local:
                baseURL: \(httpbin)
                apiKey: local-key
              testing:
                baseURL: https://mysuperawesomeapp.com
                apiKey: test-key
                fixtures: fixtures
            """
        try FileManager.default.createDirectory(atPath: directory + "/fixtures", withIntermediateDirectories: true)
        try yaml.write(toFile: directory + "/api-environments.yaml", atomically: true, encoding: .utf8)
        // Fixtures look like what httpbin echoes, so one test body holds for both.
        try #"{"method":"POST","json":{"email":"My Email","password":"Pass123"}}"#
            .write(toFile: directory + "/fixtures/login.json", atomically: true, encoding: .utf8)
        try #"{"method":"GET","headers":{"Authorization":"Token abc"}}"#
            .write(toFile: directory + "/fixtures/me.json", atomically: true, encoding: .utf8)
        let variables = kind == .mock ? [Environment.nameVariable: "Testing"] : [:]
        return try Environment.load(file: directory + "/api-environments.yaml", processEnvironment: variables)
    }

    private static func withDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
        let directory = NSTemporaryDirectory() + "curlew-lkapi-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try await body(directory)
    }

    @Test(arguments: BackendKind.allCases)
    func routerEnumRequestsWithMethodPathParametersAndHeaders(kind: BackendKind) async throws {
        try await Self.withDirectory { directory in
            let api = API(environment: try await Self.environment(kind, in: directory))
            #expect(api.environment.isTesting == (kind == .mock))
            // Router.Login("My Email", password: "Pass123").request({ data in … }) { error in … }
            let json = try await Router.login(email: "My Email", password: "Pass123").request(with: api).json()
            #expect(json["method"] == "POST")
            #expect(json["json"] == ["email": "My Email", "password": "Pass123"])

            let me = try await api.request(Router.me(token: "abc")).json()
            #expect(me["headers"]["Authorization"] == "Token abc")

            // The API extension that turns the response into a model.
            let user = try await Router.login(email: "My Email", password: "Pass123", on: api)
            #expect(user.email == "My Email")
        }
    }

    @Test func testingEnvironmentNeverCallsTheNetworkAndSaysWhenAFixtureIsMissing() async throws {
        try await Self.withDirectory { directory in
            let api = API(environment: try await Self.environment(.mock, in: directory))
            // No signup.json: an error naming the file, not silence (LKAPI's nil URL returned without callback).
            do throws(ProviderError) {
                try await api.request(Router.signup(name: "a", email: "b", password: "c"))
                Issue.record("a missing fixture should fail")
            } catch  where error.code == .transport {
                #expect(error.transportError?.detail.contains("signup.json") == true)
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }

    @Test(arguments: BackendKind.allCases)
    func apiPerformsAStandaloneRequestThroughThePipeline(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        // func request(URLRequest: NSURLRequest, success: successCallback?, failure: failureCallback?)
        var request = try CurlewRequest(method: .put, url: backend.baseURL + "/anything/standalone")
        try request.addHeader("X-Standalone", "yes")
        request.body = .bytes(Array("raw".utf8))
        let seen = Flag()
        var provider = TestProvider(backend)
        provider.additionalHeaders = ["X-Not-Added": "1"]
        provider.interceptors = [AnyInterceptor(adapt: { _, _ in seen.set() })]
        let echo = try Echo(try await provider.request(request))
        #expect(echo.method == "PUT")
        #expect(echo.header("X-Standalone") == "yes")
        #expect(echo.header("X-Not-Added") == nil)
        #expect(echo.data == "raw")
        #expect(seen.isSet)
    }

    @Test func anInvalidURLFailsInsteadOfReturningSilently() async throws {
        let api = TestProvider(baseURL: "http://exa mple.com", transport: HTTPBinMock.transport())
        await #expect(throws: ProviderError.self) {
            try await api.request(Router.login(email: "a", password: "b"))
        }
    }

    @Test func environmentSettingsReachEveryRequest() async throws {
        try await Self.withDirectory { directory in
            let environment = try await Self.environment(.httpbin, in: directory)
            let echo = try Echo(try await API(environment: environment).request(Router.me(token: nil)))
            #expect(echo.header("X-Api-Key") == "local-key")
        }
    }
}
