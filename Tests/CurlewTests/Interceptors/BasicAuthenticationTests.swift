import CurlewTestSupport
import Testing

@testable import Curlew

@Suite struct BasicAuthenticationTests {
    @Test func theHeaderIsBase64OfUserColonPassword() {
        #expect(
            BasicAuthentication(username: "Aladdin", password: "open sesame").headerValue
                == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    }

    @Test func realmsAreReadFromQuotedAndBareChallenges() {
        #expect(BasicAuthentication.basicRealm(in: #"Basic realm="Fake Realm""#) == "Fake Realm")
        #expect(
            BasicAuthentication.basicRealm(in: #"basic Realm="a \"quoted\" realm", charset="UTF-8""#)
                == #"a "quoted" realm"#)
        #expect(BasicAuthentication.basicRealm(in: "Basic realm=simple") == "simple")
        #expect(BasicAuthentication.basicRealm(in: #"Bearer realm="api""#) == nil)
    }

    @Test func everyPrintingShowsTheUserNameButNeverThePassword() {
        let authentication = BasicAuthentication(username: "Aladdin", password: "open sesame")
        // Printed alone, and inside a provider as a log line of its settings would print it.
        let provider = DefaultProvider(
            transport: FixtureTransport(fixturesDirectory: nil), interceptors: [authentication])
        for value in [authentication as Any, provider] {
            for (way, text) in everyPrinting(of: value) {
                #expect(!text.contains("open sesame"), "\(way): \(text)")
                #expect(!text.contains(authentication.headerValue.dropFirst(6)), "\(way): \(text)")
                #expect(text.contains("BasicAuthentication") && text.contains("Aladdin"), "\(way): \(text)")
                #expect(text.contains("<redacted>"), "\(way): \(text)")
            }
        }
    }
}
