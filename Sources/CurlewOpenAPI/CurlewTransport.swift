public import CurlewEngine
public import HTTPTypes
public import OpenAPIRuntime

public import struct Foundation.URL

/// A `ClientTransport` for clients made by Swift OpenAPI Generator that sends every request through a
/// ``CurlewEngine/CurlewClient``, streaming both ways.
///
/// ```swift
/// let client = Client(serverURL: try Servers.Server1.url(), transport: CurlewTransport())
/// let greeting = try await client.getGreeting(query: .init(name: "Jane")).ok.body.json
/// ```
///
/// - **Request bodies stream.** An `HTTPBody` of known length goes out with `Content-Length`, one of unknown
///   length chunked (HTTP/1.1) or as plain DATA frames (HTTP/2), pulled at the network's pace.
/// - **Replay.** A body whose iteration behavior is `.multiple` and whose size is within
///   ``Configuration/replayableBodyLimit`` is read into memory first, so a 307/308 redirect (or libcurl's
///   authentication retry) sends it again; larger ones and `.single` bodies stream once, and a request that
///   must be sent again fails with ``CurlewEngine/CurlewError/Code/requestBodyNotReplayable`` instead of
///   sending a different body.
/// - **Response bodies stream** from ``CurlewEngine/CurlewClient/stream(_:bufferLimit:)``: the transfer pauses
///   while the reader is ``Configuration/responseBufferLimit`` bytes behind, and dropping the body (or cancelling
///   the task that reads it) cancels the transfer. A `HEAD` response has no body (`nil`).
/// - **Errors** are the engine's: ``CurlewEngine/CurlewError`` (switch on its `code`) wrapped by the
///   generated client in `ClientError.underlyingError`, and `CancellationError` for a cancelled task.
public struct CurlewTransport: ClientTransport {
    /// How the transport sends requests.
    public struct Configuration: Sendable {
        /// The client that sends the requests; ``CurlewEngine/CurlewClient/shared`` unless given.
        public var client: CurlewClient
        /// The longest a whole request may take, from submission to the last byte of the response body.
        /// `nil` keeps the client's ``CurlewEngine/CurlewClient/Timeouts/total``.
        public var timeout: Duration?
        /// How far a response body's reader may fall behind before the transfer pauses, in bytes.
        public var responseBufferLimit: Int
        /// How far a request body's producer may run ahead of the network, in bytes.
        public var requestBufferLimit: Int
        /// The largest `.multiple` request body that is read into memory so it can be sent again (redirects,
        /// authentication retries); larger bodies stream once. Zero streams every body.
        public var replayableBodyLimit: Int

        /// Creates a configuration.
        public init(
            client: CurlewClient = .shared, timeout: Duration? = nil, responseBufferLimit: Int = 1 << 20,
            requestBufferLimit: Int = 256 * 1024, replayableBodyLimit: Int = 1 << 20
        ) {
            self.client = client
            self.timeout = timeout
            self.responseBufferLimit = responseBufferLimit
            self.requestBufferLimit = requestBufferLimit
            self.replayableBodyLimit = replayableBodyLimit
        }
    }

    /// How the transport sends requests.
    public var configuration: Configuration

    /// Creates a transport.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Creates a transport on `client`.
    public init(client: CurlewClient, timeout: Duration? = nil) {
        self.init(configuration: Configuration(client: client, timeout: timeout))
    }

    /// Sends the request and returns once the response's head has arrived; its body follows as it is received.
    ///
    /// - Throws: ``CurlewEngine/CurlewError`` for a URL the engine refuses (`invalidRequest`,
    ///   `protocolNotAllowed`), a body whose bytes do not add up to its known length (`requestBodyFailed`, whatever
    ///   its iteration behavior) and every transport failure; `CancellationError` when the task is cancelled.
    public func send(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let curlewRequest = try await makeRequest(request, body: body, baseURL: baseURL)
        let response = try await configuration.client.stream(
            curlewRequest, bufferLimit: configuration.responseBufferLimit)
        let headerFields = response.headerFields
        let head = HTTPResponse(status: response.status, headerFields: headerFields)
        guard request.method != .head else { return (head, nil) }
        return (
            head,
            HTTPBody(
                ResponseChunks(body: response.body), length: Self.bodyLength(headerFields),
                iterationBehavior: .single)
        )
    }

    /// The engine's request for an OpenAPI request: the URL joined from the base URL and the request's path
    /// (query included), the header fields as given but the framing ones, which the engine derives from the body,
    /// and the cookie pairs on one line.
    func makeRequest(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL) async throws -> CurlewRequest {
        guard let path = request.path else {
            throw CurlewError(code: .invalidRequest, detail: "the OpenAPI request has no path")
        }
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var headerFields = request.headerFields
        headerFields[.contentLength] = nil
        headerFields[.transferEncoding] = nil
        var curlewRequest = try CurlewRequest(
            method: request.method, url: base + path, headerFields: headerFields,
            body: try await requestBody(body))
        if let timeout = configuration.timeout {
            // Only the total: the client's connect and idle timeouts stay.
            curlewRequest.timeouts.total = timeout
        }
        return curlewRequest
    }

    /// Bytes for a small replayable body, a one-shot stream otherwise.
    private func requestBody(_ body: HTTPBody?) async throws -> CurlewRequest.Body? {
        guard let body else { return nil }
        let knownLength: Int64? =
            switch body.length {
            case .known(let length): length
            case .unknown: nil
            }
        if body.iterationBehavior == .multiple,
            let bytes = try await Self.collectIfSmall(
                body, knownLength: knownLength, limit: configuration.replayableBodyLimit)
        {
            return .bytes(bytes)
        }
        return .stream(RequestBodyStream(body, length: knownLength, bufferLimit: configuration.requestBufferLimit))
    }

    /// The whole body, if it fits in `limit` bytes. A body of unknown length is read until it passes the limit;
    /// a `.multiple` body can then still be iterated again from the start to stream it.
    ///
    /// - Throws: ``CurlewEngine/CurlewError/Code/requestBodyFailed`` when the bytes do not add up to `knownLength`,
    ///   as a streamed body of the wrong length fails, rather than sending them with their own count.
    private static func collectIfSmall(_ body: HTTPBody, knownLength: Int64?, limit: Int) async throws -> [UInt8]? {
        if let knownLength, knownLength > Int64(limit) { return nil }
        var collected: [UInt8] = []
        for try await chunk in body {
            if let knownLength, Int64(collected.count + chunk.count) > knownLength {
                throw CurlewError(
                    code: .requestBodyFailed,
                    detail: "the body produced more than the \(knownLength) bytes announced as its length")
            }
            guard collected.count + chunk.count <= limit else { return nil }
            collected.append(contentsOf: chunk)
        }
        if let knownLength, Int64(collected.count) != knownLength {
            throw CurlewError(
                code: .requestBodyFailed,
                detail: "the body ended after \(collected.count) of the \(knownLength) bytes announced")
        }
        return collected
    }

    /// The body's length as `Content-Length` gives it, unless a content coding makes the decoded size differ.
    static func bodyLength(_ headerFields: HTTPFields) -> HTTPBody.Length {
        guard headerFields[.contentEncoding] == nil, let value = headerFields[.contentLength],
            let length = Int64(value), length >= 0
        else { return .unknown }
        return .known(length)
    }
}

/// A streamed response body as the chunks `HTTPBody` takes.
struct ResponseChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>

    let body: ResponseBodyStream

    struct AsyncIterator: AsyncIteratorProtocol {
        var chunks: ResponseBodyStream.AsyncIterator

        mutating func next() async throws -> ArraySlice<UInt8>? {
            try await chunks.next().map { ArraySlice($0) }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(chunks: body.makeAsyncIterator())
    }
}
