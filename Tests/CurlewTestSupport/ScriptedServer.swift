import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A request as a ``ScriptedServer`` handler sees it.
public struct ScriptedRequest: Sendable {
    /// `GET`, `POST`, …
    public let method: String
    /// The request target as sent, query included.
    public let uri: String
    /// The header fields in order.
    public let headers: [(name: String, value: String)]
    /// The whole body.
    public let body: [UInt8]

    /// The target without its query.
    public var path: String { String(uri.prefix { $0 != "?" }) }

    /// The first field named `name`, any case.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// What a ``ScriptedServer`` handler answers.
public struct ScriptedResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int = 200, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON text with `Content-Type: application/json`.
    public static func json(
        _ text: String, status: Int = 200, headers: [(name: String, value: String)] = []
    ) -> ScriptedResponse {
        ScriptedResponse(
            status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(text.utf8))
    }
}

/// An in-process HTTP/1.1 server on 127.0.0.1 (port bound to 0) that answers every request with what a
/// closure returns, for scenarios no fixed route covers: 200s with error bodies, 401s that depend on a token,
/// 429s with `Retry-After`. Always shut it down (``withScriptedServer(_:_:)`` does).
public final class ScriptedServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let counter: Atomic<Int>
    /// The port it listens on.
    public let port: Int

    /// `http://127.0.0.1:PORT`
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Requests answered so far.
    public var requestCount: Int { counter.load(ordering: .relaxed) }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, port: Int) {
        self.group = group
        self.channel = channel
        self.port = port
        self.counter = Atomic(0)
    }

    public static func start(
        _ handler: @escaping @Sendable (ScriptedRequest) -> ScriptedResponse
    ) async throws -> ScriptedServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let box = ServerBox()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        ScriptedHandler(handler: handler, onRequest: { box.server?.counter.add(1, ordering: .relaxed) })
                    )
                }
            }
        do {
            let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
            guard let port = channel.localAddress?.port else {
                try? await channel.close()
                throw TestSupportError("scripted server has no local port")
            }
            let server = ScriptedServer(group: group, channel: channel, port: port)
            box.server = server
            return server
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    public func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}

/// Runs `body` against a fresh ``ScriptedServer`` and always shuts it down.
public func withScriptedServer<T>(
    isolation: isolated (any Actor)? = #isolation,
    _ handler: @escaping @Sendable (ScriptedRequest) -> ScriptedResponse,
    _ body: (ScriptedServer) async throws -> T
) async throws -> T {
    try await withStartedServer(
        start: { try await ScriptedServer.start(handler) }, shutdown: { try await $0.shutdown() }, body)
}

/// Lets the child channels count requests on a server created after them.
private final class ServerBox: Sendable {
    private let stored = Mutex<ScriptedServer?>(nil)
    var server: ScriptedServer? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

private final class ScriptedHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let handler: @Sendable (ScriptedRequest) -> ScriptedResponse
    private let onRequest: @Sendable () -> Void
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(handler: @escaping @Sendable (ScriptedRequest) -> ScriptedResponse, onRequest: @escaping @Sendable () -> Void)
    {
        self.handler = handler
        self.onRequest = onRequest
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = []
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head else { return }
            self.head = nil
            onRequest()
            let request = ScriptedRequest(
                method: head.method.rawValue, uri: head.uri,
                headers: head.headers.map { (name: $0.name, value: $0.value) },
                body: body)
            let response = handler(request)
            var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
            // A HEAD answer may announce the length a GET would have (an object store's HEAD does); otherwise the
            // length is the body's.
            if head.method != .HEAD || !headers.contains(name: "Content-Length") {
                headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
            }
            let responseHead = HTTPResponseHead(
                version: head.version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
            context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
            if head.method != .HEAD, !response.body.isEmpty {
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
            }
            let keepAlive = head.isKeepAlive
            let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { boundContext.value.close(promise: nil) }
            }
        }
    }
}
