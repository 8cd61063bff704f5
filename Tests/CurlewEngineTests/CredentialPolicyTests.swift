import HTTPTypes
import Testing

@testable import CurlewEngine

@Suite("Credential policy")
struct CredentialPolicyTests {
    @Test func credentialsStayWithinOneSchemeHostAndPort() {
        let origin = "https://api.example.com/v1/items"
        #expect(CredentialPolicy.mayCarryCredentials(from: origin, to: "https://api.example.com/v2/other?x=1"))
        #expect(CredentialPolicy.mayCarryCredentials(from: origin, to: "https://API.example.com:443/"))
        #expect(!CredentialPolicy.mayCarryCredentials(from: origin, to: "http://api.example.com/v1/items"))
        #expect(!CredentialPolicy.mayCarryCredentials(from: origin, to: "https://api.example.com:8443/"))
        #expect(!CredentialPolicy.mayCarryCredentials(from: origin, to: "https://evil.example.com/"))
        #expect(!CredentialPolicy.mayCarryCredentials(from: origin, to: "https://api.example.com.evil.net/"))
        #expect(!CredentialPolicy.mayCarryCredentials(from: "http://127.0.0.1:80/", to: "http://127.0.0.2/"))
        #expect(CredentialPolicy.mayCarryCredentials(from: "http://127.0.0.1/", to: "http://127.0.0.1:80/x"))
        #expect(!CredentialPolicy.mayCarryCredentials(from: origin, to: "not a url"))
    }

    @Test(arguments: [
        ("https://api.test/a", "/b", false), ("https://api.test/a", "b?next=http://evil.test/", false),
        ("https://api.test/a", "https://API.test:443/c", false), ("https://api.test/a", "//api.test/c", false),
        ("https://api.test/a", "//evil.test/c", true), ("https://api.test/a", "http://api.test/a", true),
        ("https://api.test/a", "https://evil.test/", true), ("https://api.test/a", "https://[bad/", true),
        ("https://api.test/a", "HTTPS://EVIL.test/", true), ("https://api.test/a", "https://api.test:8443/", true),
        ("https://api.test/a", "?q=http://evil.test/", false), ("https://api.test/a", "../b c", false),
        ("https://api.test/a", "https://user:pw@api.test/", false),
        ("http://127.0.0.1:8080/a", "//127.0.0.1:8080/b", false),
        ("http://127.0.0.1:8080/a", "//127.0.0.2:8080/b", true), ("not a url", "/b", true),
    ])
    func aRedirectLeavesTheOriginByItsLocation(requestURL: String, location: String, leaves: Bool) {
        #expect(CredentialPolicy.redirectLeavesOrigin(of: requestURL, for: location) == leaves)
    }

    @Test func theFixedListAndCallerMarkedFieldsAreCredentials() {
        #expect(CredentialPolicy.isCredential(HTTPField(name: .authorization, value: "x")))
        #expect(CredentialPolicy.isCredential(HTTPField(name: .cookie, value: "x")))
        #expect(CredentialPolicy.isCredential(HTTPField(name: .proxyAuthorization, value: "x")))
        var marked = HTTPField(name: HTTPField.Name("X-Api-Key")!, value: "secret")
        #expect(!CredentialPolicy.isCredential(marked))
        marked.indexingStrategy = .disallow
        #expect(CredentialPolicy.isCredential(marked))
        #expect(!CredentialPolicy.isCredential(HTTPField(name: .accept, value: "*/*")))
    }
}
