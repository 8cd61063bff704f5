import Foundation
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One request as a ``WireScriptServer`` read it off the wire.
public struct WireRequest: Sendable {
    public let method: String
    public let target: String
    /// Header fields in order, names as sent.
    public let headers: [(name: String, value: String)]
    /// Which accepted connection (0, 1, …) carried it, and its position on that connection.
    public let connection: Int
    public let indexOnConnection: Int

    /// The first field named `name`, any case.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// What a ``WireScriptServer`` does, step by step, after reading a request.
public enum WireStep: Sendable {
    /// Writes and flushes these bytes.
    case send([UInt8])
    /// Waits this long before the next step (a server that is slow to misbehave).
    case wait(milliseconds: Int64)
    /// Marks the point the test waits for with ``WireScriptServer/waitForMark(_:timeout:)``.
    case mark(String)
    /// Holds the remaining steps until the test calls ``WireScriptServer/release(_:)`` with this name (at once if it
    /// already has): a response held for exactly as long as the test needs.
    case waitForRelease(String)
    /// Closes the connection with a FIN.
    case close
    /// Closes the connection with a RST (SO_LINGER 0).
    case reset
}

extension WireStep {
    /// A complete HTTP/1.1 response with `Content-Length`, kept alive.
    public static func response(status: Int = 200, headers: [(String, String)] = [], body: String) -> WireStep {
        .send(Array(WireStep.responseText(status: status, headers: headers, body: body).utf8))
    }

    public static func responseText(status: Int = 200, headers: [(String, String)] = [], body: String) -> String {
        var text = "HTTP/1.1 \(status) \(status == 200 ? "OK" : "Status")\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        return text + "\r\n" + body
    }
}

/// An in-process TCP server on loopback that reads HTTP/1.1 requests (head and `Content-Length` body) and answers
/// each with raw bytes a script returns: responses with bytes after their body, conflicting framing, resets and
/// closes between requests, redirects anywhere. It records every request and counts connections, so tests check
/// what reached the server, not what the client says. Always shut it down.
public final class WireScriptServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let shared: SharedWireState
    public let host: String
    /// The TCP port; 0 for a server on a Unix domain socket.
    public let port: Int
    /// The Unix domain socket the server listens on instead of TCP, when it was started on one.
    public let unixSocketPath: String?

    /// `http://HOST:PORT`
    public var baseURL: String { "http://\(host):\(port)" }

    /// Every request read so far, in arrival order.
    public var requests: [WireRequest] { shared.state.withLock { $0.requests } }
    /// Connections accepted so far.
    public var connectionCount: Int { shared.state.withLock { $0.connections } }
    /// Connections closed so far (by either side).
    public var closedConnectionCount: Int { shared.state.withLock { $0.closedConnections } }

    private init(
        group: MultiThreadedEventLoopGroup, channel: any Channel, host: String, port: Int, unixSocketPath: String?,
        shared: SharedWireState
    ) {
        self.group = group
        self.channel = channel
        self.host = host
        self.port = port
        self.unixSocketPath = unixSocketPath
        self.shared = shared
    }

    /// Starts a server on `host` (any 127.0.0.0/8 address Linux accepts without configuration) and a free port, or,
    /// with `unixSocketPath`, on that Unix domain socket (a file left there is replaced).
    public static func start(
        host: String = "127.0.0.1", unixSocketPath: String? = nil,
        _ script: @escaping @Sendable (WireRequest) -> [WireStep]
    ) async throws -> WireScriptServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let shared = SharedWireState()
        var bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        if unixSocketPath == nil {
            bootstrap = bootstrap.childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
        }
        bootstrap =
            bootstrap
            .childChannelInitializer { channel in
                let index = shared.state.withLock { state -> Int in
                    state.connections += 1
                    return state.connections - 1
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        WireScriptHandler(connection: index, script: script, shared: shared))
                }
            }
        do {
            if let unixSocketPath {
                let channel = try await bootstrap.bind(
                    unixDomainSocketPath: unixSocketPath, cleanupExistingSocketFile: true
                )
                .get()
                return WireScriptServer(
                    group: group, channel: channel, host: host, port: 0, unixSocketPath: unixSocketPath, shared: shared)
            }
            let channel = try await bootstrap.bind(host: host, port: 0).get()
            guard let port = channel.localAddress?.port else {
                try? await channel.close()
                throw TestSupportError("wire script server has no local port")
            }
            return WireScriptServer(
                group: group, channel: channel, host: host, port: port, unixSocketPath: nil, shared: shared)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Waits (bounded) until a script step ``WireStep/mark(_:)`` named `name` has run.
    public func waitForMark(_ name: String, timeout: Duration = .seconds(10)) async throws {
        try await waitUntil(timeout: timeout) { self.shared.state.withLock { $0.marks.contains(name) } }
    }

    /// Lets every script held at ``WireStep/waitForRelease(_:)`` with `name` go on, and any that reaches it later.
    public func release(_ name: String) {
        let waiters = shared.state.withLock { state in
            state.released.insert(name)
            return state.releaseWaiters.removeValue(forKey: name) ?? []
        }
        for waiter in waiters { waiter() }
    }

    public func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}

/// Runs `body` against a fresh ``WireScriptServer`` and always shuts it down.
public func withWireScriptServer<T>(
    isolation: isolated (any Actor)? = #isolation,
    host: String = "127.0.0.1",
    unixSocketPath: String? = nil,
    _ script: @escaping @Sendable (WireRequest) -> [WireStep],
    _ body: (WireScriptServer) async throws -> T
) async throws -> T {
    try await withStartedServer(
        start: { try await WireScriptServer.start(host: host, unixSocketPath: unixSocketPath, script) },
        shutdown: { try await $0.shutdown() }, body)
}

struct WireServerState: Sendable {
    var requests: [WireRequest] = []
    var connections = 0
    var closedConnections = 0
    var marks: Set<String> = []
    var released: Set<String> = []
    var releaseWaiters: [String: [@Sendable () -> Void]] = [:]
}

private final class SharedWireState: Sendable {
    let state = Mutex(WireServerState())
}

private final class WireScriptHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: Int
    private let script: @Sendable (WireRequest) -> [WireStep]
    private let shared: SharedWireState
    private var buffered: [UInt8] = []
    private var served = 0
    /// Steps still to run; requests that arrive meanwhile wait in `buffered`.
    private var pending: [WireStep] = []
    private var running = false
    private var closed = false

    init(connection: Int, script: @escaping @Sendable (WireRequest) -> [WireStep], shared: SharedWireState) {
        self.connection = connection
        self.script = script
        self.shared = shared
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        buffered += buffer.readBytes(length: buffer.readableBytes) ?? []
        serveNext(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        shared.state.withLock { $0.closedConnections += 1 }
        context.fireChannelInactive()
    }

    private func serveNext(context: ChannelHandlerContext) {
        guard !running, !closed, let request = parseRequest() else { return }
        shared.state.withLock { $0.requests.append(request) }
        pending = script(request)
        running = true
        runSteps(context: context)
    }

    private func runSteps(context: ChannelHandlerContext) {
        while !pending.isEmpty {
            let step = pending.removeFirst()
            switch step {
            case .send(let bytes):
                context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
            case .mark(let name):
                shared.state.withLock { _ = $0.marks.insert(name) }
            case .wait(let milliseconds):
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(milliseconds)) {
                    let (handler, context) = bound.value
                    handler.runSteps(context: context)
                }
                return
            case .waitForRelease(let name):
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                let eventLoop = context.eventLoop
                let resume: @Sendable () -> Void = {
                    eventLoop.execute {
                        let (handler, context) = bound.value
                        handler.runSteps(context: context)
                    }
                }
                let alreadyReleased = shared.state.withLock { state -> Bool in
                    if state.released.contains(name) { return true }
                    state.releaseWaiters[name, default: []].append(resume)
                    return false
                }
                if alreadyReleased { continue }
                return
            case .close:
                closed = true
                pending = []
                context.close(promise: nil)
                return
            case .reset:
                closed = true
                pending = []
                // `.socketOption(.so_linger)` cannot carry a `struct linger`, hence SocketOptionProvider.
                guard let provider = context.channel as? any SocketOptionProvider else {
                    context.close(promise: nil)
                    return
                }
                let channel = context.channel
                provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
                return
            }
        }
        running = false
        served += 1
        serveNext(context: context)
    }

    /// Takes one complete request off the front of the buffer.
    private func parseRequest() -> WireRequest? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        guard buffered.count >= 4 else { return nil }
        var headEnd: Int?
        for index in 0...(buffered.count - 4) where Array(buffered[index..<index + 4]) == terminator {
            headEnd = index
            break
        }
        guard let headEnd else { return nil }
        let head = String(decoding: buffered[0..<headEnd], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.removeFirst().split(separator: " ").map(String.init)
        let headers = lines.compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first { $0.name.lowercased() == "content-length" }.flatMap { Int($0.value) } ?? 0
        guard buffered.count >= headEnd + 4 + length else { return nil }
        buffered.removeFirst(headEnd + 4 + length)
        return WireRequest(
            method: requestLine.first ?? "", target: requestLine.count > 1 ? requestLine[1] : "", headers: headers,
            connection: connection, indexOnConnection: served)
    }
}

extension WireScriptServer {
    /// A script that answers every request with a 200 and `body`, kept alive, but holds the first request it reads
    /// until the test calls ``releaseTheFirstRequest(withHeader:)``; with `header`, the first request of each value
    /// of that header is held (the first request of each shard of a run, each shard sending its own value).
    ///
    /// For tests that must see a run while it goes (a live export, a scrape): a run of a fixed length can end
    /// between two looks on a machine that stalls, and fail a right exporter; a held request keeps it going for
    /// exactly as long as the test needs. Run it with ``withWireScriptServer(isolation:host:unixSocketPath:_:_:)``,
    /// which shuts the server down however the test ends.
    public static func holdingTheFirstRequest(
        body: String = "ok", ofEachValueOf header: String? = nil
    ) -> @Sendable (WireRequest) -> [WireStep] {
        let held = HeldGroups()
        return { request in
            let answer = WireStep.response(body: body)
            let group = header.map { request.header($0) ?? "" }
            guard held.isFirst(of: group ?? "") else { return [answer] }
            let name = heldMark(header: header, value: group)
            return [.mark(name), .waitForRelease(name), answer]
        }
    }

    /// Waits (bounded) until a server running ``holdingTheFirstRequest(body:ofEachValueOf:)`` holds its first
    /// request, or with `header`, the first one with that field.
    public func waitUntilTheFirstRequestIsHeld(
        withHeader header: (name: String, value: String)? = nil, timeout: Duration = .seconds(20)
    ) async throws {
        try await waitForMark(Self.heldMark(header: header?.name, value: header?.value), timeout: timeout)
    }

    /// Lets a server running ``holdingTheFirstRequest(body:ofEachValueOf:)`` answer its first request, or with
    /// `header`, the first one with that field (at once when it reaches it, if it has not yet).
    public func releaseTheFirstRequest(withHeader header: (name: String, value: String)? = nil) {
        release(Self.heldMark(header: header?.name, value: header?.value))
    }

    private static func heldMark(header: String?, value: String?) -> String {
        guard let header else { return "first request held" }
        return "first request held with \(header.lowercased()): \(value ?? "")"
    }
}

/// The groups of requests whose first request a script has already held.
private final class HeldGroups: Sendable {
    private let seen = Mutex<Set<String>>([])

    /// Whether this is the first request of `group` (true once per group).
    func isFirst(of group: String) -> Bool {
        seen.withLock { $0.insert(group).inserted }
    }
}
