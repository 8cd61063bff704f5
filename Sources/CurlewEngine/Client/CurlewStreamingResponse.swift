public import HTTPTypes

/// A response whose body arrives as it is received: status and header fields first, then the body as an
/// `AsyncSequence` of chunks. Returned by ``CurlewClient/stream(_:bufferLimit:)``.
///
/// ```swift
/// let response = try await client.stream(request)
/// guard response.status == .ok else { ... }
/// for try await chunk in response.body {
///     try await sink.write(chunk)  // a slow consumer pauses the transfer; memory stays bounded
/// }
/// ```
///
/// Dropping the response (or its body) before the end, or cancelling the task that reads it, cancels the
/// transfer and closes or returns its connection.
public struct CurlewStreamingResponse: Sendable {
    /// The status of the final response (after redirects).
    public let status: HTTPResponse.Status
    /// The URL of the final response.
    public let url: String
    /// Timings and sizes as of the moment the header fields arrived; the body's ``ResponseBodyStream/metrics``
    /// has the final ones.
    public let headMetrics: TransferMetrics
    /// The body, read once.
    public let body: ResponseBodyStream
    private let rawHeaders: [UInt8]

    init(head: CurlewResponse, body: ResponseBodyStream) {
        self.status = head.status
        self.url = head.url
        self.headMetrics = head.metrics
        self.rawHeaders = head.rawHeaders
        self.body = body
    }

    /// The final response's header fields. Names compare case-insensitively.
    public var headerFields: HTTPFields {
        ResponseHeaderParser.fields(from: rawHeaders)
    }

    /// The final response's head as swift-http-types describes it: status and header fields.
    public var head: HTTPResponse {
        HTTPResponse(status: status, headerFields: headerFields)
    }

    /// The value of the header field named `name` (any case), repeated fields joined as HTTP allows; `nil` if
    /// there is none or `name` is not a valid field name.
    public func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headerFields[$0] }
    }
}

/// A streamed response body: chunks in the order received, with backpressure (the transfer pauses while the
/// consumer is more than the buffer limit behind).
public struct ResponseBodyStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    let owner: StreamedTransfer

    /// Iterates the chunks; throws the transfer's error (``CurlewError``, or `CancellationError` if the reading
    /// task was cancelled).
    public struct AsyncIterator: AsyncIteratorProtocol {
        let owner: StreamedTransfer

        public mutating func next() async throws -> [UInt8]? {
            try await owner.buffer.next(onCancel: owner.cancel)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(owner: owner)
    }

    /// Reads the whole body into memory.
    ///
    /// - Throws: ``CurlewError/Code/bodyTooLarge`` (and cancels the transfer) past `maxBytes`.
    public func collect(upTo maxBytes: Int) async throws -> [UInt8] {
        var collected: [UInt8] = []
        for try await chunk in self {
            guard collected.count + chunk.count <= maxBytes else {
                owner.cancel()
                throw CurlewError(code: .bodyTooLarge, detail: "the response body exceeds \(maxBytes) bytes")
            }
            collected.append(contentsOf: chunk)
        }
        return collected
    }

    /// The transfer's final metrics, once the body has been read to its end.
    public var metrics: TransferMetrics? {
        owner.buffer.finalMetrics
    }
}

/// Keeps a streamed transfer alive while its body can still be read; when the last reference goes, a transfer
/// still running is cancelled, so an abandoned body never holds a connection.
final class StreamedTransfer: Sendable {
    let buffer: ResponseBodyBuffer
    let cancel: @Sendable () -> Void

    init(buffer: ResponseBodyBuffer, cancel: @escaping @Sendable () -> Void) {
        self.buffer = buffer
        self.cancel = cancel
    }

    deinit { cancel() }
}
