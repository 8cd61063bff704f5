import Curlew
import CurlewEngine
import CurlewTestSupport
import HTTPTypes
import Testing

@Suite struct RouteResponseDescriptionTests {
    private static let secrets = [
        "url-password", "query-token", "session-secret", "request-token", "body-secret",
    ]

    private func responseWithEveryKindOfSecret() throws -> RouteResponse {
        var request = try CurlewRequest(method: .get, url: "https://api.example.com/v1/me?access_token=query-token")
        try request.addHeader("Authorization", "Bearer request-token")
        var fields = HTTPFields()
        fields[.setCookie] = "session=session-secret; HttpOnly"
        fields[.contentType] = "application/json"
        return RouteResponse(
            status: .ok, headerFields: fields, body: Array(#"{"token":"body-secret"}"#.utf8),
            url: "https://user:url-password@api.example.com/v1/me?access_token=query-token&page=2", request: request)
    }

    @Test func everyPrintingHidesTheCredentialsAndShowsTheRest() throws {
        let response = try responseWithEveryKindOfSecret()
        for (way, text) in everyPrinting(of: response) {
            for secret in Self.secrets { #expect(!text.contains(secret), "\(way): \(text)") }
            #expect(text.contains("200") && text.contains("api.example.com/v1/me"), "\(way): \(text)")
            #expect(text.contains("access_token=<redacted>") && text.contains("page=2"), "\(way): \(text)")
            #expect(text.contains("Set-Cookie: <redacted>"), "\(way): \(text)")
            #expect(text.contains("Content-Type: application/json"), "\(way): \(text)")
            #expect(text.contains("23 bytes"), "\(way): \(text)")
            #expect(text.contains("Authorization: <redacted>"), "the request sent: \(way): \(text)")
        }
    }

    @Test func aResponseInsideAnotherValueIsPrintedRedactedToo() throws {
        let holder: (attempt: Int, responses: [RouteResponse]) = (1, [try responseWithEveryKindOfSecret()])
        for (way, text) in everyPrinting(of: holder) {
            for secret in Self.secrets { #expect(!text.contains(secret), "\(way): \(text)") }
            #expect(text.contains("api.example.com/v1/me"), "\(way): \(text)")
        }
    }
}
