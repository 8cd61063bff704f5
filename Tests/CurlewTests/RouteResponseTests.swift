import Curlew
import CurlewEngine
import Foundation
import HTTPTypes
import Testing

@Suite struct RouteResponseTests {
    private func response(_ body: String, status: HTTPResponse.Status = .ok) throws -> RouteResponse {
        let request = try CurlewRequest(url: "http://api.local/x")
        return RouteResponse(
            status: status, headerFields: [.contentType: "application/json"], body: Array(body.utf8), url: request.url,
            request: request)
    }

    struct Page: Decodable { let results: [Item] }
    struct Item: Decodable { let id: Int }

    @Test func decodingFailuresNameTheCodingPathAndShowTheBody() throws {
        let response = try response(#"{"results":[{"id":1},{"id":"two"}]}"#)
        do {
            _ = try response.decode(Page.self)
            Issue.record("should fail")
        } catch  where error.code == .decoding {
            let failure = try #require(error.decodingFailure)
            #expect(failure.codingPath == "results[1].id")
            #expect(failure.bodyExcerpt.contains(#""two""#))
            #expect(failure.type.hasSuffix("Page"))
            #expect(failure.description.contains("results[1].id"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func aCustomDecoderCanBePassed() throws {
        struct Event: Decodable { let createdAt: Int }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        #expect(try response(#"{"created_at":5}"#).decode(Event.self, decoder: decoder).createdAt == 5)
        #expect(throws: ProviderError.self) { try response(#"{"created_at":5}"#).decode(Event.self) }
    }

    @Test func textDataAndJSONHelpersReadTheSameBody() throws {
        let response = try response(#"{"a":[1,"b",null,true,1.5]}"#)
        #expect(response.string() == #"{"a":[1,"b",null,true,1.5]}"#)
        #expect(response.data() == Data(#"{"a":[1,"b",null,true,1.5]}"#.utf8))
        let json = try response.json()
        #expect(json["a"][0].intValue == 1)
        #expect(json["a"][1].stringValue == "b")
        #expect(json["a"][2].isNull)
        #expect(json["a"][3].bool == true)
        #expect(json["a"][4].double == 1.5)
        #expect(json["missing"]["deeper"].isNull)
        #expect(throws: ProviderError.self) { try self.response("not json").json() }
    }

    @Test func headerNamesAreCaseInsensitive() throws {
        let response = try response("{}")
        #expect(response.header("CONTENT-type") == "application/json")
        #expect(response.headerFields[.contentType] == "application/json")
    }

    @Test func statusErrorsKeepTheBodyAndDescribeIt() throws {
        let error = ProviderError.status(try response(#"{"error":"gone"}"#, status: .gone))
        #expect(error.status == .gone)
        #expect(error.response?.string() == #"{"error":"gone"}"#)
        #expect(error.description.contains("410"))
        #expect(error.description.contains("gone"))
        #expect(ProviderError.stopped(error).underlying.status == .gone)
    }
}
