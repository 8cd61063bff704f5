import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
import InMemoryLogging
import Logging
import Synchronization
import Testing

// BothamNetworking's README in Curlew's API, against httpbin and the mock transport.
// `BothamAPIClient(baseEndpoint:)` becomes a provider; httpbin's `/anything` stands in for api.github.com.

@Suite struct BothamNetworkingReadmeTests {
    private func apiClient(_ backend: Backend) -> TestProvider {
        // let apiClient = BothamAPIClient(baseEndpoint: "https://api.github.com/repos/Karumi/BothamNetworking")
        TestProvider(backend, path: "/anything/repos/Karumi/BothamNetworking")
    }

    @Test(arguments: BackendKind.allCases)
    func sendsRequestsWithEachMethod(kind: BackendKind) async throws {
        let apiClient = apiClient(try await Backend.make(kind))
        // apiClient.GET("/issues"), .POST("/issues"), .PUT("/issues"), .DELETE("/issues/1")
        let get = try Echo(try await apiClient.request(Route(path: "/issues")))
        let post = try Echo(try await apiClient.request(Route(path: "/issues", method: .post)))
        let put = try Echo(try await apiClient.request(Route(path: "/issues", method: .put)))
        let delete = try Echo(try await apiClient.request(Route(path: "/issues/1", method: .delete)))
        #expect([get.method, post.method, put.method, delete.method] == ["GET", "POST", "PUT", "DELETE"])
        #expect(get.url.hasSuffix("/repos/Karumi/BothamNetworking/issues"))
        #expect(delete.url.hasSuffix("/repos/Karumi/BothamNetworking/issues/1"))
    }

    @Test(arguments: BackendKind.allCases)
    func addsHeadersParametersAndABody(kind: BackendKind) async throws {
        let apiClient = apiClient(try await Backend.make(kind))
        // apiClient.GET("/issues", headers: ["User-Agent": "BothamNetworking Headers", "Accept": "application/json; q=0.5"])
        let headers = try Echo(
            try await apiClient.request(
                Route(
                    path: "/issues",
                    headers: ["User-Agent": "BothamNetworking Headers", "Accept": "application/json; q=0.5"])))
        #expect(headers.header("User-Agent") == "BothamNetworking Headers")
        #expect(headers.header("Accept") == "application/json; q=0.5")

        // apiClient.DELETE("/issues", parameters: ["id": "1"])
        let delete = try Echo(try await apiClient.request(Route(path: "/issues", method: .delete, params: ["id": "1"])))
        #expect(delete.args == ["id": "1"])
        #expect(delete.data.isEmpty)

        // apiClient.POST("/authorizations", body: ["scopes": ["repo_status", "user:email"]])
        let post = try Echo(
            try await apiClient.request(
                Route(path: "/authorizations", method: .post, params: ["scopes": ["repo_status", "user:email"]])))
        #expect(post.body == ["scopes": ["repo_status", "user:email"]])
        // "The body encoding will be determined by the HTTP headers used": a Content-Type with parameters keeps
        // the body (Botham dropped it for `application/json; charset=utf-8`).
        let charset = try Echo(
            try await apiClient.request(
                Route(
                    path: "/authorizations", method: .post, params: ["scopes": ["repo_status"]],
                    headers: ["Content-Type": "application/json; charset=utf-8"])))
        #expect(charset.body == ["scopes": ["repo_status"]])
        #expect(charset.header("Content-Type") == "application/json; charset=utf-8")
    }

    @Test(arguments: BackendKind.allCases)
    func resultMapsToJSONAndTheResponseKeepsStatusHeadersAndBody(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        let document = #"{"results":[{"id":1,"name":"Botham"},{"id":2,"name":"Curlew"}]}"#
        let repos = TestProvider(backend)
        // apiClient.GET("/repos") { result in result.mapJSON { json in for result in json["results"].arrayValue { … } } }
        let response = try await repos.request(Route(path: "/base64/" + Data(document.utf8).base64EncodedString()))
        var names: [String] = []
        for result in try response.json()["results"].arrayValue {
            names.append(result["name"].stringValue)
            #expect(result["id"].intValue > 0)
        }
        #expect(names == ["Botham", "Curlew"])
        // HTTPResponse: statusCode, case-insensitive headers, body.
        #expect(response.status.code == 200)
        #expect(response.header("content-TYPE")?.hasPrefix("text/html") == true)
        #expect(response.string() == document)
    }

    @Test(arguments: BackendKind.allCases)
    func httpResponseErrorKeepsStatusAndBody(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        // BothamAPIClientError.HTTPResponseError(statusCode: Int, body: NSData)
        do {
            try await TestProvider(backend).request(Route(path: "/status/418"))
            Issue.record("418 should fail")
        } catch  where error.code == .status {
            #expect(error.status?.code == 418)
            #expect(error.response?.string().contains("teapot") == true)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test(arguments: BackendKind.allCases)
    func jsonHeadersInterceptorSetsContentTypeAndAccept(kind: BackendKind) async throws {
        var apiClient = apiClient(try await Backend.make(kind))
        apiClient.interceptors = [JSONHeadersInterceptor()]
        let echo = try Echo(
            try await apiClient.request(
                Route(path: "/issues", method: .post, body: .bytes(Array("{}".utf8), contentType: nil))))
        #expect(echo.header("Accept") == "application/json")
        #expect(echo.header("Content-Type") == "application/json")
    }

    @Test(arguments: BackendKind.allCases)
    func basicAuthenticationSendsCredentialsAndReportsTheRealmOn401(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        let realms = Mutex<[String]>([])
        var good = TestProvider(backend)
        good.interceptors = [BasicAuthentication(username: "user", password: "passwd")]
        let json = try await good.request(Route(path: "/basic-auth/user/passwd")).json()
        #expect(json["authenticated"] == true)

        var bad = TestProvider(backend)
        bad.interceptors = [
            BasicAuthentication(username: "user", password: "wrong") { realm in realms.withLock { $0.append(realm) } }
        ]
        await #expect(throws: ProviderError.self) {
            try await bad.request(Route(path: "/basic-auth/user/passwd"))
        }
        #expect(realms.withLock { $0 } == ["Fake Realm"])
    }

    @Test(arguments: BackendKind.allCases)
    func localInterceptorsLogThroughSwiftLog(kind: BackendKind) async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "botham", factory: { _ in handler })
        logger.logLevel = .debug
        var apiClient = apiClient(try await Backend.make(kind))
        // apiClient.requestInterceptors.append(NSLogInterceptor()); apiClient.responseInterceptors.append(…)
        apiClient.interceptors = [LoggingInterceptor(logger: logger)]
        try await apiClient.request(Route(path: "/issues"))
        let messages = handler.entries.map { $0.message.description }
        #expect(messages.count == 2)
        #expect(messages.first?.hasPrefix("→ GET ") == true)
        #expect(messages.last?.hasPrefix("← 200 GET ") == true)
    }

    /// BothamNetworking's `RetryInterceptor`: `.failure(.RetryError)` on 401 → `.retry`.
    private struct RetryInterceptor: Interceptor {
        func intercept(_ response: RouteResponse, context: InterceptorContext) async throws -> InterceptorDecision {
            response.status == .unauthorized ? .retry : .pass
        }
    }

    @Test(arguments: BackendKind.allCases)
    func retryInterceptorIsBoundedByTheProvider(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        let sent = Atomic(0)
        let received = Atomic(0)
        var apiClient = TestProvider(backend)
        apiClient.maxAttempts = 4
        apiClient.interceptors = [RetryInterceptor()]
        apiClient.plugins = [
            AnyPlugin(
                didSend: { _, _ in sent.add(1, ordering: .relaxed) },
                didReceive: { _, _ in received.add(1, ordering: .relaxed) })
        ]
        // "Be careful when using this mechanism as you can create an infinite loop": not here.
        await #expect(throws: ProviderError.self) {
            try await apiClient.request(Route(path: "/status/401"))
        }
        #expect(sent.load(ordering: .relaxed) == 4)
        #expect(received.load(ordering: .relaxed) == 1)
    }
}
