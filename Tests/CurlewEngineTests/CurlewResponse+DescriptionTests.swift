import CurlewTestSupport
import HTTPTypes
import Testing

@testable import CurlewEngine

@Suite struct CurlewResponseDescriptionTests {
    private static let secrets = ["url-password", "query-token", "session-secret", "auth-secret", "body-secret"]

    private func responseWithEveryKindOfSecret() -> CurlewResponse {
        var fields = HTTPFields()
        fields[.setCookie] = "session=session-secret; HttpOnly"
        fields[.authorization] = "Bearer auth-secret"
        fields[.contentType] = "application/json"
        return CurlewResponse(
            status: .ok, headerFields: fields, body: Array(#"{"token":"body-secret"}"#.utf8),
            url: "https://user:url-password@api.example.com/v1/me?access_token=query-token&page=2")
    }

    @Test func everyPrintingHidesTheCredentialsAndShowsTheRest() {
        let response = responseWithEveryKindOfSecret()
        for (way, text) in everyPrinting(of: response) {
            for secret in Self.secrets { #expect(!text.contains(secret), "\(way): \(text)") }
            #expect(text.contains("200") && text.contains("api.example.com/v1/me"), "\(way): \(text)")
            #expect(text.contains("user:<redacted>@") && text.contains("page=2"), "\(way): \(text)")
            #expect(text.contains("Set-Cookie: <redacted>"), "\(way): \(text)")
            #expect(text.contains("Authorization: <redacted>"), "\(way): \(text)")
            #expect(text.contains("Content-Type: application/json"), "\(way): \(text)")
            #expect(text.contains("23 bytes"), "\(way): \(text)")
        }
    }

    @Test func aResponseInsideAnotherValueIsPrintedRedactedToo() {
        let holder: (attempt: Int, responses: [CurlewResponse]) = (1, [responseWithEveryKindOfSecret()])
        for (way, text) in everyPrinting(of: holder) {
            for secret in Self.secrets { #expect(!text.contains(secret), "\(way): \(text)") }
            #expect(text.contains("api.example.com/v1/me"), "\(way): \(text)")
        }
    }
}
