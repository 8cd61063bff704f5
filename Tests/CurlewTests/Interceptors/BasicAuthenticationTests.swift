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
}
