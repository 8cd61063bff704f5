import CurlewTestSupport
import HTTPTypes
import Testing

@testable import CurlewEngine

@Suite struct CurlewRequestDescriptionTests {
    private static let secrets = [
        "url-password", "query-token", "header-token", "cookie-secret", "proxy-secret", "amz-session", "api-key-secret",
        "body-secret",
    ]

    private func requestWithEveryKindOfSecret() throws -> CurlewRequest {
        var request = try CurlewRequest(
            method: .post, url: "https://user:url-password@api.example.com/v1/me?access_token=query-token&page=2")
        try request.addHeader("Authorization", "Bearer header-token")
        try request.addHeader("Cookie", "session=cookie-secret")
        try request.addHeader("Proxy-Authorization", "Basic proxy-secret")
        try request.addHeader("X-Amz-Security-Token", "amz-session")
        try request.setCredentialHeader("X-Api-Key", "api-key-secret")
        try request.addHeader("Accept", "application/json")
        request.body = .bytes(Array("client_secret=body-secret".utf8))
        return request
    }

    @Test func everyPrintingHidesTheCredentialsAndShowsTheRest() throws {
        let request = try requestWithEveryKindOfSecret()
        for (way, text) in everyPrinting(of: request) {
            for secret in Self.secrets { #expect(!text.contains(secret), "\(way): \(text)") }
            #expect(text.contains("POST") && text.contains("api.example.com/v1/me"), "\(way): \(text)")
            #expect(text.contains("user:<redacted>@") && text.contains("page=2"), "\(way): \(text)")
            for name in ["Authorization", "Cookie", "Proxy-Authorization", "X-Amz-Security-Token", "X-Api-Key"] {
                #expect(text.contains("\(name): <redacted>"), "\(way): \(text)")
            }
            #expect(text.contains("Accept: application/json"), "\(way): \(text)")
            #expect(text.contains("25 bytes"), "\(way): \(text)")
        }
    }

    @Test func aRequestInsideAnotherValueIsPrintedRedactedToo() throws {
        let request = try requestWithEveryKindOfSecret()
        let holder: (attempt: Int, requests: [CurlewRequest]) = (1, [request])
        for (way, text) in everyPrinting(of: holder) {
            for secret in Self.secrets { #expect(!text.contains(secret), "\(way): \(text)") }
            #expect(text.contains("api.example.com/v1/me"), "\(way): \(text)")
        }
    }
}
