import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
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

/// What the provider and the global level add goes only to the provider's origins (its base URL's and its
/// `credentialOrigins`): a route with a full URL, or a request made by hand, for another origin gets none of it,
/// as a redirect gets none of a request's credentials.
@Suite struct HTTPProviderCredentialOriginTests {
    static let sneaky = AnyInterceptor(adapt: { request, _ in try request.setHeader("Authorization", "Sneaky") })
    static let seen = AnyInterceptor(adapt: { request, _ in try request.setHeader("X-Seen", "1") })

    private func provider(_ mock: MockTransport, interceptors: [any Interceptor]) -> TestProvider {
        var provider = TestProvider(baseURL: "https://api.example.com/v1", transport: mock)
        provider.interceptors = interceptors
        return provider
    }

    @Test func providerCredentialsStayOnItsOriginAndOtherInterceptorsStillRun() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        let provider = provider(
            mock,
            interceptors: [
                BasicAuthentication(username: "user", password: "pass"),
                HeadersInterceptor(["X-Api-Key": "secret-key"], attachesCredentials: true), Self.seen,
            ])
        try await provider.request(Route(path: "/me"))
        for url in ["https://evil.example/x", "https://api.example.com@evil.example/x", "http://api.example.com/v1/x"] {
            try await provider.request(Route(path: url))
        }
        // A request made by hand follows the same rule.
        try await provider.request(try CurlewRequest(url: "https://evil.example/by-hand"))
        let sent = mock.receivedRequests
        try #require(sent.count == 5)
        #expect(sent[0].headerFields[.authorization]?.hasPrefix("Basic ") == true)
        #expect(sent[0].headerFields[HTTPField.Name("X-Api-Key")!] == "secret-key")
        for request in sent.dropFirst() {
            #expect(request.headerFields[.authorization] == nil, "\(request.url)")
            #expect(request.headerFields[HTTPField.Name("X-Api-Key")!] == nil, "\(request.url)")
            #expect(request.headerFields[HTTPField.Name("X-Seen")!] == "1", "an interceptor without credentials runs")
        }
    }

    @Test func anUnmarkedProviderInterceptorCannotSendAuthorizationElsewhereButTheCallsOwnCan() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        let provider = provider(mock, interceptors: [Self.sneaky])
        try await provider.request(Route(path: "https://evil.example/x"))
        try await provider.request(
            Route(path: "https://evil.example/y"),
            interceptors: [BasicAuthentication(username: "user", password: "pass")])
        try await provider.request(Route(path: "/me"))
        let sent = mock.receivedRequests
        try #require(sent.count == 3)
        #expect(sent[0].headerFields[.authorization] == nil)
        // The call's own interceptor chose this URL; the provider's later one cannot replace what it set.
        #expect(sent[1].headerFields[.authorization]?.hasPrefix("Basic ") == true)
        #expect(sent[2].headerFields[.authorization] == "Sneaky")
    }

    @Test func aRequestAnInterceptorMovesToAnotherOriginKeepsOnlyTheCredentialsTheCallSet() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        let attachments = Mutex(0)
        let counting = AnyInterceptor(attachesCredentials: true, adapt: { _, _ in attachments.withLock { $0 += 1 } })
        var provider = provider(
            mock,
            interceptors: [
                BasicAuthentication(username: "user", password: "pass"), Self.sneaky,
                HeadersInterceptor(["X-Api-Key": "secret-key"], attachesCredentials: true), Self.seen, counting,
            ])
        provider.additionalHeaders = ["X-Provider-Key": "provider-key"]
        provider.credentialOrigins = ["https://mirror.example.com"]
        func moving(to url: String, withOwnToken: Bool = false, copyingByName: Bool = false) -> AnyInterceptor {
            // A URL is fixed when a request is made: moving it means a new request with the same fields.
            AnyInterceptor(adapt: { request, _ in
                var moved = try CurlewRequest(method: request.method, url: url)
                if copyingByName {
                    // As plain names and values: the copies are ordinary fields, not secrets.
                    for field in request.headerFields { try moved.addHeader(field.name.rawName, field.value) }
                } else {
                    moved.headerFields = request.headerFields
                }
                if withOwnToken { try moved.setCredentialHeader("X-Own-Token", "own") }
                request = moved
            })
        }
        // Moved elsewhere by the call, by the route, by the call with a credential of its own, and by a call that
        // copies the fields by name.
        try await provider.request(Route(path: "/me"), interceptors: [moving(to: "https://evil.example/a")])
        try await provider.request(
            Route(
                path: "/me", headers: ["Authorization": "Bearer route-token"],
                interceptors: [moving(to: "https://evil.example/b")]))
        try await provider.request(
            Route(path: "/me"), interceptors: [moving(to: "https://evil.example/c", withOwnToken: true)])
        try await provider.request(
            Route(path: "/me", headers: ["Authorization": "Bearer route-token"]),
            interceptors: [moving(to: "https://evil.example/d", copyingByName: true)])
        #expect(attachments.withLock { $0 } == 0, "no interceptor that attaches credentials ran for another origin")
        // Moved to an origin the provider lists, and not moved: everything goes.
        try await provider.request(Route(path: "/me"), interceptors: [moving(to: "https://mirror.example.com/e")])
        try await provider.request(Route(path: "/me"))
        #expect(attachments.withLock { $0 } == 2)
        let sent = mock.receivedRequests
        try #require(sent.count == 6)
        let apiKey = HTTPField.Name("X-Api-Key")!
        let providerKey = HTTPField.Name("X-Provider-Key")!
        for request in sent.prefix(4) {
            #expect(request.url.hasPrefix("https://evil.example/"))
            #expect(request.headerFields[.authorization] == nil, "\(request.url)")
            #expect(request.headerFields[apiKey] == nil, "\(request.url)")
            #expect(request.headerFields[providerKey] == nil, "\(request.url)")
            #expect(request.headerFields[HTTPField.Name("X-Seen")!] == "1", "an interceptor without credentials runs")
        }
        #expect(sent[2].headerFields[HTTPField.Name("X-Own-Token")!] == "own")
        for request in sent.suffix(2) {
            #expect(request.headerFields[.authorization] == "Sneaky", "\(request.url)")
            #expect(request.headerFields[apiKey] == "secret-key", "\(request.url)")
            #expect(request.headerFields[providerKey] == "provider-key", "\(request.url)")
        }
    }

    /// Puts a token in the query, as an API that takes `?access_token=` wants it.
    static let queryToken = AnyInterceptor(
        attachesCredentials: true,
        adapt: { request, _ in
            let separator = request.url.contains("?") ? "&" : "?"
            var withToken = try CurlewRequest(
                method: request.method, url: request.url + separator + "access_token=provider-token")
            withToken.headerFields = request.headerFields
            request = withToken
        })

    /// Moves the request to `origin`, keeping its path and query (and its fields), with `extra` appended to the
    /// query: a mirror that swaps hosts.
    static func movingOrigin(to origin: String, appending extra: String? = nil) -> AnyInterceptor {
        AnyInterceptor(adapt: { request, _ in
            let base = "https://api.example.com"
            #expect(request.url.hasPrefix(base))
            var url = origin + request.url.dropFirst(base.count)
            if let extra { url += (url.contains("?") ? "&" : "?") + extra }
            var moved = try CurlewRequest(method: request.method, url: url)
            moved.headerFields = request.headerFields
            moved.timeouts.total = .seconds(7)
            request = moved
        })
    }

    @Test func aQueryTokenDoesNotFollowARequestMovedToAnotherOrigin() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        var provider = provider(mock, interceptors: [Self.queryToken])
        provider.additionalParameters = ["AppID": "provider-app-key"]
        let route = Route(path: "/me", params: ["page": "2"])
        // A provider-level mover after the interceptor that put the token in (a global one runs as it does), and
        // the call's own before it.
        var moving = provider
        moving.interceptors = [Self.queryToken, Self.movingOrigin(to: "https://evil.example")]
        try await moving.request(route)
        try await provider.request(route, interceptors: [Self.movingOrigin(to: "https://evil.example")])
        // A call that moves the request with a token of its own keeps that one.
        try await provider.request(
            route, interceptors: [Self.movingOrigin(to: "https://evil.example", appending: "access_token=call-token")])
        let sent = mock.receivedRequests
        try #require(sent.count == 3)
        for request in sent {
            #expect(request.url.hasPrefix("https://evil.example/v1/me?"), "\(request.url)")
            #expect(!request.url.contains("provider-token"), "\(request.url)")
            #expect(!request.url.contains("provider-app-key"), "\(request.url)")
            #expect(request.url.contains("page=2"), "a route's own parameter goes where the route goes")
            #expect(request.timeouts.total == .some(.seconds(7)), "the moved request keeps its settings")
        }
        #expect(sent[2].url.contains("access_token=call-token"))
    }

    @Test func aQueryTokenStaysOnARequestMovedWithinTheProvidersOrigins() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        var provider = provider(
            mock, interceptors: [Self.queryToken, Self.movingOrigin(to: "https://mirror.example.com")])
        provider.additionalParameters = ["AppID": "provider-app-key"]
        provider.credentialOrigins = ["https://mirror.example.com"]
        try await provider.request(Route(path: "/me", params: ["page": "2"]))
        provider.interceptors = [Self.queryToken]
        try await provider.request(
            Route(path: "/me", params: ["page": "2"]),
            interceptors: [Self.movingOrigin(to: "https://mirror.example.com")])
        let sent = mock.receivedRequests
        try #require(sent.count == 2)
        for request in sent {
            #expect(request.url.hasPrefix("https://mirror.example.com/v1/me?"), "\(request.url)")
            #expect(request.url.contains("access_token=provider-token"), "\(request.url)")
            #expect(request.url.contains("AppID=provider-app-key"), "\(request.url)")
        }
    }

    /// Moves the request to `host` the way a mirror written with Foundation does: through `URLComponents`, whose
    /// query items decode and re-encode the query (`%2B` comes back as `+`, `%2F` as `/`), keeping the user-info,
    /// the fields and the body.
    static func swappingHost(to host: String) -> AnyInterceptor {
        AnyInterceptor(adapt: { request, _ in
            var components = try #require(URLComponents(string: request.url))
            components.host = host
            components.queryItems = components.queryItems
            var moved = try CurlewRequest(method: request.method, url: try #require(components.string))
            moved.headerFields = request.headerFields
            moved.body = request.body
            request = moved
        })
    }

    private static func bodyText(_ request: CurlewRequest) -> String? {
        guard case .bytes(let bytes)? = request.body?.storage else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func aProviderKeyDoesNotFollowAMoverThatReEncodesTheQuery() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        var provider = provider(mock, interceptors: [])
        provider.additionalParameters = ["api_key": "ab+c/d=="]
        let route = Route(path: "/me", params: ["page": "2"])
        #expect(try provider.makeRequest(for: route).url.contains("api_key=ab%2Bc%2Fd%3D%3D"))
        try await provider.request(route, interceptors: [Self.swappingHost(to: "evil.example")])
        let sent = try #require(mock.receivedRequests.first)
        #expect(sent.url.hasPrefix("https://evil.example/v1/me?"), "\(sent.url)")
        #expect(!sent.url.contains("api_key"), "\(sent.url)")
        #expect(sent.url.contains("page=2"), "\(sent.url)")
    }

    @Test func aRoutesOwnParametersOfCredentialNamesGoWhereAnInterceptorMovesIt() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        var provider = provider(mock, interceptors: [])
        provider.additionalParameters = ["api_key": "provider-key"]
        let route = Route(path: "/items", params: ["token": "cursor-7", "code": "x1", "page": "2"])
        try await provider.request(route, interceptors: [Self.movingOrigin(to: "https://evil.example")])
        try await provider.request(route, interceptors: [Self.swappingHost(to: "evil.example")])
        let sent = mock.receivedRequests
        try #require(sent.count == 2)
        for request in sent {
            #expect(request.url.hasPrefix("https://evil.example/v1/items?"), "\(request.url)")
            #expect(request.url.contains("token=cursor-7") && request.url.contains("code=x1"), "\(request.url)")
            #expect(!request.url.contains("provider-key"), "\(request.url)")
        }
    }

    @Test func aTokenASharedInterceptorAddsDoesNotFollowAMovedRequest() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        // Says nothing of attaching credentials, so it still runs for the moved request.
        let addsToken = AnyInterceptor(adapt: { request, _ in
            var withToken = try CurlewRequest(method: request.method, url: request.url + "&access_token=shared-token")
            withToken.headerFields = request.headerFields
            request = withToken
        })
        let provider = provider(mock, interceptors: [addsToken])
        try await provider.request(
            Route(path: "/items", params: ["token": "cursor-7"]),
            interceptors: [Self.movingOrigin(to: "https://evil.example")])
        let sent = try #require(mock.receivedRequests.first)
        #expect(sent.url.hasPrefix("https://evil.example/v1/items?"), "\(sent.url)")
        #expect(!sent.url.contains("shared-token"), "\(sent.url)")
        #expect(sent.url.contains("token=cursor-7"), "\(sent.url)")
    }

    @Test func theProvidersParametersLeaveABodyTheMovedRequestStillCarries() async throws {
        let mock = MockTransport(stubs: [.stub(nil, "*", json: ["ok": true])])
        var provider = provider(mock, interceptors: [])
        provider.additionalParameters = ["api_key": "body-key"]
        let mover = Self.swappingHost(to: "evil.example")
        try await provider.request(Route(path: "/items", method: .post, params: ["name": "x"]), interceptors: [mover])
        try await provider.request(
            Route(path: "/items", method: .put, params: ["name": "x"], encoding: .form), interceptors: [mover])
        try await provider.request(Route(path: "/items", method: .patch), interceptors: [mover])
        // On the provider's origin the body keeps them.
        try await provider.request(Route(path: "/items", method: .post, params: ["name": "x"]))
        let sent = mock.receivedRequests
        try #require(sent.count == 4)
        #expect(Self.bodyText(sent[0]) == #"{"name":"x"}"#)
        #expect(sent[0].headerFields[.contentType] == "application/json")
        #expect(Self.bodyText(sent[1]) == "name=x")
        #expect(sent[1].headerFields[.contentType] == "application/x-www-form-urlencoded")
        #expect(Self.bodyText(sent[2]) == "{}")
        #expect(Self.bodyText(sent[3]) == #"{"api_key":"body-key","name":"x"}"#)
    }

    @Test func theUserInfoOfTheBaseURLDoesNotFollowAMovedRequest() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        var provider = TestProvider(baseURL: "https://user:base-password@api.example.com/v1", transport: mock)
        try await provider.request(Route(path: "/me"), interceptors: [Self.swappingHost(to: "evil.example")])
        provider.credentialOrigins = ["https://mirror.example.com"]
        try await provider.request(Route(path: "/me"), interceptors: [Self.swappingHost(to: "mirror.example.com")])
        let sent = mock.receivedRequests
        try #require(sent.count == 2)
        #expect(sent[0].url == "https://evil.example/v1/me", "\(sent[0].url)")
        #expect(sent[1].url == "https://user:base-password@mirror.example.com/v1/me", "\(sent[1].url)")
    }

    @Test func credentialOriginsOptInAndTheDefaultProviderNeedsThem() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        var provider = provider(mock, interceptors: [BasicAuthentication(username: "user", password: "pass")])
        provider.credentialOrigins = ["https://files.example.com"]
        try await provider.request(Route(path: "https://files.example.com/a"))
        let plain = DefaultProvider(transport: mock, interceptors: [BasicAuthentication(username: "u", password: "p")])
        try await plain.request(Route(path: "https://files.example.com/b"))
        let listed = DefaultProvider(
            transport: mock, interceptors: [BasicAuthentication(username: "u", password: "p")],
            credentialOrigins: ["https://files.example.com"])
        try await listed.request(Route(path: "https://files.example.com/c"))
        let sent = mock.receivedRequests
        try #require(sent.count == 3)
        #expect(sent[0].headerFields[.authorization] != nil)
        #expect(sent[1].headerFields[.authorization] == nil)
        #expect(sent[2].headerFields[.authorization] != nil)
    }

    @Test func a401FromAnotherOriginNeverRefreshesOrResendsTheToken() async throws {
        let refreshes = Mutex(0)
        let authenticator = BearerTokenAuthenticator(token: "first") { _ in
            refreshes.withLock { $0 += 1 }
            return "second"
        }
        let mock = MockTransport(stubs: [.get("https://evil.example/*", status: .unauthorized)])
        let provider = provider(mock, interceptors: [authenticator])
        await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "https://evil.example/x")) }
        #expect(mock.receivedRequests.count == 1, "no retry")
        #expect(mock.receivedRequests.first?.headerFields[.authorization] == nil)
        #expect(refreshes.withLock { $0 } == 0)
        #expect(authenticator.token == "first")
    }

    @Test func a401FromAnOriginAnInterceptorMovedTheRequestToRefreshesNoToken() async throws {
        // No token yet: an authenticator that ran for the request would fetch one.
        let refreshes = Mutex(0)
        let authenticator = BearerTokenAuthenticator(token: nil) { _ in
            refreshes.withLock { $0 += 1 }
            return "second"
        }
        let mock = MockTransport(stubs: [.get("https://evil.example/*", status: .unauthorized)])
        let provider = provider(mock, interceptors: [authenticator, Self.seen])
        let moving = AnyInterceptor(adapt: { request, _ in
            var moved = try CurlewRequest(method: request.method, url: "https://evil.example/x")
            moved.headerFields = request.headerFields
            request = moved
        })
        await #expect(throws: ProviderError.self) {
            try await provider.request(Route(path: "/me"), interceptors: [moving])
        }
        #expect(mock.receivedRequests.count == 1, "no retry")
        #expect(mock.receivedRequests.first?.headerFields[.authorization] == nil)
        #expect(mock.receivedRequests.first?.headerFields[HTTPField.Name("X-Seen")!] == "1")
        #expect(refreshes.withLock { $0 } == 0)
        #expect(authenticator.token == nil)
    }

    @Test func aRedirectToAnotherOriginTakesNoneOfTheProvidersSecrets() async throws {
        // Real libcurl: the API answers 302 to another origin, which records what arrives.
        try await withWireScriptServer({ _ in [.response(body: "landed")] }) { other in
            try await withWireScriptServer({ _ in
                [.response(status: 302, headers: [("Location", other.baseURL + "/landed")], body: "")]
            }) { api in
                var provider = TestProvider(baseURL: api.baseURL, transport: CurlewClient.shared)
                provider.additionalHeaders = ["X-Api-Key": "secret-key"]
                provider.interceptors = [
                    HeadersInterceptor(["X-Token": "secret-token"], attachesCredentials: true),
                    HeadersInterceptor(["X-Plain": "not-secret"]),
                ]
                try await provider.request(Route(path: "/me"))
                let first = try #require(api.requests.first)
                #expect(first.header("X-Api-Key") == "secret-key" && first.header("X-Token") == "secret-token")
                let landed = try #require(other.requests.first)
                #expect(landed.header("X-Api-Key") == nil)
                #expect(landed.header("X-Token") == nil)
                #expect(landed.header("X-Plain") == "not-secret")
            }
        }
    }

    @Test func aHandMadeRequestUnderTheBaseURLGetsTheProvidersCredentialsWhateverItsScheme() async throws {
        let mock = MockTransport(stubs: [.get("*", json: ["ok": true])])
        var provider = TestProvider(baseURL: "http+unix://%2Frun%2Fapi.sock/v1", transport: mock)
        provider.interceptors = [BasicAuthentication(username: "user", password: "pass")]
        try await provider.request(try CurlewRequest(url: "http+unix://%2Frun%2Fapi.sock/v1/containers"))
        try await provider.request(try CurlewRequest(url: "http+unix://%2Frun%2Fapi.sock/v1x"))
        let sent = mock.receivedRequests
        try #require(sent.count == 2)
        #expect(sent[0].headerFields[.authorization] != nil)
        #expect(sent[1].headerFields[.authorization] == nil, "a prefix that is not a path boundary is not under it")
    }

    @Test func aResponseARedirectBroughtFromAnotherOriginIsNotFromTheRequestedOne() throws {
        let request = try CurlewRequest(url: "https://api.example.com/v1/me")
        let redirected = RouteResponse(status: .unauthorized, url: "https://evil.example/login", request: request)
        let within = RouteResponse(status: .unauthorized, url: "https://api.example.com/v2/me", request: request)
        #expect(!redirected.isFromRequestedOrigin)
        #expect(within.isFromRequestedOrigin)
    }
}
