import Synchronization

/// A request body produced while it is sent: an `AsyncSequence` of byte chunks, or chunks written through a
/// ``RequestBodyWriter``.
///
/// The engine pulls at the network's pace: the producer runs ahead by at most ``bufferLimit`` bytes (plus one
/// chunk), and libcurl pauses the upload (`CURL_READFUNC_PAUSE`) whenever the producer is behind, so neither side
/// ever buffers the whole body and the event loop never blocks.
///
/// With a known ``length`` the request announces `Content-Length` and fails with
/// ``CurlewError/Code/requestBodyFailed`` if the chunks add up to anything else; without one it goes out chunked on
/// HTTP/1.1 and as plain DATA frames on HTTP/2.
///
/// A stream is one-shot: it can be sent once. A redirect that needs the body again (307/308) or a second
/// `execute` of the same request fails with ``CurlewError/Code/requestBodyNotReplayable`` instead of sending a
/// different body; use bytes or a file for bodies that must be replayable.
///
/// ```swift
/// let lines = AsyncStream<[UInt8]> { continuation in
///     for index in 0..<1000 { continuation.yield(Array("line \(index)\n".utf8)) }
///     continuation.finish()
/// }
/// let request = try CurlewRequest(method: .post, url: url, body: .stream(RequestBodyStream(lines)))
/// ```
public struct RequestBodyStream: Sendable {
    /// The number of bytes the stream produces, if known up front.
    public let length: Int64?
    /// How far the producer may run ahead of the network, in bytes.
    public let bufferLimit: Int
    let channel: BodyChannel
    private let produce: (@Sendable (BodyChannel) async -> Void)?

    /// A stream of the chunks of an `AsyncSequence`.
    ///
    /// - Parameters:
    ///   - chunks: the body's bytes in chunks of any size; empty chunks are skipped. An error thrown by the
    ///     sequence fails the request with ``CurlewError/Code/requestBodyFailed``.
    ///   - length: the exact total, if known (sent as `Content-Length`).
    ///   - bufferLimit: how many bytes the producer may run ahead of the network.
    public init<Chunks: AsyncSequence & Sendable>(
        _ chunks: Chunks, length: Int64? = nil, bufferLimit: Int = 256 * 1024
    ) where Chunks.Element == [UInt8] {
        self.init(length: length, bufferLimit: bufferLimit) { channel in
            do {
                for try await chunk in chunks {
                    guard await channel.write(chunk) else { return }
                }
                channel.finish()
            } catch {
                channel.fail("the body stream failed: \(error)")
            }
        }
    }

    /// A stream of the chunks of an `AsyncSequence` of byte collections (`ArraySlice<UInt8>`, `Data`, …).
    public init<Chunks: AsyncSequence & Sendable>(
        _ chunks: Chunks, length: Int64? = nil, bufferLimit: Int = 256 * 1024
    ) where Chunks.Element: Collection & Sendable, Chunks.Element.Element == UInt8 {
        self.init(chunks.map { Array($0) }, length: length, bufferLimit: bufferLimit)
    }

    private init(length: Int64?, bufferLimit: Int, produce: (@Sendable (BodyChannel) async -> Void)?) {
        self.length = length
        self.bufferLimit = max(bufferLimit, 1)
        self.channel = BodyChannel(bufferLimit: max(bufferLimit, 1))
        self.produce = produce
    }

    /// A stream fed through a writer: the writer's `write` suspends while the producer is ahead of the network.
    ///
    /// ```swift
    /// let (stream, writer) = RequestBodyStream.makeStream()
    /// async let response = client.execute(CurlewRequest(method: .put, url: url, body: .stream(stream)))
    /// for chunk in chunks { try await writer.write(chunk) }
    /// writer.finish()
    /// print(try await response.status)
    /// ```
    public static func makeStream(
        length: Int64? = nil, bufferLimit: Int = 256 * 1024
    ) -> (stream: RequestBodyStream, writer: RequestBodyWriter) {
        let stream = RequestBodyStream(length: length, bufferLimit: bufferLimit, produce: nil)
        return (stream, RequestBodyWriter(channel: stream.channel))
    }

    /// Claims the stream for one transfer and starts its producer; `nil` if it was claimed before.
    func claim() -> BodyChannel? {
        guard channel.claim() else { return nil }
        if let produce {
            let channel = channel
            // Detached: the producer must not run on (and so delay) the event loop that started the transfer.
            // Cancelled when the transfer ends, so a sequence that never yields again does not outlive it.
            channel.setProducer(Task.detached { await produce(channel) })
        }
        return channel
    }
}

/// Feeds a ``RequestBodyStream`` made with ``RequestBodyStream/makeStream(length:bufferLimit:)``.
public struct RequestBodyWriter: Sendable {
    let channel: BodyChannel

    /// Hands a chunk to the transfer, suspending while the producer is ``RequestBodyStream/bufferLimit`` bytes
    /// ahead of the network.
    ///
    /// - Throws: ``CurlewError/Code/cancelled`` if the transfer has ended (failed, was cancelled, or the server
    ///   answered before reading the whole body); the chunk was not sent.
    public func write(_ chunk: [UInt8]) async throws {
        guard await channel.write(chunk) else {
            throw CurlewError(code: .cancelled, detail: "the transfer of this body stream has ended")
        }
    }

    /// Ends the body: the transfer sends what is buffered and completes the request.
    public func finish() { channel.finish() }

    /// Fails the transfer with ``CurlewError/Code/requestBodyFailed`` and the reason given.
    public func fail(_ reason: String) { channel.fail(reason) }
}

/// The hand-over between a body's producer (any task) and the read callback (the loop), with backpressure
/// both ways: the producer waits while the buffer is full, the read callback pauses the transfer while it is
/// empty.
final class BodyChannel: Sendable {
    private struct State {
        var queue = ChunkQueue()
        var isFinished = false
        var failure: String?
        /// The consumer is gone (the transfer ended); writers are refused.
        var isClosed = false
        var isClaimed = false
        var hasDelivered = false
        var producedBytes: Int64 = 0
        var deliveredBytes: Int64 = 0
        /// The read callback answered "pause" and waits for the waker.
        var readerIsWaiting = false
        var waker: BodyWaker?
        var writers: [CheckedContinuation<Bool, Never>] = []
        var producer: Task<Void, Never>?
    }

    private let bufferLimit: Int
    private let state = Mutex(State())

    init(bufferLimit: Int) { self.bufferLimit = bufferLimit }

    func claim() -> Bool {
        state.withLock { state in
            defer { state.isClaimed = true }
            return !state.isClaimed
        }
    }

    /// Adds a chunk; suspends while the buffer is full. Returns false (the chunk dropped) once the transfer ended.
    func write(_ chunk: [UInt8]) async -> Bool {
        if chunk.isEmpty { return state.withLock { !$0.isClosed } }
        while true {
            enum Step { case added(BodyWaker?), full, closed }
            let step = state.withLock { state -> Step in
                if state.isClosed || state.isFinished || state.failure != nil { return .closed }
                // A reader that waits with bytes buffered is holding back a declared length's last byte: more bytes
                // must get in (and fail the request) rather than wait behind it.
                guard state.queue.byteCount < bufferLimit || state.readerIsWaiting else { return .full }
                state.queue.append(chunk)
                state.producedBytes += Int64(chunk.count)
                return .added(Self.takeWaker(&state))
            }
            switch step {
            case .added(let waker):
                waker?.wake()
                return true
            case .closed:
                return false
            case .full:
                let proceed = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let resumeNow = state.withLock { state -> Bool? in
                        if state.isClosed { return false }
                        if state.queue.byteCount < bufferLimit || state.readerIsWaiting { return true }
                        state.writers.append(continuation)
                        return nil
                    }
                    if let resumeNow { continuation.resume(returning: resumeNow) }
                }
                if !proceed { return false }
            }
        }
    }

    func finish() {
        let waker = state.withLock { state -> BodyWaker? in
            guard !state.isFinished, state.failure == nil else { return nil }
            state.isFinished = true
            return Self.takeWaker(&state)
        }
        waker?.wake()
    }

    func fail(_ reason: String) {
        let waker = state.withLock { state -> BodyWaker? in
            guard !state.isFinished, state.failure == nil else { return nil }
            state.failure = reason
            return Self.takeWaker(&state)
        }
        waker?.wake()
    }

    private static func takeWaker(_ state: inout State) -> BodyWaker? {
        guard state.readerIsWaiting else { return nil }
        state.readerIsWaiting = false
        return state.waker
    }

    func setWaker(_ waker: BodyWaker?) {
        state.withLock { $0.waker = waker }
    }

    func setProducer(_ producer: Task<Void, Never>) {
        let isClosed = state.withLock { state -> Bool in
            if !state.isClosed { state.producer = producer }
            return state.isClosed
        }
        if isClosed { producer.cancel() }
    }

    /// The read callback's side: copies buffered bytes, or says to pause, end or abort.
    func read(into buffer: UnsafeMutableRawBufferPointer, declaredLength: Int64?) -> BodyReadResult {
        var writersToResume: [CheckedContinuation<Bool, Never>] = []
        defer { for writer in writersToResume { writer.resume(returning: true) } }
        return state.withLock { state -> BodyReadResult in
            if let failure = state.failure { return .abort(.requestBody(failure)) }
            if let declaredLength, state.producedBytes > declaredLength {
                return .abort(
                    .requestBody(
                        "the body stream produced more than the \(declaredLength) bytes announced as its length"))
            }
            guard !state.queue.isEmpty else {
                if state.isFinished {
                    if let declaredLength, state.producedBytes != declaredLength {
                        return .abort(
                            .requestBody(
                                "the body stream ended after \(state.producedBytes) of the \(declaredLength) bytes announced"
                            ))
                    }
                    return .end
                }
                state.readerIsWaiting = true
                return .pause
            }
            var room = buffer.count
            if let declaredLength, !state.isFinished {
                // The last byte waits for the producer to finish: libcurl asks for nothing more once it has the
                // announced length, and a producer about to write more must still fail the request.
                let deliverable = declaredLength - 1 - state.deliveredBytes
                guard deliverable > 0 else {
                    state.readerIsWaiting = true
                    swap(&writersToResume, &state.writers)
                    return .pause
                }
                room = Int(min(Int64(room), deliverable))
            }
            let copied = state.queue.copy(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<room]))
            state.deliveredBytes += Int64(copied)
            state.hasDelivered = true
            if state.queue.byteCount < bufferLimit, !state.writers.isEmpty {
                swap(&writersToResume, &state.writers)
            }
            return .bytes(copied)
        }
    }

    /// Claims the channel and closes it unless a transfer already has it: its request ended before it could
    /// send the body, so a writer must not wait for a reader that will never come.
    func abandonIfUnclaimed() {
        let wasClaimed = state.withLock { state -> Bool in
            defer { state.isClaimed = true }
            return state.isClaimed
        }
        if !wasClaimed { close() }
    }

    /// A stream can go back to its start only if nothing of it has been sent yet.
    var hasDelivered: Bool { state.withLock { $0.hasDelivered } }

    /// The transfer is over: refuse further writes and release waiting writers.
    func close() {
        let (writers, producer) = state.withLock { state -> ([CheckedContinuation<Bool, Never>], Task<Void, Never>?) in
            state.isClosed = true
            state.waker = nil
            state.queue.removeAll()
            defer {
                state.writers.removeAll()
                state.producer = nil
            }
            return (state.writers, state.producer)
        }
        producer?.cancel()
        for writer in writers { writer.resume(returning: false) }
    }
}

/// The read callback's view of a ``RequestBodyStream``.
final class StreamBodySource: BodySource {
    private let channel: BodyChannel
    let length: Int64?

    init(channel: BodyChannel, length: Int64?) {
        self.channel = channel
        self.length = length
    }

    /// Claims a stream for this transfer; fails if it was sent before.
    static func open(_ stream: RequestBodyStream) -> Result<StreamBodySource, CurlewError> {
        guard let channel = stream.claim() else {
            return .failure(
                CurlewError(
                    code: .requestBodyNotReplayable,
                    detail: "this body stream was already sent; a stream body can be sent once"))
        }
        return .success(StreamBodySource(channel: channel, length: stream.length))
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyReadResult {
        channel.read(into: buffer, declaredLength: length)
    }

    func rewind() -> CurlewError? {
        guard channel.hasDelivered else { return nil }
        return CurlewError(
            code: .requestBodyNotReplayable,
            detail: "the request must be sent again (a 307/308 redirect or an authentication retry), "
                + "but its body is a one-shot stream that was partly sent")
    }

    func setWaker(_ waker: BodyWaker?) { channel.setWaker(waker) }

    func close() { channel.close() }
}
