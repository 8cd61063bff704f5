import NIOCore
import NIOHTTP1
import NIOPosix

/// Why a ``PrometheusEndpoint`` could not start.
public struct PrometheusEndpointError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, naming the address.
    public let description: String
}

/// A minimal HTTP/1.1 server for Prometheus to scrape: `GET /metrics` answers the exposition the `metrics` closure
/// writes (`text/plain; version=0.0.4`); any other path is 404, any other method on `/metrics` 405.
///
/// One event loop thread of its own, so scrapes never run on the load's threads. Call ``shutdown()`` when done.
public final class PrometheusEndpoint: Sendable {
    /// The exposition's content type (Prometheus text format 0.0.4).
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// The address the endpoint listens on, as given.
    public let host: String
    /// The port the endpoint listens on (the one the kernel chose when 0 was asked for).
    public let port: Int

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, host: String, port: Int) {
        self.group = group
        self.channel = channel
        self.host = host
        self.port = port
    }

    /// `http://HOST:PORT/metrics`, with an IPv6 host bracketed.
    public var url: String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/metrics"
    }

    /// Binds `host:port` and starts answering scrapes with what `metrics` appends to its buffer (called on the
    /// endpoint's own thread, once per scrape).
    ///
    /// - Throws: ``PrometheusEndpointError`` when the address cannot be bound (in use, not an address of this host,
    ///   not an address at all).
    public static func start(
        host: String, port: Int, metrics: @escaping @Sendable (inout [UInt8]) -> Void
    ) async throws(PrometheusEndpointError) -> PrometheusEndpoint {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(MetricsHandler(metrics: metrics))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            let boundPort = channel.localAddress?.port ?? port
            return PrometheusEndpoint(group: group, channel: channel, host: host, port: boundPort)
        } catch {
            try? await group.shutdownGracefully()
            throw PrometheusEndpointError(description: "cannot listen on \(host):\(port): \(Self.reason(error))")
        }
    }

    /// Stops listening and closes the endpoint's connections.
    public func shutdown() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return error.description }
        if let error = error as? SocketAddressError {
            switch error {
            case .unknown(let host, _): return "\(host.debugDescription) is not an IP address or a known host name"
            default: return "\(error)"
            }
        }
        return "\(error)"
    }
}

/// Answers one connection's requests, one at a time (NIO's pipelining handler in front orders them).
private final class MetricsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: @Sendable (inout [UInt8]) -> Void
    private var head: HTTPRequestHead?

    init(metrics: @escaping @Sendable (inout [UInt8]) -> Void) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        var headers = HTTPHeaders()
        let status: HTTPResponseStatus
        var body: [UInt8] = []
        if path != "/metrics" {
            status = .notFound
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            body = Array("not found: the metrics are at /metrics\n".utf8)
        } else if head.method != .GET && head.method != .HEAD {
            status = .methodNotAllowed
            headers.add(name: "Allow", value: "GET, HEAD")
        } else {
            status = .ok
            headers.add(name: "Content-Type", value: PrometheusEndpoint.contentType)
            metrics(&body)
        }
        headers.add(name: "Content-Length", value: "\(body.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil)
        if head.method != .HEAD && !body.isEmpty {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let ended = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            ended.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
