import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Serves one connection. NIO's `HTTPServerPipelineHandler` in front of it guarantees that a
/// pipelined request is only delivered after the previous response's `.end`, so this handler
/// deals with one request at a time.
final class LoopbackHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// `/echo` keeps the body in memory; beyond this it answers 413 instead of exhausting RAM.
    static let maximumEchoBytes = 256 * 1024 * 1024

    private enum BodySink {
        case discard
        case collect(ByteBuffer, overflowed: Bool)
        case checksum(count: Int, hash: FNV1a64)
        /// A gzip-encoded body: inflated, then counted and hashed; the encoded size is kept too.
        case inflate(GzipInflater, encodedCount: Int)
    }

    private struct PendingRequest {
        var head: HTTPRequestHead
        var route: LoopbackRoute
        var sink: BodySink

        var keepAlive: Bool { self.head.isKeepAlive }
        /// Responses to these carry no body on the wire (NIO's encoder enforces it too).
        var suppressesBody: Bool { self.head.method == .HEAD || self.head.method == .CONNECT }
    }

    private struct PatternStream {
        var offset: Int
        let total: Int
        let keepAlive: Bool
    }

    private let counters: LoopbackCounters
    private var rawContext: ChannelHandlerContext?
    private var request: PendingRequest?
    private var stream: PatternStream?
    private var isPumping = false
    private var needsPump = false
    /// Cleared when the connection goes away so timers that fire later write nothing.
    private var isConnected = true

    init(counters: LoopbackCounters) {
        self.counters = counters
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.rawContext = try? context.pipeline.syncOperations.context(handlerType: RawWriteGateway.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.isConnected = false
        self.stream = nil
        self.rawContext = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.isConnected = false
        self.stream = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Parse errors were already answered with 400 by NIO's protocol error handler; for
        // anything else there is nobody to report to, so just drop the connection.
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.pumpPattern(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.counters.requestsServed.add(1, ordering: .relaxed)
            let route = LoopbackRoute(head: head)
            let sink: BodySink
            if route.collectsBody {
                sink = .collect(context.channel.allocator.buffer(capacity: 0), overflowed: false)
            } else if route.checksumsBody,
                head.headers[canonicalForm: "content-encoding"].contains(where: { $0.lowercased() == "gzip" })
            {
                sink = .inflate(GzipInflater(), encodedCount: 0)
            } else if route.checksumsBody {
                sink = .checksum(count: 0, hash: FNV1a64())
            } else {
                sink = .discard
            }
            self.request = PendingRequest(head: head, route: route, sink: sink)
            if route.mayAnswerExpectContinue, head.version.minor >= 1,
                head.headers[canonicalForm: "expect"].contains(where: { $0.lowercased() == "100-continue" })
            {
                let interim = HTTPResponseHead(version: .http1_1, status: .continue)
                context.writeAndFlush(self.wrapOutboundOut(.head(interim)), promise: nil)
            }

        case .body(var buffer):
            self.counters.bytesReceived.add(buffer.readableBytes, ordering: .relaxed)
            guard var request = self.request else { return }
            switch request.sink {
            case .discard:
                return
            case .collect(var collected, let overflowed):
                if overflowed || collected.readableBytes + buffer.readableBytes > Self.maximumEchoBytes {
                    request.sink = .collect(collected, overflowed: true)
                } else {
                    // Drop the stored copy first so the append does not trigger a CoW copy.
                    request.sink = .discard
                    collected.writeBuffer(&buffer)
                    request.sink = .collect(collected, overflowed: false)
                }
            case .checksum(let count, var hash):
                hash.update(buffer)
                request.sink = .checksum(count: count + buffer.readableBytes, hash: hash)
            case .inflate(let inflater, let encodedCount):
                buffer.withUnsafeReadableBytes { inflater.feed($0) }
                request.sink = .inflate(inflater, encodedCount: encodedCount + buffer.readableBytes)
            }
            self.request = request

        case .end:
            guard let request = self.request else { return }
            self.request = nil
            self.dispatch(request, context: context)
        }
    }

    // MARK: - Routes

    private func dispatch(_ request: PendingRequest, context: ChannelHandlerContext) {
        let keepAlive = request.keepAlive
        let noBody = request.suppressesBody
        switch request.route {
        case .small:
            self.respond(
                context: context, status: .ok, contentType: "text/plain", body: LoopbackServer.smallBody,
                keepAlive: keepAlive, suppressBody: noBody)
        case .json:
            self.respond(
                context: context, status: .ok, contentType: "application/json", body: LoopbackServer.jsonBody,
                keepAlive: keepAlive, suppressBody: noBody)
        case .bytes(let count):
            self.startPattern(context: context, count: count, keepAlive: keepAlive, suppressBody: noBody)
        case .echo:
            guard case .collect(let collected, let overflowed) = request.sink else { return }
            if overflowed {
                self.respond(
                    context: context, status: .payloadTooLarge, contentType: "text/plain",
                    body: "echo body larger than \(Self.maximumEchoBytes) bytes\n", keepAlive: false,
                    suppressBody: noBody)
            } else {
                self.respond(
                    context: context, status: .ok, contentType: "application/octet-stream", body: collected,
                    keepAlive: keepAlive, suppressBody: noBody)
            }
        case .upload:
            let json: String
            switch request.sink {
            case .checksum(let count, let hash):
                json = "{\"bytes\": \(count), \"fnv1a64\": \"\(hash.hexDigest)\"}"
            case .inflate(let inflater, let encodedCount):
                guard inflater.isComplete, inflater.failure == nil else {
                    let reason = inflater.failure ?? "the gzip stream ended early"
                    self.respond(
                        context: context, status: .badRequest, contentType: "text/plain",
                        body: "invalid gzip body: \(reason)\n", keepAlive: false, suppressBody: noBody)
                    return
                }
                json =
                    "{\"bytes\": \(inflater.count), \"fnv1a64\": \"\(inflater.hash.hexDigest)\", \"encodedBytes\": \(encodedCount)}"
            default:
                return
            }
            self.respond(
                context: context, status: .ok, contentType: "application/json", body: json, keepAlive: keepAlive,
                suppressBody: noBody)
        case .headers:
            self.respond(
                context: context, status: .ok, contentType: "application/json", body: Self.headersJSON(request.head),
                keepAlive: keepAlive, suppressBody: noBody)
        case .status(let code):
            self.respond(
                context: context, status: HTTPResponseStatus(statusCode: code), contentType: nil,
                body: ByteBuffer?.none, keepAlive: keepAlive, suppressBody: noBody)
        case .delay(let milliseconds):
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) {
                guard self.isConnected else { return }
                self.respond(
                    context: context, status: .ok, contentType: "text/plain", body: LoopbackServer.smallBody,
                    keepAlive: keepAlive, suppressBody: noBody)
            }
        case .freeze(let milliseconds, let period):
            let wait = LoopbackRoute.freezeWait(
                atUptimeNanoseconds: NIODeadline.now().uptimeNanoseconds, freezeMilliseconds: milliseconds,
                periodMilliseconds: period)
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(wait)) {
                guard self.isConnected else { return }
                self.respond(
                    context: context, status: .ok, contentType: "text/plain", body: LoopbackServer.smallBody,
                    keepAlive: keepAlive, suppressBody: noBody)
            }
        case .events(let count, let interval):
            self.startEvents(
                context: context, count: count, interval: interval, keepAlive: keepAlive, suppressBody: noBody)
        case .proxied(let target):
            self.respond(
                context: context, status: .ok, contentType: "text/plain", body: "proxied \(target)",
                keepAlive: keepAlive, suppressBody: noBody)
        case .notFound:
            self.respond(
                context: context, status: .notFound, contentType: "text/plain", body: "not found\n",
                keepAlive: keepAlive, suppressBody: noBody)
        case .methodNotAllowed(let allow):
            self.respond(
                context: context, status: .methodNotAllowed, contentType: "text/plain", body: "method not allowed\n",
                keepAlive: keepAlive, suppressBody: noBody, extraHeaders: [("allow", allow)])
        case .badRequest(let reason):
            self.respond(
                context: context, status: .badRequest, contentType: "text/plain", body: reason + "\n",
                keepAlive: keepAlive, suppressBody: noBody)
        case .fault(let fault):
            self.serve(fault: fault, context: context, keepAlive: keepAlive)
        }
    }

    private func respond(
        context: ChannelHandlerContext,
        status: HTTPResponseStatus,
        contentType: String?,
        body: String?,
        keepAlive: Bool,
        suppressBody: Bool,
        extraHeaders: [(String, String)] = []
    ) {
        let buffer = body.map { context.channel.allocator.buffer(string: $0) }
        self.respond(
            context: context, status: status, contentType: contentType, body: buffer, keepAlive: keepAlive,
            suppressBody: suppressBody, extraHeaders: extraHeaders)
    }

    private func respond(
        context: ChannelHandlerContext,
        status: HTTPResponseStatus,
        contentType: String?,
        body: ByteBuffer?,
        keepAlive: Bool,
        suppressBody: Bool,
        extraHeaders: [(String, String)] = []
    ) {
        var headers = HTTPHeaders()
        if let contentType {
            headers.add(name: "content-type", value: contentType)
        }
        if status.mayHaveResponseBody {
            headers.add(name: "content-length", value: String(body?.readableBytes ?? 0))
        }
        for (name, value) in extraHeaders {
            headers.add(name: name, value: value)
        }
        if !keepAlive {
            headers.add(name: "connection", value: "close")
        }
        context.write(
            self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
            promise: nil)
        if !suppressBody, status.mayHaveResponseBody, let body, body.readableBytes > 0 {
            context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        self.finishResponse(context: context, keepAlive: keepAlive)
    }

    private func finishResponse(context: ChannelHandlerContext, keepAlive: Bool) {
        let written = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
        if !keepAlive {
            written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    private static func headersJSON(_ head: HTTPRequestHead) -> String {
        var order: [String] = []
        var values: [String: [String]] = [:]
        for (name, value) in head.headers {
            let key = name.lowercased()
            if values[key] == nil {
                order.append(key)
            }
            values[key, default: []].append(value)
        }
        var members = [
            "\(JSONText.quoted("_method")): \(JSONText.quoted(head.method.rawValue))",
            "\(JSONText.quoted("_uri")): \(JSONText.quoted(head.uri))",
        ]
        for key in order {
            members.append("\(JSONText.quoted(key)): \(JSONText.quoted(values[key]!.joined(separator: ", ")))")
        }
        return "{\n  " + members.joined(separator: ",\n  ") + "\n}\n"
    }

    // MARK: - /bytes/N

    private func startPattern(context: ChannelHandlerContext, count: Int, keepAlive: Bool, suppressBody: Bool) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/octet-stream")
        headers.add(name: "content-length", value: String(count))
        if !keepAlive {
            headers.add(name: "connection", value: "close")
        }
        context.write(
            self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
            promise: nil)
        if suppressBody || count == 0 {
            self.finishResponse(context: context, keepAlive: keepAlive)
            return
        }
        self.stream = PatternStream(offset: 0, total: count, keepAlive: keepAlive)
        self.pumpPattern(context: context)
    }

    /// Writes pattern chunks while the channel is writable, then waits for the next
    /// writability change, so a slow reader never makes the server buffer the whole body.
    private func pumpPattern(context: ChannelHandlerContext) {
        // A flush can drain the socket and report writability synchronously; looping here
        // instead of recursing keeps the stack flat however fast the peer reads.
        if self.isPumping {
            self.needsPump = true
            return
        }
        self.isPumping = true
        defer { self.isPumping = false }
        repeat {
            self.needsPump = false
            guard var stream = self.stream else { return }
            while context.channel.isWritable, stream.offset < stream.total {
                let length = min(BytePattern.maximumChunk, stream.total - stream.offset)
                let chunk = BytePattern.slice(offset: stream.offset, length: length)
                context.write(self.wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
                stream.offset += length
            }
            if stream.offset >= stream.total {
                self.stream = nil
                self.finishResponse(context: context, keepAlive: stream.keepAlive)
                return
            }
            self.stream = stream
            context.flush()
        } while self.needsPump && context.channel.isWritable
    }

    // MARK: - Faults

    private func serve(fault: LoopbackFault, context: ChannelHandlerContext, keepAlive: Bool) {
        switch fault {
        case .closeMidBody:
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 100000\r\n\r\n"
            self.writeRawThenClose(context: context, head: head, patternBytes: 50_000)
        case .shortContentLength:
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 100\r\n\r\n"
            self.writeRawThenClose(context: context, head: head, patternBytes: 50)
        case .malformed:
            self.writeRawThenClose(context: context, head: "NOT-HTTP garbage\r\n\r\n", patternBytes: 0)
        case .chunkedTruncated:
            // Two complete 10-byte chunks and no terminating `0\r\n\r\n`.
            let wire =
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n"
                + "a\r\n0123456789\r\n" + "a\r\nabcdefghij\r\n"
            self.writeRawThenClose(context: context, head: wire, patternBytes: 0)
        case .emptyReply:
            context.close(promise: nil)
        case .neverAnswer:
            // Deliberately nothing: the pipeline handler holds back later requests, so the
            // connection stays open and silent until the client gives up.
            break
        case .resetAfterHeaders:
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 1000\r\n\r\n"
            guard let raw = self.rawContext else {
                context.close(promise: nil)
                return
            }
            raw.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: head))).assumeIsolated().whenComplete {
                _ in
                // The pause lets the client read and parse the head first, so it observes
                // "headers, then reset" rather than a reset racing the head.
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(50)) {
                    self.abortWithReset(context: context)
                }
            }
        case .slowBody(let chunks, let interval):
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/octet-stream")
            headers.add(name: "content-length", value: String(chunks * 10))
            if !keepAlive {
                headers.add(name: "connection", value: "close")
            }
            context.writeAndFlush(
                self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                promise: nil)
            self.sendSlowChunk(context: context, index: 0, of: chunks, interval: interval, keepAlive: keepAlive)
        }
    }

    /// Server-sent events, each flushed on its own, the body chunked since its length is not announced.
    private func startEvents(
        context: ChannelHandlerContext, count: Int, interval: Int64, keepAlive: Bool, suppressBody: Bool
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "text/event-stream")
        headers.add(name: "cache-control", value: "no-cache")
        if !keepAlive {
            headers.add(name: "connection", value: "close")
        }
        context.writeAndFlush(
            self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
            promise: nil)
        self.sendEvent(
            context: context, index: 0, of: suppressBody ? 0 : count, interval: interval, keepAlive: keepAlive)
    }

    private func sendEvent(context: ChannelHandlerContext, index: Int, of count: Int, interval: Int64, keepAlive: Bool)
    {
        guard self.isConnected else { return }
        if index >= count {
            self.finishResponse(context: context, keepAlive: keepAlive)
            return
        }
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(index == 0 ? 0 : interval)) {
            guard self.isConnected else { return }
            let event = "id: \(index)\nevent: tick\ndata: {\"index\":\(index),\"of\":\(count)}\n\n"
            context.writeAndFlush(
                self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: event)))), promise: nil)
            self.sendEvent(context: context, index: index + 1, of: count, interval: interval, keepAlive: keepAlive)
        }
    }

    private func sendSlowChunk(
        context: ChannelHandlerContext, index: Int, of chunks: Int, interval: Int64, keepAlive: Bool
    ) {
        guard self.isConnected else { return }
        if index >= chunks {
            self.finishResponse(context: context, keepAlive: keepAlive)
            return
        }
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(interval)) {
            guard self.isConnected else { return }
            let chunk = BytePattern.slice(offset: index * 10, length: 10)
            context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
            self.sendSlowChunk(context: context, index: index + 1, of: chunks, interval: interval, keepAlive: keepAlive)
        }
    }

    /// Writes bytes the HTTP encoder never sees (so a lying `content-length` or a truncated
    /// chunked body reaches the wire unchanged), then closes with a normal FIN.
    private func writeRawThenClose(context: ChannelHandlerContext, head: String, patternBytes: Int) {
        guard let raw = self.rawContext else {
            context.close(promise: nil)
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + patternBytes)
        buffer.writeString(head)
        var offset = 0
        while offset < patternBytes {
            var chunk = BytePattern.slice(offset: offset, length: min(BytePattern.maximumChunk, patternBytes - offset))
            offset += chunk.readableBytes
            buffer.writeBuffer(&chunk)
        }
        // Close from the same raw position: a close from this handler's context passes the HTTP pipeline handler,
        // which never saw a response end (the bytes went out beneath it) and may hold the close back.
        raw.writeAndFlush(NIOAny(buffer)).assumeIsolated().whenComplete { _ in
            raw.close(promise: nil)
        }
    }

    /// SO_LINGER {on, 0 s} turns close() into an abortive close: the kernel drops the
    /// connection with RST instead of FIN. `ChannelOptions.socketOption(.so_linger)` cannot
    /// carry a `struct linger`, hence `SocketOptionProvider`.
    private func abortWithReset(context: ChannelHandlerContext) {
        guard self.isConnected else { return }
        guard let provider = context.channel as? any SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            (self.rawContext ?? context).close(promise: nil)
        }
    }
}
