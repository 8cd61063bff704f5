import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

@testable import Curlew

@Suite struct ParameterEncodingTests {
    @Test func reservedCharactersAndSpacesArePercentEncodedInKeysAndValues() {
        let query = QueryEncoder.encode(["a&b": "c=d+e/f?g#h i", "plain": "x-y_z.~"], arrays: .brackets)
        #expect(query == "a%26b=c%3Dd%2Be%2Ff%3Fg%23h%20i&plain=x-y_z.~")
    }

    @Test func encodingsHaveStableNamesAndCompareByValue() {
        let encodings: [ParameterEncoding] = [.json, .form, .url]
        #expect(encodings.map(\.name) == ["json", "form", "url"])
        #expect(encodings.map(\.description) == ["json", "form", "url"])
        #expect(Set(encodings).count == 3)
        let arrays: [ArrayEncoding] = [.brackets, .repeatedKey]
        #expect(arrays.map(\.name) == ["brackets", "repeatedKey"])
        #expect(ArrayEncoding.brackets != .repeatedKey)
        // The name is what an invalid route's reason shows.
        do {
            _ = try TestProvider(baseURL: "http://api.local").makeRequest(
                for: Route(path: "/x", params: ["a": 1], encoding: .form))
            Issue.record("form parameters on a GET should be refused")
        } catch {
            #expect(error.invalidRouteReason == "GET /x cannot carry form parameters in a body")
        }
    }

    @Test func unicodeIsEncodedAsUTF8() {
        #expect(
            QueryEncoder.encode(["name": "Zoë 日本 😀"], arrays: .brackets)
                == "name=Zo%C3%AB%20%E6%97%A5%E6%9C%AC%20%F0%9F%98%80")
    }

    @Test func arraysUseBracketsOrRepeatedKeysAsConfigured() {
        let parameters: [String: JSONValue] = ["ids": [1, 2]]
        #expect(QueryEncoder.encode(parameters, arrays: .brackets) == "ids%5B%5D=1&ids%5B%5D=2")
        #expect(QueryEncoder.encode(parameters, arrays: .repeatedKey) == "ids=1&ids=2")
    }

    @Test func nestedObjectsUseBracketedKeysAndScalarsAreWords() {
        let parameters: [String: JSONValue] = ["user": ["name": "a", "admin": false, "tags": ["x"]], "none": nil]
        #expect(
            QueryEncoder.encode(parameters, arrays: .brackets)
                == "none=&user%5Badmin%5D=false&user%5Bname%5D=a&user%5Btags%5D%5B%5D=x")
    }

    @Test func arraysOfObjectsNestBothWays() {
        let parameters: [String: JSONValue] = ["items": [["a": 1], ["a": "x y"]]]
        #expect(QueryEncoder.encode(parameters, arrays: .brackets) == "items%5B%5D%5Ba%5D=1&items%5B%5D%5Ba%5D=x%20y")
        #expect(QueryEncoder.encode(parameters, arrays: .repeatedKey) == "items%5Ba%5D=1&items%5Ba%5D=x%20y")
    }

    @Test func keysAreSortedSoTheSameParametersGiveTheSameQuery() {
        #expect(QueryEncoder.encode(["b": 2, "a": 1, "c": 1.5], arrays: .brackets) == "a=1&b=2&c=1.5")
    }

    @Test func pathsKeepSlashesAndEscapesButEncodeWhatAPathCannotHold() {
        #expect(PercentEncoding.encodePath("/user/Zoë Ä/C#?") == "/user/Zo%C3%AB%20%C3%84/C%23%3F")
        #expect(PercentEncoding.encodePath("/already%20encoded/a:b@c") == "/already%20encoded/a:b@c")
        #expect(PercentEncoding.encodePath("/100%") == "/100%25")
    }

    private static let awkward: Parameters = [
        "text": "a&b=c+d/e?f#g h%",
        "unicode": "Zoë 日本 😀",
        "ids": [1, 2, 3],
    ]

    @Test(arguments: BackendKind.allCases)
    func urlParametersRoundTripThroughHTTPBin(kind: BackendKind) async throws {
        var provider = TestProvider(try await Backend.make(kind))
        provider.arrayEncoding = .repeatedKey
        let echo = try Echo(try await provider.request(Route(path: "/anything", params: Self.awkward)))
        #expect(echo.args == ["text": "a&b=c+d/e?f#g h%", "unicode": "Zoë 日本 😀", "ids": ["1", "2", "3"]])
    }

    @Test(arguments: BackendKind.allCases)
    func bracketedArraysAndNestedObjectsArriveUnderTheirDocumentedKeys(kind: BackendKind) async throws {
        let provider = TestProvider(try await Backend.make(kind))
        let echo = try Echo(
            try await provider.request(
                Route(path: "/anything", params: ["ids": [1, 2], "user": ["name": "Zoë"] as JSONValue])))
        #expect(echo.args == ["ids[]": ["1", "2"], "user[name]": "Zoë"])
    }

    /// A nested object that mixes value types compiles as a plain literal, with variables, and keeps its types.
    @Test(arguments: BackendKind.allCases)
    func nestedMixedParameterLiteralsCompileAndKeepTheirTypes(kind: BackendKind) async throws {
        let provider = TestProvider(try await Backend.make(kind))
        let name = "Zoë"
        let tags: [String: String] = ["team": "core"]
        let json = try Echo(
            try await provider.request(
                Route(
                    path: "/anything", method: .post,
                    params: ["user": ["name": name, "age": 36, "admin": false, "tags": tags.parameterValue]])))
        #expect(json.body == ["user": ["name": "Zoë", "age": 36, "admin": false, "tags": ["team": "core"]]])
        let query = try Echo(
            try await provider.request(Route(path: "/anything", params: ["user": ["name": name, "age": 36]])))
        #expect(query.args == ["user[name]": "Zoë", "user[age]": "36"])
    }

    @Test(arguments: BackendKind.allCases)
    func formParametersRoundTripThroughHTTPBin(kind: BackendKind) async throws {
        var provider = TestProvider(try await Backend.make(kind))
        provider.arrayEncoding = .repeatedKey
        let echo = try Echo(
            try await provider.request(Route(path: "/anything", method: .post, params: Self.awkward, encoding: .form)))
        #expect(echo.form == ["text": "a&b=c+d/e?f#g h%", "unicode": "Zoë 日本 😀", "ids": ["1", "2", "3"]])
        #expect(echo.args == [:])
    }

    @Test(arguments: BackendKind.allCases)
    func jsonParametersKeepTheirTypes(kind: BackendKind) async throws {
        let provider = TestProvider(try await Backend.make(kind))
        let parameters: Parameters = [
            "n": 1, "f": 2.5, "b": true, "s": "Zoë \"quoted\" /slash", "list": [1, 2],
            "nested": ["k": "v"] as JSONValue, "nothing": JSONValue.null,
        ]
        let echo = try Echo(try await provider.request(Route(path: "/anything", method: .patch, params: parameters)))
        #expect(
            echo.body == [
                "n": 1, "f": 2.5, "b": true, "s": "Zoë \"quoted\" /slash", "list": [1, 2], "nested": ["k": "v"],
                "nothing": nil,
            ])
    }

    @Test(arguments: BackendKind.allCases)
    func pathSegmentsWithSpacesAndUnicodeReachTheServerIntact(kind: BackendKind) async throws {
        let provider = TestProvider(try await Backend.make(kind))
        let response = try await provider.request(
            Route(path: "/anything/user/\("Zoë & Co")?existing=1", params: ["more": "2"]))
        #expect(response.request.url.hasSuffix("/anything/user/Zo%C3%AB%20&%20Co?existing=1&more=2"))
        let echo = try Echo(response)
        // httpbin shows the path decoded.
        #expect(echo.url.removingPercentEncoding?.hasSuffix("/anything/user/Zoë & Co?existing=1&more=2") == true)
        #expect(echo.args == ["existing": "1", "more": "2"])
    }

    @Test(arguments: BackendKind.allCases)
    func aSegmentCannotAddSegmentsStartTheQueryOrPassForAnEscape(kind: BackendKind) async throws {
        let provider = TestProvider(try await Backend.make(kind))
        let id = "a/b?c=1#d%41 é"
        #expect(Route.segment(id) == "a%2Fb%3Fc%3D1%23d%2541%20%C3%A9")
        let response = try await provider.request(
            Route(path: "/anything/user/\(Route.segment(id))", params: ["x": "1"]))
        #expect(response.request.url.hasSuffix("/anything/user/a%2Fb%3Fc%3D1%23d%2541%20%C3%A9?x=1"))
        let echo = try Echo(response)
        #expect(echo.args == ["x": "1"])
    }
}
