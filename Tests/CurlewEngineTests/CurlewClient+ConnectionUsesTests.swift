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

    /// HTTP/2 requests one after another: each stream is the connection's only one when it ends, so libcurl honours
    /// the last one's `CURLOPT_FORBID_REUSE`. (Concurrent streams are not limited: libcurl keeps a connection open
    /// while any stream is in use, and new streams may join it until the last of them ends.)
    @Test(arguments: allLoops)
    func sequentialHTTP2RequestsAreLimitedToo(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        let marker = "/hits/" + UUID().uuidString + "/"
        try await withClient(
            loop,
            configure: {
                $0.tls.caFile = nginx.caFile
                $0.maximumUsesPerConnection = 5
            }
        ) { client in
            for index in 0..<20 {
                let response = try await client.execute(
                    try CurlewRequest(url: "\(nginx.httpsBaseURL)\(marker)\(index)"))
                #expect(response.metrics.httpVersion == .http2)
            }
        }
        let hits = try await loggedHits(nginx, marker: marker, atLeast: 20)
        let requestsPerConnection = Dictionary(grouping: hits, by: \.connection).mapValues(\.count)
        #expect(requestsPerConnection.values.allSatisfy { $0 <= 5 }, "\(requestsPerConnection)")
        #expect(requestsPerConnection.count == 4, "\(requestsPerConnection)")
    }

    /// A redirect followed on the connection the transfer opened is that connection's second request, not a new
    /// connection's first.
    @Test(arguments: allLoops)
    func aRedirectOnTheSameConnectionCountsAsAUse(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        try await withClient(
            loop,
            configure: {
                $0.httpVersion = .http1_1
                $0.maximumUsesPerConnection = 2
            }
        ) { client in
            let redirecting = try CurlewRequest(
                url: "\(nginx.httpBaseURL)/redirect-302?target=127.0.0.1:\(nginx.httpPort)")
            let first = try await client.execute(redirecting)
            #expect(first.metrics.redirectCount == 1)
            #expect(!first.metrics.reusedConnection)
            // Two requests went out on that connection: the next one needs a new connection.
            let second = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
            #expect(!second.metrics.reusedConnection)
            let third = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
            #expect(third.metrics.reusedConnection)
        }
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
