import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

/// The thread loop's own bookkeeping, seen from outside: a pooled connection that the server ends while it rests
/// (the socket-action driver keeps such sockets in its epoll set, `docs/design/0011-socket-action-loop.md`) must
/// leave the set, not wake the loop again and again.
@Suite("Thread loop")
struct ThreadEventLoopTests {
    enum Ending: String, CaseIterable, CustomTestStringConvertible {
        case close, reset
        var testDescription: String { rawValue }
    }

    @Test(
        arguments: [CurlewClient.Configuration.EventLoopKind.thread, .thread(driver: .socketAction)], Ending.allCases)
    func aPooledConnectionTheServerEndsDoesNotKeepTheLoopBusy(
        loop: CurlewClient.Configuration.EventLoopKind, ending: Ending
    ) async throws {
        let script: @Sendable (WireRequest) -> [WireStep] = { request in
            [
                .response(body: "own:\(request.target)"), .wait(milliseconds: 30), .mark("ended-\(request.connection)"),
                ending == .close ? .close : .reset,
            ]
        }
        try await withWireScriptServer(script) { server in
            try await withClient(loop, configure: { $0.loopCount = 1 }) { client in
                let loopThread = try #require(
                    await Task(executorPreference: client.executors[0]) { currentThreadID() }.value)
                #expect(
                    try await client.execute(try CurlewRequest(url: "\(server.baseURL)/first")).text == "own:/first")
                try await server.waitForMark("ended-0")
                // The scenario itself: an idle second after the server ended the connection the pool holds. A loop
                // that kept being told about the ended socket would spend most of it on the CPU.
                let before = try threadCPUTicks(loopThread)
                try await Task.sleep(for: .seconds(1))
                let spent = try threadCPUTicks(loopThread) - before
                #expect(spent < 20, "the loop thread used \(spent * 10) ms of CPU in an idle second")
                // The next request goes out on a new connection and gets its own response.
                #expect(try await client.execute(try CurlewRequest(url: "\(server.baseURL)/next")).text == "own:/next")
            }
            #expect(server.requests.map(\.target) == ["/first", "/next"])
            #expect(server.connectionCount == 2)
        }
    }
}

/// The calling thread's id (Swift's Glibc does not export `gettid`): `/proc/thread-self` names `PID/task/TID`.
private func currentThreadID() -> Int? {
    guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") else {
        return nil
    }
    return target.split(separator: "/").last.flatMap { Int($0) }
}

/// User plus system CPU time of one of this process's threads, in clock ticks (1/100 s on Linux).
private func threadCPUTicks(_ thread: Int) throws -> Int {
    let stat = try String(contentsOfFile: "/proc/self/task/\(thread)/stat", encoding: .utf8)
    // Fields after the command name's closing parenthesis: state is field 3, utime 14 and stime 15.
    guard let close = stat.lastIndex(of: ")") else { throw TestSupportError("unreadable /proc stat: \(stat)") }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else {
        throw TestSupportError("unreadable /proc stat: \(stat)")
    }
    return user + system
}
