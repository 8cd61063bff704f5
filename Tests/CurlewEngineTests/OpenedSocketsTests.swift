import Testing

@testable import CurlewEngine

@Suite("Sockets opened for a request")
struct OpenedSocketsTests {
    /// Descriptors 10…13 bound to local ports 40010…40013, as `getsockname` would read them.
    private static func localPort(of socket: Int32) -> Int32 { 40_000 + socket }

    /// Happy eyeballs with a failing address: the first family's socket connects after two later ones opened. Before,
    /// only the last two were kept, and the connection went unregistered (never checked for stray bytes on reuse).
    @Test func theWinnerIsFoundHoweverManySocketsOpenedAfterIt() {
        var opened = OpenedSockets()
        for socket: Int32 in [10, 11, 12, 13] { opened.opened(socket) }
        #expect(opened.newest(boundTo: 40_010, localPortOf: Self.localPort) == 10)
        #expect(opened.newest(boundTo: 40_013, localPortOf: Self.localPort) == 13)
        #expect(opened.newest(boundTo: 40_099, localPortOf: Self.localPort) == nil, "a pooled connection's port")
    }

    /// A descriptor libcurl closed and reused reads as its later socket, and two sockets reading the same port (two
    /// remote addresses can share a local one) resolve to the later one: the search runs from the newest.
    @Test func theNewestOfSocketsReadingTheSamePortIsTaken() {
        var opened = OpenedSockets()
        for socket: Int32 in [10, 11, 12, 10] { opened.opened(socket) }
        let sharedPort: (Int32) -> Int32 = { $0 == 11 || $0 == 12 ? 40_050 : 40_000 + $0 }
        #expect(opened.newest(boundTo: 40_050, localPortOf: sharedPort) == 12)
        #expect(opened.newest(boundTo: 40_010, localPortOf: sharedPort) == 10)
    }

    /// Once the request has its connection, a later request (a redirect, a retry, the next repeat) starts empty.
    @Test func forgettingLeavesNoSocketForTheNextRequest() {
        var opened = OpenedSockets()
        opened.opened(10)
        opened.forget()
        #expect(opened.sockets.isEmpty)
        #expect(opened.newest(boundTo: 40_010, localPortOf: Self.localPort) == nil)
    }
}
