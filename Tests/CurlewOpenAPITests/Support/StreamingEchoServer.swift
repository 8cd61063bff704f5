import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An HTTP/1.1 server on 127.0.0.1 that echoes each request body chunk the moment it arrives (chunked
/// response, one flush per chunk), so a client can only finish a chunk-by-chunk ratchet if it really streams
/// both ways at once. Counts the request bytes it read, server-side.
final class StreamingEchoServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let received: Atomic<Int>
    let port: Int

    var baseURL: String { "http://127.0.0.1:\(port)" }
    /// Request body bytes read so far, over every request.
    var bytesReceived: Int { received.load(ordering: .relaxed) }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, port: Int) {
        self.group = group
        self.channel = channel
        self.port = port
        self.received = Atomic(0)
    }

    static func start() async throws -> StreamingEchoServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counter = ReceivedCounter()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(EchoHandler(counter: counter))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
            guard let port = channel.localAddress?.port else {
                try? await channel.close()
                throw StreamingEchoServerError.noPort
            }
            let server = StreamingEchoServer(group: group, channel: channel, port: port)
            counter.server = server
            return server
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    fileprivate func add(_ count: Int) { received.add(count, ordering: .relaxed) }

    func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}

enum StreamingEchoServerError: Error { case noPort }

/// Runs `body` against a fresh ``StreamingEchoServer`` and always shuts it down.
func withStreamingEchoServer<T>(
    isolation: isolated (any Actor)? = #isolation, _ body: (StreamingEchoServer) async throws -> T
) async throws -> T {
    let server = try await StreamingEchoServer.start()
    do {
        let result = try await body(server)
        try await server.shutdown()
        return result
    } catch {
        try? await server.shutdown()
        throw error
    }
}

/// Lets the child channels count on a server created after them.
private final class ReceivedCounter: Sendable {
    private let stored = Mutex<StreamingEchoServer?>(nil)
    var server: StreamingEchoServer? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let counter: ReceivedCounter

    init(counter: ReceivedCounter) { self.counter = counter }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/octet-stream")
            headers.add(name: "x-echo-method", value: head.method.rawValue)
            headers.add(name: "x-echo-uri", value: head.uri)
            if let length = head.headers.first(name: "content-length") {
                headers.add(name: "x-echo-content-length", value: length)
            }
            let response = HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)
            context.writeAndFlush(wrapOutboundOut(.head(response)), promise: nil)
        case .body(let buffer):
            counter.server?.add(buffer.readableBytes)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        case .end:
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
