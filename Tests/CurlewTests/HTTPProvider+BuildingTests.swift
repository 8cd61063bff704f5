import CurlewEngine
import HTTPTypes
import Testing

@testable import Curlew

@Suite struct HTTPProviderBuildingTests {
    private let provider = TestProvider(baseURL: "https://api.example.com/v1/")

    @Test func relativePathsJoinTheBaseURLWithOneSlash() throws {
        #expect(try provider.makeRequest(for: Route(path: "/me")).url == "https://api.example.com/v1/me")
        #expect(try provider.makeRequest(for: Route(path: "me")).url == "https://api.example.com/v1/me")
    }

    @Test func fullURLsIgnoreTheBaseURLAndHaveTheirPathEncoded() throws {
        let request = try provider.makeRequest(for: Route(path: "http://other.example/a b?q=ü"))
        #expect(request.url == "http://other.example/a%20b?q=%C3%BC")
    }

    @Test(arguments: ["//evil.example/x", "@evil.example/x", ":8443/x", "?@evil.example", "\\evil.example/x"])
    func aRelativePathNeverLeavesTheBaseURLsOrigin(path: String) throws {
        let request = try provider.makeRequest(for: Route(path: path))
        #expect(
            CredentialPolicy.mayCarryCredentials(from: "https://api.example.com/", to: request.url),
            "\(path) → \(request.url)")
        #expect(request.url.hasPrefix("https://api.example.com/v1"), "\(path) → \(request.url)")
    }

    @Test func whatTheProviderAddsGoesOnlyToItsOrigins() throws {
        var provider = provider
        provider.additionalHeaders = ["X-Api-Key": "secret-key"]
        provider.additionalParameters = ["token": "secret-token"]
        provider.credentialOrigins = ["https://files.example.com"]
        for path in [
            "/me", "https://api.example.com/v1/me", "https://API.EXAMPLE.COM:443/other", "https://files.example.com/a",
        ] {
            let request = try provider.makeRequest(for: Route(path: path))
            #expect(request.headerFields[HTTPField.Name("X-Api-Key")!] == "secret-key", "\(path)")
            #expect(request.url.contains("token=secret-token"), "\(path)")
        }
        for path in [
            "https://evil.example/x", "https://api.example.com@evil.example/x", "http://api.example.com/v1/x",
            "https://api.example.com:8443/v1/x", "https://files.example.com:444/a",
        ] {
            let request = try provider.makeRequest(for: Route(path: path))
            #expect(request.headerFields[HTTPField.Name("X-Api-Key")!] == nil, "\(path)")
            #expect(!request.url.contains("secret-token"), "\(path)")
            // A JSON body carries the provider's parameters too: not to another origin.
            let posted = try provider.makeRequest(for: Route(path: path, method: .post, params: ["a": 1]))
            guard case .bytes(let body)? = posted.body?.storage else {
                Issue.record("a JSON body was expected")
                continue
            }
            #expect(!String(decoding: body, as: UTF8.self).contains("secret-token"), "\(path)")
        }
        // The route's own fields go where the route points.
        let own = try provider.makeRequest(
            for: Route(path: "https://evil.example/x", headers: ["Authorization": "Bearer route-token"]))
        #expect(own.headerFields[.authorization] == "Bearer route-token")
    }

    @Test func defaultEncodingIsJSONForPostPutPatchAndURLForTheRest() throws {
        for method in [HTTPRequest.Method.post, .put, .patch] {
            let request = try provider.makeRequest(for: Route(path: "/x", method: method, params: ["a": 1]))
            #expect(request.headerFields[.contentType] == "application/json")
            #expect(request.url == "https://api.example.com/v1/x")
        }
        for method in [HTTPRequest.Method.get, .delete, .head, .options] {
            let request = try provider.makeRequest(for: Route(path: "/x", method: method, params: ["a": 1]))
            #expect(request.url == "https://api.example.com/v1/x?a=1")
            #expect(request.body == nil)
        }
    }

    @Test func aJSONOrFormBodyOnGETIsRefused() {
        #expect(throws: ProviderError.self) {
            try provider.makeRequest(for: Route(path: "/x", params: ["a": 1], encoding: .json))
        }
        #expect(throws: ProviderError.self) {
            try provider.makeRequest(for: Route(path: "/x", method: .head, params: ["a": 1], encoding: .form))
        }
    }

    @Test func headerInjectionIsRefused() {
        #expect(throws: ProviderError.self) {
            try provider.makeRequest(for: Route(path: "/x", headers: ["X-Evil": "a\r\nInjected: yes"]))
        }
    }

    @Test func routeHeadersReplaceTheProvidersOfTheSameName() throws {
        var provider = provider
        provider.additionalHeaders = ["Locale": "en-US", "X-Shared": "1"]
        let request = try provider.makeRequest(for: Route(path: "/x", headers: ["locale": "fr-FR"]))
        #expect(request.headerFields[HTTPField.Name("Locale")!] == "fr-FR")
        #expect(request.headerFields[values: HTTPField.Name("Locale")!].count == 1)
        #expect(request.headerFields[HTTPField.Name("X-Shared")!] == "1")
    }

    @Test func routeParametersWinOverTheProviders() throws {
        var provider = provider
        provider.additionalParameters = ["token": "shared", "page": 1]
        let request = try provider.makeRequest(for: Route(path: "/x", params: ["page": 2]))
        #expect(request.url == "https://api.example.com/v1/x?page=2&token=shared")
    }

    @Test func aRouteBodySendsParametersInTheURL() throws {
        let request = try provider.makeRequest(
            for: Route(path: "/upload", method: .post, params: ["name": "a b"], body: .string("hello")))
        #expect(request.url == "https://api.example.com/v1/upload?name=a%20b")
        #expect(request.headerFields[.contentType] == "text/plain; charset=utf-8")
        guard let bytes = request.body?.bytes else {
            Issue.record("expected a bytes body")
            return
        }
        #expect(bytes == Array("hello".utf8))
    }

    struct Payload: Encodable, Sendable { let createdAt: Int }

    @Test func encodableBodiesUseTheProvidersEncoder() throws {
        let request = try provider.makeRequest(
            for: Route(path: "/x", method: .post, body: .json(Payload(createdAt: 3))))
        guard let bytes = request.body?.bytes else {
            Issue.record("expected a bytes body")
            return
        }
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"createdAt":3}"#)
        #expect(request.headerFields[.contentType] == "application/json")
    }

    @Test func aRouteTimeoutBecomesTheTotalTimeoutOnly() throws {
        let request = try provider.makeRequest(for: Route(path: "/x", timeout: .seconds(2)))
        #expect(request.timeouts.total == .some(.seconds(2)))
        #expect(request.timeouts.connect == nil)
        #expect(request.timeouts.idle == nil)
    }

    @Test func relativeRoutesNeedABaseURL() {
        #expect(throws: ProviderError.self) { try DefaultProvider().makeRequest(for: Route(path: "/x")) }
    }
}
