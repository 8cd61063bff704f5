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
