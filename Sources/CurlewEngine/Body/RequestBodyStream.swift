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
/// A stream announced as empty (`length: 0`) holds its request until the producer finishes: libcurl reads no body
/// of an empty request, so a byte written or a failure afterwards could not fail it. A byte or a failure fails the
/// request before anything is sent.
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

    /// A stream announced as empty (`length: 0`) is held until its producer has finished: libcurl asks no body of
    /// an empty request, so a byte written or a failure after the request went out would be lost, and the request
    /// would pass for one sent whole. Claims the stream and starts its producer here; the transfer claims the
    /// channel again once this returned.
    ///
    /// - Parameter limit: the request's total timeout, which the wait counts against.
    /// - Throws: ``CurlewError/Code/requestBodyFailed`` when the producer failed or wrote a byte,
    ///   ``CurlewError/Code/requestBodyNotReplayable`` when the stream was sent before, a total timeout when
    ///   `limit` ran out first, and ``CurlewError/Code/cancelled`` when the caller was cancelled first.
    func holdUntilAnnouncedEmptyEnd(within limit: Duration?) async throws(CurlewError) {
        // Not the transfer's claim: a second hold of the same stream is refused, whatever the first one found.
        guard let channel = claim(acceptingEmptinessCheck: false) else { throw StreamBodySource.alreadySent }
        if let limit {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await channel.waitUntilEndedOrWritten() }
                group.addTask {
                    // Cancelled (the wait ended first, or the caller was cancelled): no expiry.
                    guard (try? await Task.sleep(for: limit)) != nil else { return }
                    channel.expire()
                }
                await group.next()
                group.cancelAll()
            }
        } else {
            await channel.waitUntilEndedOrWritten()
        }
        if let error = channel.checkAnnouncedEmptiness() { throw error }
    }

    /// Claims the stream for one transfer and starts its producer; `nil` if it was claimed before (except by a hold
    /// that found it empty, when `acceptingEmptinessCheck`).
    func claim(acceptingEmptinessCheck: Bool = true) -> BodyChannel? {
        guard let claim = channel.claim(acceptingEmptinessCheck: acceptingEmptinessCheck) else { return nil }
        if claim == .first, let produce {
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
        /// Callers of ``waitUntilEndedOrWritten()``: resumed by the first byte, the end, a failure or the close.
        var endWaiters: [CheckedContinuation<Void, Never>] = []
        /// An announced-empty stream's producer finished without a byte before the request went out
        /// (``checkAnnouncedEmptiness()``): the transfer may claim the channel once more.
        var isVerifiedEmpty = false
        /// The hold of an announced-empty stream outlasted the request's total timeout.
        var isExpired = false
    }

    private let bufferLimit: Int
    private let state = Mutex(State())

    init(bufferLimit: Int) { self.bufferLimit = bufferLimit }

    /// How a claim of the channel went.
    enum Claim {
        /// The stream's first claim: its producer is to be started.
        case first
        /// The transfer's claim of an announced-empty stream whose producer already finished without a byte.
        case afterEmptinessCheck
    }

    /// Claims the channel; nil when it was claimed before (except by a hold that found it empty, when
    /// `acceptingEmptinessCheck`).
    func claim(acceptingEmptinessCheck: Bool) -> Claim? {
        state.withLock { state in
            if acceptingEmptinessCheck && state.isVerifiedEmpty {
                state.isVerifiedEmpty = false
                return .afterEmptinessCheck
            }
            defer { state.isClaimed = true }
            return state.isClaimed ? nil : .first
        }
    }

    /// Adds a chunk; suspends while the buffer is full. Returns false (the chunk dropped) once the transfer ended.
    func write(_ chunk: [UInt8]) async -> Bool {
        if chunk.isEmpty { return state.withLock { !$0.isClosed } }
        while true {
            enum Step { case added(BodyWaker?, [CheckedContinuation<Void, Never>]), full, closed }
            let step = state.withLock { state -> Step in
                if state.isClosed || state.isFinished || state.failure != nil { return .closed }
                // A reader that waits with bytes buffered is holding back a declared length's last byte: more bytes
                // must get in (and fail the request) rather than wait behind it.
                guard state.queue.byteCount < bufferLimit || state.readerIsWaiting else { return .full }
                state.queue.append(chunk)
                state.producedBytes += Int64(chunk.count)
                return .added(Self.takeWaker(&state), Self.takeEndWaiters(&state))
            }
            switch step {
            case .added(let waker, let endWaiters):
                waker?.wake()
                for waiter in endWaiters { waiter.resume() }
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
        let (waker, endWaiters) = state.withLock { state -> (BodyWaker?, [CheckedContinuation<Void, Never>]) in
            guard !state.isFinished, state.failure == nil else { return (nil, []) }
            state.isFinished = true
            return (Self.takeWaker(&state), Self.takeEndWaiters(&state))
        }
        waker?.wake()
        for waiter in endWaiters { waiter.resume() }
    }

    func fail(_ reason: String) {
        let (waker, endWaiters) = state.withLock { state -> (BodyWaker?, [CheckedContinuation<Void, Never>]) in
            guard !state.isFinished, state.failure == nil else { return (nil, []) }
            state.failure = reason
            return (Self.takeWaker(&state), Self.takeEndWaiters(&state))
        }
        waker?.wake()
        for waiter in endWaiters { waiter.resume() }
    }

    private static func takeWaker(_ state: inout State) -> BodyWaker? {
        guard state.readerIsWaiting else { return nil }
        state.readerIsWaiting = false
        return state.waker
    }

    private static func takeEndWaiters(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        guard !state.endWaiters.isEmpty else { return [] }
        defer { state.endWaiters.removeAll() }
        return state.endWaiters
    }

    /// Suspends until the producer wrote a byte, finished, failed, or the channel was closed; a cancelled caller
    /// closes the channel (the request will not go out).
    func waitUntilEndedOrWritten() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.producedBytes > 0 || state.isFinished || state.failure != nil || state.isClosed {
                        return true
                    }
                    state.endWaiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            close()
        }
    }

    /// The hold's time ran out: marks it, then closes the channel (which also ends the wait).
    func expire() {
        state.withLock { $0.isExpired = true }
        close()
    }

    /// After ``waitUntilEndedOrWritten()`` on a stream announced as empty: nil when its producer finished without a
    /// byte (the transfer may then claim the channel), otherwise why the request must not go out; the channel is
    /// then closed, which stops the producer.
    func checkAnnouncedEmptiness() -> CurlewError? {
        let error = state.withLock { state -> CurlewError? in
            if let failure = state.failure { return .requestBody(failure) }
            if state.producedBytes > 0 {
                return .requestBody("the body stream produced bytes after announcing a length of 0")
            }
            if state.isExpired {
                return CurlewError(
                    code: .timeout(.total),
                    detail: "the total timeout ran out while the request waited for its empty body stream to end")
            }
            if state.isClosed || !state.isFinished {
                return CurlewError(code: .cancelled, detail: "the request was cancelled before its body stream ended")
            }
            state.isVerifiedEmpty = true
            return nil
        }
        if error != nil { close() }
        return error
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
            // A hold's verdict the transfer never took is an open claim too: the request will not go out.
            return state.isClaimed && !state.isVerifiedEmpty
        }
        if !wasClaimed { close() }
    }

    /// A stream can go back to its start only if nothing of it has been sent yet.
    var hasDelivered: Bool { state.withLock { $0.hasDelivered } }

    /// The transfer is over: refuse further writes and release waiting writers.
    func close() {
        let (writers, producer, endWaiters) = state.withLock {
            state -> ([CheckedContinuation<Bool, Never>], Task<Void, Never>?, [CheckedContinuation<Void, Never>]) in
            state.isClosed = true
            state.isVerifiedEmpty = false
            state.waker = nil
            state.queue.removeAll()
            defer {
                state.writers.removeAll()
                state.producer = nil
            }
            return (state.writers, state.producer, Self.takeEndWaiters(&state))
        }
        producer?.cancel()
        for writer in writers { writer.resume(returning: false) }
        for waiter in endWaiters { waiter.resume() }
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

    static let alreadySent = CurlewError(
        code: .requestBodyNotReplayable, detail: "this body stream was already sent; a stream body can be sent once")

    /// Claims a stream for this transfer; fails if it was sent before.
    static func open(_ stream: RequestBodyStream) -> Result<StreamBodySource, CurlewError> {
        guard let channel = stream.claim() else { return .failure(alreadySent) }
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

extension CurlewRequest {
    /// The body, when it is a stream announced as empty that goes out as it is (compression makes its length
    /// unknown, and the read callback then checks it as any other stream).
    var announcedEmptyStream: RequestBodyStream? {
        bodyCompression == nil ? body?.announcedEmptyStream : nil
    }
}
