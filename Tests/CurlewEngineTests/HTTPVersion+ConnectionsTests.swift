import Testing

@testable import CurlewEngine

/// Which requests go over HTTP/1 on a connection of their own at a time: the ones whose pooled connections are
/// checked for unread bytes, and the ones the socket-action driver may spread over its parts.
@Suite("HTTP/1-only requests")
struct HTTPVersionConnectionsTests {
    @Test func onlyHTTP1ConnectionsAreCheckedForUnreadBytes() {
        #expect(CurlewClient.HTTPVersion.http2.isHTTP1Only(for: "http://x/"))
        #expect(CurlewClient.HTTPVersion.http2.isHTTP1Only(for: "HTTP://x/"))
        #expect(!CurlewClient.HTTPVersion.http2.isHTTP1Only(for: "https://x/"))
        #expect(CurlewClient.HTTPVersion.http1_1.isHTTP1Only(for: "https://x/"))
        #expect(!CurlewClient.HTTPVersion.http2PriorKnowledge.isHTTP1Only(for: "http://x/"))
    }
}
