import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A loopback HTTP server that keeps every request whole (head and body) and answers 201, so a test can see
/// exactly what the command sent.
final class RecordingServer: Sendable {
    struct Request: Sendable {
        let method: String
        let uri: String
        let headers: [(String, String)]
        let body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let recorded: Mutex<[Request]>
    /// Statuses to answer, in order, before the default 201.
    private let scriptedStatuses = Mutex<[Int]>([])
    let port: Int

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var requests: [Request] { recorded.withLock { $0 } }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, port: Int) {
        self.group = group
        self.channel = channel
        self.recorded = Mutex([])
        self.port = port
    }

    static func start() async throws -> RecordingServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let sink = RequestSink()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(RecordingHandler(sink: sink))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        let server = RecordingServer(group: group, channel: channel, port: port)
        sink.server.withLock { $0 = server }
        return server
    }

    /// Answers the next requests with these statuses, then 201 again.
    func answerNext(_ statuses: [Int]) {
        scriptedStatuses.withLock { $0 += statuses }
    }

    /// Records the request and returns the status to answer it with.
    fileprivate func record(_ request: Request) -> Int {
        recorded.withLock { $0.append(request) }
        return scriptedStatuses.withLock { $0.isEmpty ? 201 : $0.removeFirst() }
    }

    func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}

private final class RequestSink: Sendable {
    let server = Mutex<RecordingServer?>(nil)
}

private final class RecordingHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let sink: RequestSink
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(sink: RequestSink) {
        self.sink = sink
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(let buffer):
            body += buffer.readableBytesView
        case .end:
            guard let head else { return }
            let request = RecordingServer.Request(
                method: head.method.rawValue, uri: head.uri, headers: head.headers.map { ($0.name, $0.value) },
                body: body)
            let status = sink.server.withLock { $0 }?.record(request) ?? 201
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: "0")
            let responseHead = HTTPResponseHead(
                version: head.version, status: HTTPResponseStatus(statusCode: status), headers: headers)
            context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            self.head = nil
        }
    }
}

/// Splits a `multipart/form-data` body into (headers, content) per part. Enough for checking what the command
/// sent; not a general parser.
enum MultipartParts {
    struct Part {
        let headers: [String: String]
        let content: [UInt8]

        /// A parameter of Content-Disposition, e.g. `name` or `filename`.
        func disposition(_ parameter: String) -> String? {
            guard let value = headers["content-disposition"] else { return nil }
            for piece in value.split(separator: ";") {
                let trimmed = piece.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix(parameter + "=\"") && trimmed.hasSuffix("\"") {
                    return String(trimmed.dropFirst(parameter.count + 2).dropLast())
                }
            }
            return nil
        }
    }

    static func parse(body: [UInt8], contentType: String) -> [Part]? {
        guard let range = contentType.range(of: "boundary=") else { return nil }
        let boundary = Array(
            ("--" + contentType[range.upperBound...].trimmingCharacters(in: CharacterSet(charactersIn: "\" "))).utf8)
        var parts: [Part] = []
        var cursor = 0
        guard var start = find(boundary, in: body, from: cursor) else { return nil }
        while true {
            cursor = start + boundary.count
            if body[cursor..<min(cursor + 2, body.count)].elementsEqual("--".utf8) { return parts }
            cursor += 2  // CRLF after the boundary
            guard let headerEnd = find(Array("\r\n\r\n".utf8), in: body, from: cursor),
                let next = find(Array("\r\n".utf8) + boundary, in: body, from: headerEnd + 4)
            else { return nil }
            var headers: [String: String] = [:]
            for line in String(decoding: body[cursor..<headerEnd], as: UTF8.self).components(separatedBy: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                    in: .whitespaces)
            }
            parts.append(Part(headers: headers, content: Array(body[(headerEnd + 4)..<next])))
            start = next + 2
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard needle.count <= haystack.count, start <= haystack.count - needle.count else { return nil }
        var index = start
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0] && haystack[index..<(index + needle.count)].elementsEqual(needle) {
                return index
            }
            index += 1
        }
        return nil
    }
}
