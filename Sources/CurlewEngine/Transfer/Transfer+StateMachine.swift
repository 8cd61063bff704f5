import CLibCurl

/// The life of one transfer, as a value that does no I/O: events in, actions out.
///
/// Every event is delivered on the transfer's loop, so the machine needs no lock; what makes completion
/// and cancellation resolve exactly once is that ``State/finished`` absorbs every later event.
///
/// Besides the lifecycle it owns every decision libcurl's callbacks used to make on their own: the pause state of
/// each direction, the idle clock, the framing checks on each header block, why the engine stopped a transfer
/// (``StopCause``), and whether a failed transfer goes out once more on a fresh connection. The shell (`Transfer`,
/// `MultiCore`) reads libcurl's facts, feeds them in, and carries out what comes back. See
/// `docs/design/0007-connection-reuse-and-transfer-state.md`.
struct TransferStateMachine: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// Built, not yet on a loop. A cancellation may already have been requested.
        case created(cancelRequested: Bool)
        /// Its easy handle is in the multi handle.
        case running
        /// Resolved; the continuation has been resumed.
        case finished
    }

    enum StartAction: Sendable, Equatable {
        /// Configure the easy handle and add it to the multi handle.
        case start
        /// Resume the caller with this failure without touching libcurl.
        case fail(Failure)
        /// Nothing: the transfer is already on its way (a repeated submission changes nothing).
        case ignore
    }

    enum StopAction: Sendable, Equatable {
        /// Nothing to do: the transfer is already resolved (or not yet started and now marked).
        case none
        /// Remove the easy handle from the multi handle and resume the caller with this failure.
        case removeAndFail(Failure)
    }

    enum CompletionAction: Sendable, Equatable {
        /// Resume the caller with the transfer's outcome.
        case finish
        /// Send the request once more, on a new connection: the one it was given was dead or unusable and the
        /// server cannot have acted on the request (or the request is safe to repeat).
        case retryOnFreshConnection
        /// Ignore: the transfer was already resolved.
        case ignore
    }

    /// Why a transfer is resolved without libcurl's word.
    enum Failure: Sendable, Equatable {
        /// The caller's task was cancelled.
        case cancelled
        /// Submitted to a loop that is shutting down.
        case clientShutdown
        /// Submitted to a client that started no loop, because the libcurl it runs on is too old; the reason.
        case unsupportedLibcurl(String)
        /// Running when the client shut down.
        case abortedByShutdown
        case timeout(CurlewError.TimeoutKind)
        /// libcurl gave the transfer a socket the loop cannot watch (descriptor exhaustion).
        case unwatchableSocket
        /// Resuming a paused transfer failed (`curl_easy_pause`); libcurl's code is attached.
        case resumeFailed(Int)
    }

    /// Why the engine told libcurl to stop a transfer from inside a callback; libcurl then reports a generic
    /// failure ("write error", "aborted by callback"), and this says what really happened.
    enum StopCause: Sendable, Equatable {
        /// The response body passed its size limit.
        case bodyLimitExceeded
        /// The server answered the engine's `Expect: 100-continue` with 417.
        case expectationRejected
        /// The response's framing is ambiguous: conflicting `Content-Length` values, or `Content-Length` together
        /// with `Transfer-Encoding` (RFC 9112 §6.3). The connection is closed, never reused.
        case ambiguousFraming(String)
        /// A reused HTTP/1 connection had unread bytes (or its end) waiting before the request was written: what
        /// is there belongs to no request of ours, so the connection is closed and the request goes out on another.
        case staleConnection
    }

    enum ResumeAction: Sendable, Equatable {
        /// The direction was not paused (or the transfer is over): nothing to tell libcurl.
        case none
        /// Call `curl_easy_pause` with these `CURLPAUSE_*` bits still set.
        case unpause(stillPausedSend: Bool, stillPausedReceive: Bool)
    }

    enum HeaderBlockAction: Sendable, Equatable {
        /// Keep going.
        case accept
        /// Return 0 from the header callback: libcurl stops the transfer (and closes its connection).
        case abort
        /// The final response's head is complete: deliver it to a streaming caller, and resume an upload paused
        /// for its producer if `resumeSend` (libcurl 7.88 never reports a send-paused transfer done).
        case finalResponse(resumeSend: Bool)
    }

    enum RequestStartAction: Sendable, Equatable {
        /// Write the request.
        case proceed
        /// Refuse this connection (`CURL_PREREQFUNC_ABORT`); the completion then retries on a fresh one.
        case abandonConnection
    }

    /// What the shell found on a reused HTTP/1 connection just before the request goes out.
    enum ConnectionCheck: Sendable, Equatable {
        /// Not checked (a new connection, or a multiplexed one whose pending frames are libcurl's business).
        case notChecked
        /// Nothing waiting: the connection is as the last response left it.
        case clean
        /// Bytes waiting, or the peer's end of stream: not usable.
        case unreadBytesOrClosed
    }

    /// The facts of a failed or finished transfer that decide whether it goes out again.
    struct CompletionFacts: Sendable, Equatable {
        /// libcurl said the connection failed under the request (send/receive error, nothing received, HTTP/2
        /// framing or stream error): the kind of failure a dead pooled connection causes.
        var connectionFailed: Bool
        /// The transfer opened no connection of its own: it was handed a pooled one.
        var usedPooledConnection: Bool
        /// Request bytes libcurl wrote (head and body); 0 means the server cannot have seen the request.
        var requestBytesWritten: Int64
        /// A method RFC 9110 §9.2.2 calls idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE).
        var isIdempotent: Bool
        /// The body can be sent again from its start (none, bytes, a file, a form of those).
        var bodyIsReplayable: Bool
        /// The caller already holds the response head (a streamed response): nothing can be sent again then.
        var headDelivered: Bool

        init(
            connectionFailed: Bool, usedPooledConnection: Bool, requestBytesWritten: Int64, isIdempotent: Bool,
            bodyIsReplayable: Bool, headDelivered: Bool = false
        ) {
            self.connectionFailed = connectionFailed
            self.usedPooledConnection = usedPooledConnection
            self.requestBytesWritten = requestBytesWritten
            self.isIdempotent = isIdempotent
            self.bodyIsReplayable = bodyIsReplayable
            self.headDelivered = headDelivered
        }
    }

    private(set) var state: State = .created(cancelRequested: false)
    /// Set when a callback stopped the transfer, read when libcurl reports the failure that caused.
    private(set) var stopCause: StopCause?
    /// Whether a callback paused each direction (`CURL_READFUNC_PAUSE` / `CURL_WRITEFUNC_PAUSE`) and it waits for
    /// the body's producer or the response's consumer. A paused transfer is not idle.
    private(set) var sendPaused = false
    private(set) var receivePaused = false
    /// Whether the final response's header block has arrived (in this attempt).
    private(set) var responseStarted = false
    /// Whether any byte of a response (a header line or body) arrived in this attempt: past that the server saw
    /// the request, and only an idempotent one with a replayable body may be sent again.
    private(set) var responseBytesSeen = false
    /// Whether a byte of a response body arrived (what a caller may already have been handed).
    private(set) var bodyBytesSeen = false
    /// How many times the request went out again on a fresh connection (at most once).
    private(set) var freshConnectionRetries = 0

    // The framing of the header block being received.
    private var blockContentLength: Int64?
    private var blockIsChunked = false

    // The idle clock: nanoseconds on the loop's clock. `idleTimeout` 0 means none.
    private(set) var idleTimeout: UInt64 = 0
    private(set) var lastActivity: UInt64 = 0
    /// Whether the idle clock runs: only once the request is on its way. Before that (waiting for a free
    /// connection, resolving, connecting) the connect and total timeouts apply, not the idle one.
    private(set) var idleClockStarted = false

    // MARK: lifecycle

    /// The loop picked the transfer up.
    mutating func submitted(loopIsShuttingDown: Bool) -> StartAction {
        switch state {
        case .created(let cancelRequested):
            if cancelRequested {
                state = .finished
                return .fail(.cancelled)
            }
            if loopIsShuttingDown {
                state = .finished
                return .fail(.clientShutdown)
            }
            state = .running
            return .start
        case .running, .finished:
            // A transfer is submitted once; a second submission must not resume or restart it.
            return .ignore
        }
    }

    /// The transfer never reached a loop (the client or its loop had stopped, or never started): it ends here,
    /// with `reason` unless the caller had already cancelled.
    mutating func rejected(because reason: Failure = .clientShutdown) -> StartAction {
        switch state {
        case .created(let cancelRequested):
            state = .finished
            return .fail(cancelRequested ? .cancelled : reason)
        case .running, .finished:
            return .ignore
        }
    }

    /// Configuring or adding the easy handle failed; the caller gets that error.
    mutating func startFailed() -> CompletionAction {
        guard state == .running else { return .ignore }
        state = .finished
        return .finish
    }

    /// The calling task was cancelled.
    mutating func cancelRequested() -> StopAction {
        stop(with: .cancelled, markIfCreated: true)
    }

    /// The engine's deadline check found a running transfer past its idle or total deadline.
    mutating func deadlinePassed(_ kind: CurlewError.TimeoutKind) -> StopAction {
        stop(with: .timeout(kind), markIfCreated: false)
    }

    /// The loop could not watch the transfer's socket.
    mutating func socketUnwatchable() -> StopAction {
        stop(with: .unwatchableSocket, markIfCreated: false)
    }

    /// libcurl refused to resume the transfer after a pause.
    mutating func resumeFailed(curlCode: Int) -> StopAction {
        stop(with: .resumeFailed(curlCode), markIfCreated: false)
    }

    /// The client is shutting down.
    mutating func shutdown() -> StopAction {
        stop(with: .abortedByShutdown, markIfCreated: false)
    }

    /// libcurl reported the transfer done, successfully (`facts` nil) or not.
    ///
    /// A failure goes out once more on a fresh connection when the connection it was given turned out dead or
    /// unusable before the caller got any part of a response, and either the server provably never saw the request
    /// (the engine refused the connection before writing, or nothing was written and nothing came back) or the
    /// request is idempotent with a body that can be sent again. An idempotent request whose response head arrived
    /// but no byte of its body (a server that drops the streams its GOAWAY announced, after their HEADERS) goes out
    /// again too: the engine still holds that head, the caller has seen nothing. Never twice, never once a body
    /// byte arrived or a streamed head was handed over.
    mutating func curlCompleted(failure facts: CompletionFacts? = nil) -> CompletionAction {
        guard state == .running else { return .ignore }
        if let facts, freshConnectionRetries == 0, !bodyBytesSeen, !facts.headDelivered {
            let connectionWasUnusable = stopCause == .staleConnection
            let deadPooledConnection = stopCause == nil && facts.connectionFailed && facts.usedPooledConnection
            let serverCannotHaveActed = connectionWasUnusable || (facts.requestBytesWritten == 0 && !responseBytesSeen)
            let safeToRepeat = facts.isIdempotent && facts.bodyIsReplayable
            if (connectionWasUnusable || deadPooledConnection) && (serverCannotHaveActed || safeToRepeat) {
                freshConnectionRetries += 1
                beginAttempt()
                return .retryOnFreshConnection
            }
        }
        state = .finished
        return .finish
    }

    private mutating func stop(with failure: Failure, markIfCreated: Bool) -> StopAction {
        switch state {
        case .created:
            if markIfCreated { state = .created(cancelRequested: true) }
            return .none
        case .running:
            state = .finished
            return .removeAndFail(failure)
        case .finished:
            return .none
        }
    }

    /// Forgets what the last attempt saw, for a request sent again.
    private mutating func beginAttempt() {
        stopCause = nil
        responseStarted = false
        responseBytesSeen = false
        bodyBytesSeen = false
        sendPaused = false
        receivePaused = false
        blockContentLength = nil
        blockIsChunked = false
    }

    // MARK: requests on connections

    /// libcurl is about to write a request (the first, or one after a redirect) on a connection.
    ///
    /// libcurl starts every request unpaused, whatever the pause bits of the previous one: the machine forgets
    /// them here, so a later resume does not act on a stale bit.
    mutating func requestStarting(connection: ConnectionCheck) -> RequestStartAction {
        sendPaused = false
        receivePaused = false
        if connection == .unreadBytesOrClosed {
            stopCause = .staleConnection
            return .abandonConnection
        }
        return .proceed
    }

    /// The error that fails the transfer when the engine's own stop caused libcurl's failure.
    var isStaleConnectionFailure: Bool { stopCause == .staleConnection }

    // MARK: response head

    /// A status line arrived: a new header block starts (100 Continue, a redirect, the final response).
    mutating func statusLineReceived() {
        responseBytesSeen = true
        blockContentLength = nil
        blockIsChunked = false
    }

    /// A `Content-Length` field of the current header block; `value` is nil when it is not a number.
    mutating func contentLengthReceived(_ value: Int64?) -> HeaderBlockAction {
        guard let value else {
            return fail(.ambiguousFraming("the response's Content-Length is not a number"))
        }
        if let earlier = blockContentLength, earlier != value {
            return fail(
                .ambiguousFraming("the response has conflicting Content-Length values (\(earlier) and \(value))"))
        }
        blockContentLength = value
        return blockIsChunked ? failContentLengthWithTransferEncoding() : .accept
    }

    /// A `Transfer-Encoding` field of the current header block.
    mutating func transferEncodingReceived() -> HeaderBlockAction {
        blockIsChunked = true
        return blockContentLength != nil ? failContentLengthWithTransferEncoding() : .accept
    }

    private mutating func failContentLengthWithTransferEncoding() -> HeaderBlockAction {
        fail(.ambiguousFraming("the response has both Content-Length and Transfer-Encoding (RFC 9112 §6.3)"))
    }

    private mutating func fail(_ cause: StopCause) -> HeaderBlockAction {
        stopCause = cause
        return .abort
    }

    /// A header block ended with `status`.
    ///
    /// - Parameters:
    ///   - followsRedirect: whether libcurl will follow this response (a 3xx with redirects on): not final.
    ///   - sentExpectContinue: whether the request carries the engine's own `Expect: 100-continue`.
    mutating func headerBlockEnded(status: Int, followsRedirect: Bool, sentExpectContinue: Bool) -> HeaderBlockAction {
        if sentExpectContinue && status == 417 {
            // libcurl 7.88 would resend the request without end: it drops only an Expect header it added itself.
            return fail(.expectationRejected)
        }
        if status < 200 || followsRedirect || status == 417 { return .accept }
        responseStarted = true
        return .finalResponse(resumeSend: sendPaused)
    }

    // MARK: bodies and pauses

    /// A response body byte arrived.
    @inline(__always)
    mutating func bodyReceived() {
        responseBytesSeen = true
        bodyBytesSeen = true
    }

    /// The response body passed its limit; the write callback stops the transfer.
    mutating func bodyLimitExceeded() {
        stopCause = .bodyLimitExceeded
    }

    /// A callback paused a direction: the producer has no bytes yet, or the consumer no room.
    mutating func paused(_ direction: PauseDirection) {
        switch direction {
        case .send: sendPaused = true
        case .receive: receivePaused = true
        }
    }

    /// The producer or consumer of a paused direction is ready again.
    mutating func resume(_ direction: PauseDirection) -> ResumeAction {
        guard state == .running else { return .none }
        switch direction {
        case .send:
            guard sendPaused else { return .none }
            sendPaused = false
        case .receive:
            guard receivePaused else { return .none }
            receivePaused = false
        }
        return .unpause(stillPausedSend: sendPaused, stillPausedReceive: receivePaused)
    }

    // MARK: the idle clock

    /// Sets the idle timeout (0 for none) at the transfer's start.
    mutating func startIdleClock(timeout: UInt64, now: UInt64) {
        idleTimeout = timeout
        idleClockStarted = false
        // The idle clock starts once the request is on its way; look for that in a quarter period.
        lastActivity = now - min(now, timeout - timeout / 4)
    }

    /// Bytes moved (a callback ran).
    @inline(__always)
    mutating func activity(at now: UInt64) {
        lastActivity = now
        idleClockStarted = true
    }

    /// When the idle deadline falls, as of the last activity; `.max` without an idle timeout.
    var idleDeadline: UInt64 {
        idleTimeout == 0 ? .max : lastActivity &+ idleTimeout
    }

    /// Called when the idle deadline seems to have passed; returns whether it really has.
    ///
    /// The idle clock starts with the first byte a callback sees, or when a check finds the request sent
    /// (`requestSent`, evaluated only then, checked every quarter period); until then it is held back, since
    /// waiting for a connection is not idleness. A silent server is thus detected between 1 and 1.25 idle
    /// periods after the request went out.
    mutating func idleDeadlinePassed(now: UInt64, requestSent: @autoclosure () -> Bool) -> Bool {
        guard idleTimeout != 0, idleDeadline <= now else { return false }
        if receivePaused || (sendPaused && !responseStarted) {
            // Waiting for our own producer or consumer is not the server being silent.
            lastActivity = now
            return false
        }
        if !idleClockStarted {
            if requestSent() {
                idleClockStarted = true
                lastActivity = now
            } else {
                // Look again in a quarter period, so the clock starts at most that late.
                lastActivity = now - min(now, idleTimeout - idleTimeout / 4)
            }
            return false
        }
        return true
    }
}

extension TransferStateMachine.Failure {
    /// The error for a transfer the engine ended without libcurl's word, before `Transfer.error(for:)` adds what
    /// the easy handle knows (how far a timed-out transfer got, its metrics).
    var error: any Error {
        switch self {
        case .cancelled:
            CancellationError()
        case .clientShutdown:
            CurlewError(code: .clientShutdown, detail: "the client was shut down")
        case .unsupportedLibcurl(let reason):
            CurlewError(code: .unsupportedLibcurl, detail: reason)
        case .abortedByShutdown:
            CurlewError(code: .cancelled, detail: "the client was shut down while the request was running")
        case .timeout(.idle):
            CurlewError(code: .timeout(.idle), detail: "idle timeout: no data moved")
        case .timeout(let kind):
            CurlewError(code: .timeout(kind), detail: "\(kind.rawValue) timeout")
        case .unwatchableSocket:
            CurlewError(code: .transport, detail: "the event loop could not watch the transfer's socket")
        case .resumeFailed(let curlCode):
            CurlewError(
                code: .transport, detail: "libcurl could not resume the paused transfer", curlCode: curlCode,
                curlMessage: String(cString: curl_easy_strerror(CURLcode(rawValue: UInt32(curlCode)))))
        }
    }
}
