import Glibc
import Synchronization

/// The hand-over of a streamed response body from the write callback (the loop) to its consumer (any task),
/// with backpressure: past ``limit`` buffered bytes the write callback pauses the transfer
/// (`CURL_WRITEFUNC_PAUSE`), and the consumer asks the loop to resume it once it has taken half of them.
final class ResponseBodyBuffer: Sendable {
    private struct State {
        var queue = ChunkQueue()
        /// The write callback refused bytes; the loop must be asked to resume the transfer.
        var isPaused = false
        var completion: Result<TransferMetrics, any Error>?
        var waiter: CheckedContinuation<[UInt8]?, any Error>?
    }

    let limit: Int
    private let state = Mutex(State())
    /// Asks the transfer's loop to resume receiving; set before the transfer starts.
    private let resumeReceiving: @Sendable () -> Void

    init(limit: Int, resumeReceiving: @escaping @Sendable () -> Void) {
        self.limit = max(limit, 1)
        self.resumeReceiving = resumeReceiving
    }

    // MARK: the loop's side

    /// Takes a chunk from the write callback; false means "pause": the bytes were not taken.
    func offer(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let handOver = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>?? in
            if let waiter = state.waiter {
                state.waiter = nil
                return .some(waiter)
            }
            guard state.queue.byteCount < limit else {
                state.isPaused = true
                return nil
            }
            state.queue.append(Array(bytes))
            return .some(nil)
        }
        switch handOver {
        case .none: return false
        case .some(.none): return true
        case .some(.some(let waiter)):
            waiter.resume(returning: Array(bytes))
            return true
        }
    }

    /// The transfer ended; the consumer reads what is buffered, then the end or the error.
    func complete(_ outcome: Result<TransferMetrics, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            guard state.completion == nil else { return nil }
            state.completion = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        switch outcome {
        case .success: waiter?.resume(returning: nil)
        case .failure(let error): waiter?.resume(throwing: error)
        }
    }

    // MARK: the consumer's side

    private enum Step {
        case chunk([UInt8], resume: Bool)
        case end(Result<TransferMetrics, any Error>)
        case wait
    }

    /// Takes the oldest buffered chunk, or says the body ended, or that there is nothing yet.
    private static func step(_ state: inout State, limit: Int) -> Step {
        if let chunk = state.queue.popFirst() {
            // Resume at half the limit, not at the first free byte: fewer pause/resume round trips.
            let resume = state.isPaused && state.queue.byteCount <= limit / 2
            if resume { state.isPaused = false }
            return .chunk(chunk, resume: resume)
        }
        if let completion = state.completion { return .end(completion) }
        return .wait
    }

    /// The next chunk, `nil` at the end; throws the transfer's error. Cancelling the waiting task calls `cancel`.
    func next(onCancel cancel: @escaping @Sendable () -> Void) async throws -> [UInt8]? {
        // A cancelled reader stops at its next call even when chunks are buffered: otherwise a reader that runs late
        // (a busy pool) finds the whole body waiting and never sees its cancellation.
        if Task.isCancelled {
            cancel()
            throw CancellationError()
        }
        let limit = limit
        switch state.withLock({ Self.step(&$0, limit: limit) }) {
        case .chunk(let chunk, let resume):
            if resume { resumeReceiving() }
            return chunk
        case .end(let completion):
            _ = try completion.get()
            return nil
        case .wait:
            break
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
                var resume = false
                var isSecondReader = false
                let step = state.withLock { state -> Step in
                    let step = Self.step(&state, limit: limit)
                    if case .wait = step, state.waiter != nil {
                        isSecondReader = true
                    } else if case .wait = step {
                        state.waiter = continuation
                        // Nothing buffered: a paused transfer must go on, whatever the threshold.
                        resume = state.isPaused
                        state.isPaused = false
                    }
                    return step
                }
                if isSecondReader {
                    continuation.resume(
                        throwing: CurlewError(
                            code: .invalidRequest, detail: "a streamed body is read by one iterator at a time"))
                    return
                }
                switch step {
                case .chunk(let chunk, let resumeAfterTaking):
                    if resumeAfterTaking { resumeReceiving() }
                    continuation.resume(returning: chunk)
                case .end(.success):
                    continuation.resume(returning: nil)
                case .end(.failure(let error)):
                    continuation.resume(throwing: error)
                case .wait:
                    if resume { resumeReceiving() }
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// The transfer's metrics once the body has ended successfully.
    var finalMetrics: TransferMetrics? {
        state.withLock { state in
            if case .success(let metrics) = state.completion { return metrics }
            return nil
        }
    }
}

/// Where a download's bytes go: a file the caller opened, or (for a response that is not 2xx) memory, so an
/// error page never lands where the file is expected.
final class FileSink {
    let descriptor: Int32
    private(set) var hasDecided = false
    private(set) var writesToFile = false

    init(descriptor: Int32) { self.descriptor = descriptor }

    func decide(status: Int) {
        hasDecided = true
        writesToFile = (200..<300).contains(status)
    }

    /// Writes every byte; returns why not.
    func write(_ bytes: UnsafeRawBufferPointer) -> CurlewError? {
        var written = 0
        while written < bytes.count {
            let result = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 {
                if errno == EINTR { continue }
                return CurlewError(
                    code: .downloadFailed, detail: "writing the download failed: \(String(cString: strerror(errno)))",
                    osErrno: errno)
            }
            written += result
        }
        return nil
    }
}
