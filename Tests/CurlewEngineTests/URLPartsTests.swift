import Testing

@testable import CurlewEngine

@Suite("URL parts as typed")
struct URLPartsTests {
    private struct Expected: CustomTestStringConvertible, Sendable {
        let url: String
        let scheme: String?
        let authority: String
        let path: String
        let query: String
        let fragment: String
        var testDescription: String { url }
    }

    private static let cases: [Expected] = [
        .init(
            url: "https://u:p@h.example:8443/a/b?x=1&y=2#top", scheme: "https", authority: "u:p@h.example:8443",
            path: "/a/b", query: "?x=1&y=2", fragment: "#top"),
        .init(url: "http://h", scheme: "http", authority: "h", path: "", query: "", fragment: ""),
        // The authority ends at a `?` or `#` as well as at a `/`.
        .init(url: "http://h?k=v", scheme: "http", authority: "h", path: "", query: "?k=v", fragment: ""),
        .init(
            url: "http://h#f?not-a-query", scheme: "http", authority: "h", path: "", query: "",
            fragment: "#f?not-a-query"),
        // A `#` before any `?` starts the fragment; a `#` inside the query ends it.
        .init(url: "http://h/p#f?x", scheme: "http", authority: "h", path: "/p", query: "", fragment: "#f?x"),
        .init(
            url: "http://h/p?key=ab#cd", scheme: "http", authority: "h", path: "/p", query: "?key=ab", fragment: "#cd"),
        // No `://`: a relative reference, no authority.
        .init(url: "/files/a?x#y", scheme: nil, authority: "", path: "/files/a", query: "?x", fragment: "#y"),
        .init(url: "mailto:a@b", scheme: nil, authority: "", path: "mailto:a@b", query: "", fragment: ""),
        // The first `://` decides, so a template's scheme still has its authority read (and its password redacted).
        .init(
            url: "{{scheme}}://user:pw@h/x", scheme: "{{scheme}}", authority: "user:pw@h", path: "/x", query: "",
            fragment: ""),
        // A password with a raw `/` is cut where every parser cuts it; `displaying` handles that case.
        .init(
            url: "https://user:pa/ss@host/", scheme: "https", authority: "user:pa", path: "/ss@host/", query: "",
            fragment: ""),
        // Bytes decide, not Characters: a `/` fused with a combining mark after it still ends the authority, as it
        // does for libcurl and every server.
        .init(url: "http://h/\u{301}x?q", scheme: "http", authority: "h", path: "/\u{301}x", query: "?q", fragment: ""),
        .init(url: "", scheme: nil, authority: "", path: "", query: "", fragment: ""),
    ]

    @Test(arguments: cases)
    private func eachPartEndsWhereTheGenericSyntaxEndsIt(_ expected: Expected) {
        let parts = URLParts(expected.url)
        #expect(parts.scheme.map(String.init) == expected.scheme)
        #expect(String(parts.authority) == expected.authority)
        #expect(String(parts.path) == expected.path)
        #expect(String(parts.query) == expected.query)
        #expect(String(parts.fragment) == expected.fragment)
        // The parts are the string, in order, nothing lost or repeated.
        #expect(
            String(parts.beforeAuthority + parts.authority + parts.path + parts.query + parts.fragment) == expected.url)
    }

    @Test func theRootStandsForAnEmptyPath() {
        #expect(URLParts("http://h?x").pathOrRoot == "/")
        #expect(URLParts("http://h/a").pathOrRoot == "/a")
        #expect(URLParts("http://h:80/a?b").schemeAndAuthority == "http://h:80")
    }

    /// The user-info ends at the authority's last `@` (a password may hold an unencoded `@`); the host and port follow.
    @Test func theUserInfoEndsAtTheAuthoritysLastAt() {
        let parts = URLParts("https://user:p@ss@Host:8443/a?b")
        #expect(parts.userInfo == "user:p@ss")
        #expect(parts.hostAndPort == "Host:8443")
        #expect(URLParts("http://h:80/").userInfo == nil)
        #expect(URLParts("http://h:80/").hostAndPort == "h:80")
    }

    /// Split at each `&` by bytes, empty ones kept; a combining mark after the `?` stays in the first parameter.
    @Test func theQuerysParametersAreSplitByBytes() {
        #expect(URLParts("http://h/p?a=1&&b#f&g").queryParameters == ["a=1", "", "b"])
        #expect(URLParts("http://h/p?\u{301}x=1").queryParameters.map { Array($0.utf8) } == [Array("\u{301}x=1".utf8)])
        #expect(URLParts("http://h/p#a&b").queryParameters.isEmpty)
    }
}
