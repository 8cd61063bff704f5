public import CurlewEngine
public import HTTPTypes

/// A response whose body arrives as it is received, from ``HTTPProvider/stream(_:interceptors:progress:)``.
///
/// ```swift
/// let response = try await provider.stream(Route(path: "/export"))
/// for try await chunk in response.body { try await sink.write(chunk) }
/// ```
public struct RouteStreamingResponse: Sendable {
    /// The status of the final response.
    public let status: HTTPResponse.Status
    /// The header fields; names compare case-insensitively.
    public let headerFields: HTTPFields
    /// The URL of the final response.
    public let url: String
    /// The request as it was sent.
    public internal(set) var request: CurlewRequest
    /// The body, read once.
    public let body: RouteBodyStream

    /// Creates a streamed response, as transports do.
    public init(
        status: HTTPResponse.Status, headerFields: HTTPFields, url: String, request: CurlewRequest,
        body: RouteBodyStream
    ) {
        self.status = status
        self.headerFields = headerFields
        self.url = url
        self.request = request
        self.body = body
    }
}

/// A streamed body: the engine's chunks with backpressure, or bytes a mock already has.
public struct RouteBodyStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    enum Source: Sendable {
        case engine(ResponseBodyStream)
        case buffered([UInt8])
    }

    let source: Source

    /// The engine's body stream.
    public init(engine: ResponseBodyStream) {
        source = .engine(engine)
    }

    /// Bytes in memory, delivered as one chunk (none when empty).
    public init(buffered bytes: [UInt8]) {
        source = .buffered(bytes)
    }

    /// Iterates the chunks; throws the transfer's error.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var engine: ResponseBodyStream.AsyncIterator?
        var buffered: [UInt8]?

        public mutating func next() async throws -> [UInt8]? {
            if engine != nil { return try await engine!.next() }
            defer { buffered = nil }
            return buffered.flatMap { $0.isEmpty ? nil : $0 }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .engine(let stream): AsyncIterator(engine: stream.makeAsyncIterator(), buffered: nil)
        case .buffered(let bytes): AsyncIterator(engine: nil, buffered: bytes)
        }
    }

    /// The body's first `count` bytes, or all of it when shorter, for an error's explanation: what follows is not
    /// read (dropping the stream ends the transfer), and a transfer that fails part-way keeps what arrived.
    func leadingBytes(upTo count: Int) async -> [UInt8] {
        var collected: [UInt8] = []
        do {
            for try await chunk in self {
                collected += chunk.prefix(count - collected.count)
                if collected.count >= count { break }
            }
        } catch {
            // What arrived before the failure still explains the status.
        }
        return collected
    }

    /// Reads the whole body into memory.
    ///
    /// - Throws: `CurlewError` with code `bodyTooLarge` past `maxBytes`.
    public func collect(upTo maxBytes: Int) async throws -> [UInt8] {
        switch source {
        case .engine(let stream):
            return try await stream.collect(upTo: maxBytes)
        case .buffered(let bytes):
            guard bytes.count <= maxBytes else {
                throw CurlewError(code: .bodyTooLarge, detail: "the response body exceeds \(maxBytes) bytes")
            }
            return bytes
        }
    }
}
