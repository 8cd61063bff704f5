import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

/// `maximumUsesPerConnection`, counted server-side: nginx logs the serial number of the connection each request
/// came on.
@Suite("Requests per connection")
struct CurlewClientConnectionUsesTests {
    @Test(arguments: allLoops)
    func noConnectionCarriesMoreThanTheLimit(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(
            loop,
            configure: {
                $0.httpVersion = .http1_1
                $0.maximumUsesPerConnection = 5
            }
        ) { client in
            for index in 0..<50 {
                // Plain GETs and GETs with a header field alternate: both ways of configuring a handle are covered.
                var request = try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)\(index)")
                if index % 3 == 0 { try request.addHeader("X-Test-Tag", "t\(index)") }
                let response = try await client.execute(request)
                #expect(response.text == "hit\n")
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 50)
        let requestsPerConnection = Dictionary(grouping: hits, by: \.connection).mapValues(\.count)
        #expect(hits.count == 50)
        #expect(requestsPerConnection.values.allSatisfy { $0 <= 5 }, "\(requestsPerConnection)")
        // Reuse still works up to the limit: 50 requests need exactly 10 connections of 5.
        #expect(requestsPerConnection.count == 10, "\(requestsPerConnection)")
    }

    @Test(arguments: allLoops)
    func withoutALimitOneConnectionCarriesEveryRequest(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(loop, configure: { $0.httpVersion = .http1_1 }) { client in
            for index in 0..<12 {
                let response = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)\(marker)\(index)"))
                #expect(response.text == "hit\n")
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 12)
        #expect(Set(hits.map(\.connection)).count == 1)
    }
}
