import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An in-process HTTP/1.1 server with well-known routes and deliberate wire-level faults.
///
/// Tests use it to exercise the client against behaviour real servers rarely show on demand
/// (truncated bodies, resets, garbage, stalls); the `curlew` command embeds it as a local
/// target. Every instance owns its own event loop group, so always call ``shutdown()``.
///
/// Routes: `/small`, `/json`, `/bytes/N`, `/echo`, `/upload` (and `/files/...`, the same for `curlew upload`), `/headers`, `/status/N`,
/// `/delay/MS`, `/freeze/MS?every_ms=PERIOD` (a server that stalls for MS of every PERIOD), `/events/N?interval_ms=M` (server-sent events), absolute-form (proxy) request targets, and the `/fault/...` family
/// (`close-mid-body`, `short-content-length`, `reset-after-headers`, `never-answer`,
/// `slow-body?chunks=N&interval_ms=M`, `malformed`, `empty-reply`, `chunked-truncated`).
public final class LoopbackServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let counters: LoopbackCounters
    private let host: String
    private let isShutDown = Atomic<Bool>(false)

    /// The TCP port the server listens on.
    public let port: Int

    private init(
        group: MultiThreadedEventLoopGroup, channel: any Channel, counters: LoopbackCounters, host: String, port: Int
    ) {
        self.group = group
        self.channel = channel
        self.counters = counters
        self.host = host
        self.port = port
    }

    /// Binds `host:port` (port 0 picks a free ephemeral port, race-free) and starts serving.
    ///
    /// - Parameter threads: event loop threads; one is plenty for tests and keeps ordering simple.
    public static func start(host: String = "127.0.0.1", port: Int = 0, threads: Int = 1) async throws -> LoopbackServer
    {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        let counters = LoopbackCounters()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // A TCP-level option: `.socketOption(.tcp_nodelay)` would set SOL_SOCKET option 1, SO_DEBUG, which only
            // root may set; for anyone else every accepted connection was closed at once.
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // Larger than NIO's 64 KiB default so /bytes/N keeps the socket busy between
            // writability events without buffering more than a few chunks.
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 * 1024, high: 1024 * 1024))
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                counters.acceptedConnections.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    // Sits next to the socket so fault routes can write bytes the HTTP encoder
                    // would otherwise reframe or reject.
                    try sync.addHandler(RawWriteGateway())
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
                    try sync.addHandler(LoopbackHTTPHandler(counters: counters))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            guard let boundPort = channel.localAddress?.port else {
                try? await channel.close()
                throw LoopbackServerError.noLocalAddress
            }
            return LoopbackServer(group: group, channel: channel, counters: counters, host: host, port: boundPort)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// `http://HOST:PORT`, with IPv6 hosts bracketed.
    public var baseURL: String {
        let authorityHost = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "http://\(authorityHost):\(self.port)"
    }

    /// TCP connections accepted so far; lets tests assert connection reuse.
    public var acceptedConnections: Int { self.counters.acceptedConnections.load(ordering: .relaxed) }

    /// Requests whose head was received, including ones never answered.
    public var requestsServed: Int { self.counters.requestsServed.load(ordering: .relaxed) }

    /// Request body bytes received in total over all connections and routes.
    public var bytesReceived: Int { self.counters.bytesReceived.load(ordering: .relaxed) }

    /// Closes the listener and every open connection, then stops the event loop threads.
    ///
    /// Safe to call more than once; later calls return immediately.
    public func shutdown() async throws {
        guard !self.isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try? await self.channel.close()
        try await self.group.shutdownGracefully()
    }
}

/// Errors thrown while starting a ``LoopbackServer``.
public enum LoopbackServerError: Error, CustomStringConvertible {
    /// The bound socket reported no local address, so the port is unknown.
    case noLocalAddress

    public var description: String {
        switch self {
        case .noLocalAddress: "the loopback server's listening socket has no local address"
        }
    }
}

final class LoopbackCounters: Sendable {
    let acceptedConnections = Atomic<Int>(0)
    let requestsServed = Atomic<Int>(0)
    let bytesReceived = Atomic<Int>(0)
}

/// Marks the pipeline position closest to the socket; writes issued on its context skip the
/// HTTP encoder. It relies on the default pass-through `write`, so it never inspects data.
final class RawWriteGateway: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
}
