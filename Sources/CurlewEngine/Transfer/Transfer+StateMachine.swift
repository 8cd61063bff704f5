import CLibCurl

/// The life of one transfer, as a value that does no I/O: events in, actions out.
///
/// Every event is delivered on the transfer's loop, so the machine needs no lock; what makes completion
/// and cancellation resolve exactly once is that ``State/finished`` absorbs every later event.
///
/// Besides the lifecycle it owns every decision libcurl's callbacks used to make on their own, each returned as an
/// action that carries what the callback tells libcurl: the body limits, pausing either direction, the framing
/// checks on each header block, when a streaming caller gets the head, withholding credentials from another
/// origin, the connection, idle and total deadlines, why the engine stopped a transfer (``StopCause``, including a
/// failed request body or response sink), and whether a failed transfer goes out once more on a fresh connection. The
/// shell (`Transfer`, `MultiCore`) reads libcurl's facts, feeds them in, and carries out what comes back. See
/// `docs/design/0007-connection-reuse-and-transfer-state.md`.
struct TransferStateMachine: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// Built, not yet on a loop. A cancellation may already have been requested.
        case created(cancelRequested: Bool)
        /// Its easy handle is in the multi handle (or about to be), sending the request this many times.
        case running(Attempt)
        /// Resolved; the continuation has been resumed. Keeps why the engine stopped the last attempt, for the error.
        case finished(stopCause: StopCause?)
    }

    /// What the transfer was set up with: fixed before it starts, read by every decision.
    struct Setup: Sendable, Equatable {
        /// The most response body bytes accepted, wherever they go.
        var bodyLimit: Int64 = .max
        /// The most body bytes kept in memory: a collected body, or the body of a download that failed.
        var inMemoryBodyLimit: Int64 = .max
        /// The bound on a content-encoded body, when it is smaller than ``bodyLimit``.
        var decodedBodyLimit: Int64?
        /// Whether the engine decodes content-encoded responses (decompression is on): their heads are then read.
        var decodesContent = false
        /// Nanoseconds without a byte moving before the transfer fails; 0 for none.
        var idleTimeout: UInt64 = 0
        /// When the total timeout falls, on the loop's clock; `.max` for none.
        var totalDeadline: UInt64 = .max
        /// When the connect timeout falls for a transfer that has no connection yet, counted from submission like
        /// libcurl 8's own connect timer (7.88's restarts when a transfer leaves the queue for a free connection);
        /// `.max` for none.
        var connectionDeadline: UInt64 = .max
        /// The connect timeout in nanoseconds (libcurl's default when the request sets none), for the connection
        /// deadline of a later request of the transfer: a retry on a fresh connection, a redirect libcurl follows;
        /// `.max` for none.
        var connectTimeout: UInt64 = .max

        /// When a request that has no connection from `start` on must have one: `start` plus the connect timeout,
        /// or `.max` (no deadline) when that is too far to represent. The one rule for a transfer's first request
        /// (from submission) and its later ones (from a retry or a redirect's head).
        func connectionDeadline(forWaitFrom start: UInt64) -> UInt64 {
            let (deadline, overflow) = start.addingReportingOverflow(connectTimeout)
            return overflow ? .max : deadline
        }
        /// Whether the request carries the engine's own `Expect: 100-continue`.
        var sentExpectContinue = false
        /// Whether libcurl follows redirects for this request (a 3xx head is then not the final one).
        var followsRedirects = false
        /// Whether the request carries a field `CredentialPolicy` withholds from other origins.
        var carriesCredentials = false
        /// Whether the request carries fields only a proxy gets (`CURLOPT_PROXYHEADER`): withheld from a redirect to
        /// another origin before libcurl connects for it, since the other origin may be reached through another proxy.
        var hasProxyHeaderLines = false
        /// Whether the request has a body whose producer may pause the upload.
        var hasRequestBody = false
        /// Whether a streaming caller waits for the response head before the body.
        var streamsResponse = false
    }

    /// One sending of the request (a retry on a fresh connection starts another) and what came back of it.
    struct Attempt: Sendable, Equatable {
        enum Sending: Sendable, Equatable {
            case sending
            /// The read callback paused the upload (`CURL_READFUNC_PAUSE`): the producer has no bytes yet.
            case waitingForProducer
        }

        enum Receiving: Sendable, Equatable {
            /// No final response head yet (maybe interim or redirect heads).
            case awaitingHead
            /// The final head arrived, or body bytes did.
            case body
            /// The write callback paused the download (`CURL_WRITEFUNC_PAUSE`): the consumer has no room.
            case bodyWaitingForConsumer
        }

        var send = Sending.sending
        var receive = Receiving.awaitingHead
        /// The framing of the header block being received.
        var framing = Framing()
        var idle: IdleClock
        /// Set when a callback stopped the transfer, read when libcurl reports the failure that caused. The first
        /// cause stands.
        var stopCause: StopCause?
        /// Whether any byte of a response (a header line or body) arrived: past that the server saw the request,
        /// and only an idempotent one with a replayable body may be sent again.
        var responseBytesSeen = false
        /// Whether a byte of a response body arrived (what a caller may already have been handed).
        var bodyBytesSeen = false
        /// Body bytes accepted, for the limits.
        var bodyBytes: Int64 = 0
        /// The body limit in force: ``Setup/bodyLimit``, lowered for a content-encoded body.
        var bodyLimit: Int64
        /// Whether a redirect of this attempt went to an origin the request's credentials may not go to
        /// (`CredentialPolicy`), even if a later one came back: from then on its requests go out without the fields
        /// the policy withholds.
        var leftRequestedOrigin = false
        /// Whether a redirect of this attempt took the proxy's fields (``Setup/hasProxyHeaderLines``) off: the
        /// later hops of the attempt go without them.
        var proxyHeaderLinesWithheld = false
        /// Whether a streaming caller holds the response head: nothing can be sent again then.
        var headDelivered = false

        init(setup: Setup, idle: IdleClock) {
            self.idle = idle
            self.bodyLimit = setup.bodyLimit
        }
    }

    /// The `Content-Length` and `Transfer-Encoding` seen in the current header block, and whether it names a
    /// content coding the engine may decode.
    struct Framing: Sendable, Equatable {
        var contentLength: Int64?
        var isChunked = false
        var namesContentCoding = false
        /// Whether the block has a `Location` with a value: libcurl follows a 3xx head only with one.
        var hasLocation = false
    }

    /// The idle deadline's clock, in nanoseconds on the loop's clock.
    struct IdleClock: Sendable, Equatable {
        /// 0: no idle timeout.
        var timeout: UInt64
        var lastActivity: UInt64
        /// Whether the clock runs: only once the request is on its way. Before that (waiting for a free
        /// connection, resolving, connecting) the connect and total timeouts apply, not the idle one.
        var started = false

        /// A clock that first looks whether the request went out a quarter period after `now`.
        init(timeout: UInt64, now: UInt64) {
            self.timeout = timeout
            self.lastActivity = 0
            lookAgainInAQuarterPeriod(now: now)
        }

        var deadline: UInt64 { timeout == 0 ? .max : lastActivity &+ timeout }

        mutating func lookAgainInAQuarterPeriod(now: UInt64) {
            lastActivity = now - min(now, timeout - timeout / 4)
        }
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

    enum DeadlineAction: Sendable, Equatable {
        /// No deadline has passed: look again at this time (`.max`: never).
        case checkAgain(at: UInt64)
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
        /// The total timeout had passed before the loop picked the transfer up.
        case totalTimeoutBeforeStart
        /// libcurl gave the transfer a socket the loop cannot watch (descriptor exhaustion).
        case unwatchableSocket
        /// Resuming a paused transfer failed (`curl_easy_pause`); libcurl's code is attached.
        case resumeFailed(Int)
        /// libcurl could not make an easy handle.
        case noEasyHandle
        /// libcurl rejected an option of the request (`CURLcode`).
        case optionRejected(Int)
        /// `curl_multi_add_handle` refused the transfer (`CURLMcode`).
        case multiRefused(Int)
        /// The request cannot be sent as asked (its body could not be opened, its form's boundary conflicts, a
        /// stream announced as empty produced a byte or failed).
        indirect case invalidRequest(CurlewError)
    }

    /// Why the engine told libcurl to stop a transfer from inside a callback; libcurl then reports a generic
    /// failure ("write error", "aborted by callback"), and this says what really happened.
    enum StopCause: Sendable, Equatable {
        /// The response body passed this limit, in bytes.
        case bodyLimitExceeded(Int64)
        /// The server answered the engine's `Expect: 100-continue` with 417.
        case expectationRejected
        /// The response's framing is ambiguous: conflicting `Content-Length` values, or `Content-Length` together
        /// with `Transfer-Encoding` (RFC 9112 §6.3). The connection is closed, never reused.
        case ambiguousFraming(String)
        /// A reused HTTP/1 connection had unread bytes (or its end) waiting before the request was written: what
        /// is there belongs to no request of ours, so the connection is closed and the request goes out on another.
        case staleConnection
        /// The request body could not be read or rewound (a file that changed, a producer that failed). Indirect,
        /// as is ``sinkFailed(_:)``: an error inline would make every ``Attempt`` (copied on each callback event)
        /// hundreds of bytes larger for a cause that is almost never there.
        indirect case requestBodyFailed(CurlewError)
        /// The response body could not be stored (a download's file could not be written).
        indirect case sinkFailed(CurlewError)
        /// The response body's content coding could not be decoded, or ended before the body did.
        case undecodableBody(String)
    }

    enum ResumeAction: Sendable, Equatable {
        /// The direction was not paused (or the transfer is over): nothing to tell libcurl.
        case none
        /// Call `curl_easy_pause` with these `CURLPAUSE_*` bits still set.
        case unpause(stillPausedSend: Bool, stillPausedReceive: Bool)
    }

    enum HeaderLineAction: Sendable, Equatable {
        /// Keep going.
        case accept
        /// Return 0 from the header callback: libcurl stops the transfer (and closes its connection).
        case abort
        /// The block ended: read its status (and whether the response is content-encoded, if asked) and call
        /// ``TransferStateMachine/headEnded(status:isContentEncoded:now:)``.
        case readHead(contentEncoding: Bool)
    }

    enum HeadAction: Sendable, Equatable {
        /// Keep going.
        case accept
        /// Return 0 from the header callback.
        case abort
        /// The final response's head is complete: resume an upload paused for its producer if `resumeSend`
        /// (libcurl 7.88 never reports a send-paused transfer done), and hand the head to a streaming caller if
        /// `deliverHead`, once libcurl has returned.
        case finalResponse(resumeSend: Bool, deliverHead: Bool)
        /// A 417 to an `Expect` the engine did not send, or a 3xx without a `Location` of a request that follows
        /// redirects, while the upload is paused for its producer: resume the upload, or libcurl 7.88 never reports
        /// the transfer done. The machine does not take either for the final response (libcurl keeps both as final):
        /// a streaming caller gets the head with the first body byte.
        case resumeSend
        /// A redirect libcurl follows: its next request waits for a connection again (the machine's connection
        /// deadline counts from now), and an upload paused for its producer is resumed if `resumeSend`, as for
        /// ``resumeSend``.
        case redirectFollowed(resumeSend: Bool)
    }

    enum BodyAction: Sendable, Equatable {
        /// Take the bytes; first hand the head to a streaming caller, once libcurl has returned, if `deliverHead`.
        case accept(deliverHead: Bool)
        /// Return `CURL_WRITEFUNC_PAUSE`: libcurl keeps the bytes and offers them again once resumed.
        case pause
        /// Return 0: libcurl stops the transfer with a write error; the cause is recorded.
        case abort
    }

    enum RequestStartAction: Sendable, Equatable {
        /// Write the request.
        case proceed
        /// Write the request without the credential fields, and take the proxy's fields off if opening the hop's
        /// socket did not (a pooled connection): a redirect left the request's origin. libcurl reads the header list
        /// right after the callback.
        case proceedWithoutCredentials
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

    /// The facts of a failed transfer that decide whether it goes out again.
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
    }

    let setup: Setup
    /// Where the transfer is in its life; with ``current``, what ``state`` reads.
    private var phase: Phase = .created(cancelRequested: false)
    /// The attempt under way while running; once finished, the last one (its stop cause explains the failure).
    /// Kept apart from the phase so each event changes it in place: as an enum's payload it was copied out and
    /// back for every header line and body callback, some 1,000 instructions per request in a profile of S8.
    private var current: Attempt

    private enum Phase: Sendable, Equatable {
        case created(cancelRequested: Bool)
        case running
        case finished
    }

    /// The transfer's state, as the machine's tests and the shell see it.
    var state: State {
        switch phase {
        case .created(let cancelRequested): .created(cancelRequested: cancelRequested)
        case .running: .running(current)
        case .finished: .finished(stopCause: current.stopCause)
        }
    }
    /// How many times the request went out again on a fresh connection (at most once).
    private(set) var freshConnectionRetries = 0
    /// Whether a redirect of the last attempt went to another origin than the request's (``Attempt/leftRequestedOrigin``).
    var leftRequestedOrigin: Bool {
        if case .created = phase { false } else { current.leftRequestedOrigin }
    }
    /// When the current request must have a connection: ``Setup/connectionDeadline`` for the first one, the connect
    /// timeout from when a retry or a followed redirect began for a later one; `.max` once a request has started on
    /// a connection.
    private(set) var connectionDeadline: UInt64 = .max

    init(setup: Setup = Setup()) {
        self.setup = setup
        current = Attempt(setup: setup, idle: IdleClock(timeout: setup.idleTimeout, now: 0))
    }

    /// Machines are equal when what they decide with is: the attempt of a machine that never ran is a placeholder.
    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.setup == rhs.setup && lhs.state == rhs.state && lhs.freshConnectionRetries == rhs.freshConnectionRetries
            && lhs.connectionDeadline == rhs.connectionDeadline
    }

    /// Why the engine stopped the transfer from inside a callback, if it did: the attempt under way's cause, or the
    /// last attempt's once finished.
    var stopCause: StopCause? {
        switch phase {
        case .running, .finished: current.stopCause
        case .created: nil
        }
    }

    /// Whether the transfer is resolved.
    var isFinished: Bool {
        phase == .finished
    }

    /// Resolves the transfer, keeping the cause of a stop.
    private mutating func finish() {
        phase = .finished
    }

    /// The attempt under way; nil unless running.
    var attempt: Attempt? {
        phase == .running ? current : nil
    }

    /// Runs `change` on the attempt under way; `otherwise` when the transfer is not running.
    @inline(__always)
    private mutating func withAttempt<Result>(
        otherwise: Result, _ change: (inout Attempt) -> Result
    ) -> Result {
        guard phase == .running else { return otherwise }
        return change(&current)
    }

    // MARK: lifecycle

    /// The loop picked the transfer up at `now` (its clock).
    mutating func submitted(now: UInt64, loopIsShuttingDown: Bool) -> StartAction {
        switch phase {
        case .created(let cancelRequested):
            finish()
            if cancelRequested { return .fail(.cancelled) }
            if loopIsShuttingDown { return .fail(.clientShutdown) }
            if setup.totalDeadline <= now { return .fail(.totalTimeoutBeforeStart) }
            connectionDeadline = setup.connectionDeadline
            current = Attempt(setup: setup, idle: IdleClock(timeout: setup.idleTimeout, now: now))
            phase = .running
            return .start
        case .running, .finished:
            // A transfer is submitted once; a second submission must not resume or restart it.
            return .ignore
        }
    }

    /// The transfer never reached a loop (the client or its loop had stopped, or never started): it ends here,
    /// with `reason` unless the caller had already cancelled.
    mutating func rejected(because reason: Failure = .clientShutdown) -> StartAction {
        switch phase {
        case .created(let cancelRequested):
            finish()
            return .fail(cancelRequested ? .cancelled : reason)
        case .running, .finished:
            return .ignore
        }
    }

    /// Configuring or adding the easy handle failed, or a retry could not go out: the caller gets the failure.
    mutating func startFailed() -> CompletionAction {
        guard phase == .running else { return .ignore }
        finish()
        return .finish
    }

    /// The calling task was cancelled.
    mutating func cancelRequested() -> StopAction {
        stop(with: .cancelled, markIfCreated: true)
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
    /// unusable before the caller got any part of a response, and either the server provably never acted on the
    /// transfer (no response came back in this attempt, a redirect's included, and the engine refused the connection
    /// before writing or nothing was written) or the request is idempotent with a body that can be sent again. An idempotent request whose response head arrived
    /// but no byte of its body (a server that drops the streams its GOAWAY announced, after their HEADERS) goes out
    /// again too: the engine still holds that head, the caller has seen nothing. Never twice, never once a body
    /// byte arrived or a streamed head was handed over.
    ///
    /// The retry waits for a connection as the first request did: for the connect timeout, counted from `now`.
    mutating func curlCompleted(failure facts: CompletionFacts? = nil, now: UInt64) -> CompletionAction {
        guard phase == .running else { return .ignore }
        let attempt = current
        if let facts, freshConnectionRetries == 0, !attempt.bodyBytesSeen, !attempt.headDelivered {
            let connectionWasUnusable = attempt.stopCause == .staleConnection
            let deadPooledConnection = attempt.stopCause == nil && facts.connectionFailed && facts.usedPooledConnection
            // A refused connection proves only that its own request was not written: an earlier request of the
            // transfer that got an answer (a POST answered 303, whose GET then met a dirty connection) was acted on.
            let serverCannotHaveActed =
                (connectionWasUnusable || facts.requestBytesWritten == 0) && !attempt.responseBytesSeen
            let safeToRepeat = facts.isIdempotent && facts.bodyIsReplayable
            if (connectionWasUnusable || deadPooledConnection) && (serverCannotHaveActed || safeToRepeat) {
                freshConnectionRetries += 1
                // A new attempt forgets what the last one saw; the idle clock runs on.
                current = Attempt(setup: setup, idle: attempt.idle)
                waitForConnection(from: now)
                return .retryOnFreshConnection
            }
        }
        finish()
        return .finish
    }

    private mutating func stop(with failure: Failure, markIfCreated: Bool) -> StopAction {
        switch phase {
        case .created:
            if markIfCreated { phase = .created(cancelRequested: true) }
            return .none
        case .running:
            finish()
            return .removeAndFail(failure)
        case .finished:
            return .none
        }
    }

    // MARK: deadlines

    /// The current request has no connection yet, from `now`: it must have one within the connect timeout.
    private mutating func waitForConnection(from now: UInt64) {
        connectionDeadline = setup.connectionDeadline(forWaitFrom: now)
    }

    /// The earliest of the connection, idle and total deadlines, as of the last activity.
    var nextDeadline: UInt64 {
        min(setup.totalDeadline, connectionDeadline, attempt?.idle.deadline ?? .max)
    }

    /// How long libcurl's own connect timer may report a connect timeout after the engine's connection deadline
    /// (it starts when libcurl first runs the transfer, a moment after submission), so libcurl's own words reach
    /// the caller whenever it keeps the same bound.
    static let connectTimerGrace: UInt64 = 200_000_000

    /// The loop's deadline check found `now` at or past ``nextDeadline`` as it last read it.
    ///
    /// The idle clock starts with the first byte a callback sees, or when a check finds the request sent
    /// (`requestSent`, libcurl's pre-transfer time, looked at every quarter period until then); until then it is
    /// held back, since waiting for a connection is not idleness. A silent server is thus detected between 1 and
    /// 1.25 idle periods after the request went out. Waiting for our own producer or consumer is not the server
    /// being silent either.
    ///
    /// The connect timeout bounds getting a connection, the wait for a free one included (as libcurl 8 counts it;
    /// 7.88 restarts its timer when the wait ends): a transfer still waiting when it falls fails with
    /// ``CurlewError/TimeoutKind/waitingForConnection``; one libcurl is resolving or connecting for
    /// (`connectionAttemptStarted`) fails with ``CurlewError/TimeoutKind/connect``, unless libcurl reports that
    /// itself within ``connectTimerGrace``.
    mutating func deadlineCheck(
        now: UInt64, requestSent: Bool, connectionAttemptStarted: Bool = false
    )
        -> DeadlineAction
    {
        guard phase == .running else { return .checkAgain(at: .max) }
        if setup.totalDeadline <= now {
            finish()
            return .removeAndFail(.timeout(.total))
        }
        if connectionDeadline <= now {
            if !connectionAttemptStarted {
                finish()
                return .removeAndFail(.timeout(.waitingForConnection))
            }
            if connectionDeadline &+ Self.connectTimerGrace <= now {
                finish()
                return .removeAndFail(.timeout(.connect))
            }
        }
        if current.idle.deadline <= now {
            if current.receive == .bodyWaitingForConsumer
                || (current.send == .waitingForProducer && current.receive == .awaitingHead)
            {
                current.idle.lastActivity = now
            } else if !current.idle.started {
                if requestSent {
                    current.idle.started = true
                    current.idle.lastActivity = now
                } else {
                    // Look again in a quarter period, so the clock starts at most that late.
                    current.idle.lookAgainInAQuarterPeriod(now: now)
                }
            } else {
                finish()
                return .removeAndFail(.timeout(.idle))
            }
        }
        // Later than now whatever the idle timeout (one of a few nanoseconds included), so a check loop ends.
        let connectionCheck =
            connectionDeadline > now ? connectionDeadline : connectionDeadline &+ Self.connectTimerGrace
        return .checkAgain(at: max(min(setup.totalDeadline, connectionCheck, current.idle.deadline), now + 1))
    }

    /// Bytes moved (a callback ran).
    @inline(__always)
    mutating func activity(at now: UInt64) {
        withAttempt(otherwise: ()) {
            $0.idle.lastActivity = now
            $0.idle.started = true
        }
    }

    // MARK: requests on connections

    /// libcurl is about to write a request (the first, or one after a redirect) on a connection.
    ///
    /// libcurl starts every request unpaused, whatever the pause bits of the previous one: the machine forgets
    /// them here, so a later resume does not act on a stale bit. A redirect to an origin the credentials may not
    /// go to (`redirectTarget`, `CredentialPolicy`) sends the request without them, and every later one too.
    mutating func requestStarting(
        connection: ConnectionCheck, redirectTarget: String? = nil, requestURL: String = ""
    ) -> RequestStartAction {
        let carriesCredentials = setup.carriesCredentials
        let hasProxyHeaderLines = setup.hasProxyHeaderLines
        if phase == .running { connectionDeadline = .max }
        return withAttempt(otherwise: .abandonConnection) { attempt in
            attempt.send = .sending
            attempt.receive = .awaitingHead
            if connection == .unreadBytesOrClosed {
                if attempt.stopCause == nil { attempt.stopCause = .staleConnection }
                return .abandonConnection
            }
            // Checked for every redirect, not only for requests with credentials: the response says whether it came
            // back from elsewhere (``TransferMetrics/leftRequestedOrigin``).
            if !attempt.leftRequestedOrigin, let redirectTarget,
                !CredentialPolicy.mayCarryCredentials(from: requestURL, to: redirectTarget)
            {
                attempt.leftRequestedOrigin = true
                // A hop on a new connection took the proxy's fields off when it opened it
                // (``connectionOpening(redirectTarget:requestURL:)``); one on a pooled connection, which a proxy
                // forwards without a CONNECT, takes them off here.
                attempt.proxyHeaderLinesWithheld = attempt.proxyHeaderLinesWithheld || hasProxyHeaderLines
                if carriesCredentials { return .proceedWithoutCredentials }
            }
            return .proceed
        }
    }

    /// libcurl opens a socket for the transfer (the socket-option callback): for a redirect hop, `redirectTarget`
    /// is the URL libcurl follows. When the hop leaves the request's origin and the request has fields only a proxy
    /// gets (``Setup/hasProxyHeaderLines``), they come off now: a proxy's CONNECT for the hop is written on this
    /// socket before the pre-request callback runs, and the other origin may be reached through another proxy.
    /// Only libcurl's own reading of the target decides (a `Location` read from the head could differ from the one
    /// libcurl follows). Returns whether to take them off; they stay off for the attempt.
    mutating func connectionOpening(redirectTarget: String?, requestURL: String) -> Bool {
        guard setup.hasProxyHeaderLines, let redirectTarget else { return false }
        return withAttempt(otherwise: false) { attempt in
            guard !attempt.proxyHeaderLinesWithheld,
                !CredentialPolicy.mayCarryCredentials(from: requestURL, to: redirectTarget)
            else { return false }
            attempt.proxyHeaderLinesWithheld = true
            return true
        }
    }

    // MARK: response head

    /// A line of a response head arrived (libcurl's header callback).
    @inline(__always)
    mutating func headerLineReceived(_ line: HeaderLine) -> HeaderLineAction {
        switch line {
        case .otherField:
            return .accept
        case .statusLine:
            // A new header block starts (100 Continue, a redirect, the final response), with the setup's limit: a
            // content-encoded redirect's lower one is not the final response's.
            let bodyLimit = setup.bodyLimit
            return withAttempt(otherwise: .accept) {
                $0.responseBytesSeen = true
                $0.framing = Framing()
                $0.bodyLimit = bodyLimit
                return .accept
            }
        case .contentLength(let value):
            return withAttempt(otherwise: .accept) { attempt in
                guard let value else {
                    return Self.stop(&attempt, .ambiguousFraming("the response's Content-Length is not a number"))
                }
                if let earlier = attempt.framing.contentLength, earlier != value {
                    return Self.stop(
                        &attempt,
                        .ambiguousFraming(
                            "the response has conflicting Content-Length values (\(earlier) and \(value))"))
                }
                attempt.framing.contentLength = value
                return attempt.framing.isChunked ? Self.stopForContentLengthWithTransferEncoding(&attempt) : .accept
            }
        case .contentEncoding:
            guard setup.decodesContent else { return .accept }
            return withAttempt(otherwise: .accept) { attempt in
                attempt.framing.namesContentCoding = true
                return .accept
            }
        case .transferEncoding:
            return withAttempt(otherwise: .accept) { attempt in
                attempt.framing.isChunked = true
                return attempt.framing.contentLength != nil
                    ? Self.stopForContentLengthWithTransferEncoding(&attempt) : .accept
            }
        case .location:
            guard setup.followsRedirects else { return .accept }
            return withAttempt(otherwise: .accept) { attempt in
                attempt.framing.hasLocation = true
                return .accept
            }
        case .endOfBlock:
            // Only uploads, streamed responses, the engine's 417 check, content-encoded bodies and redirects libcurl
            // may follow care about the status (a getinfo call the plain GET path does without).
            guard phase == .running else { return .accept }
            let attempt = current
            let encoded = attempt.framing.namesContentCoding
            if encoded || setup.sentExpectContinue || setup.hasRequestBody
                || (setup.streamsResponse && !attempt.headDelivered)
                || (setup.followsRedirects && attempt.framing.hasLocation)
            {
                return .readHead(contentEncoding: encoded)
            }
            return .accept
        }
    }

    private static func stopForContentLengthWithTransferEncoding(_ attempt: inout Attempt) -> HeaderLineAction {
        stop(&attempt, .ambiguousFraming("the response has both Content-Length and Transfer-Encoding (RFC 9112 §6.3)"))
    }

    private static func stop(_ attempt: inout Attempt, _ cause: StopCause) -> HeaderLineAction {
        if attempt.stopCause == nil { attempt.stopCause = cause }
        return .abort
    }

    /// A header block ended with `status` at `now`; `isContentEncoded` when the response names a content coding the
    /// engine decodes (known only when decompression is on).
    ///
    /// A 3xx head with a `Location` is a redirect libcurl follows when the request follows redirects: the next
    /// request waits for a connection (a free one, or a new one to another origin) for the connect timeout from
    /// here, as the first one did from its submission. The redirect's own body, which libcurl reads and drops,
    /// counts towards that wait.
    mutating func headEnded(status: Int, isContentEncoded: Bool = false, now: UInt64) -> HeadAction {
        let setup = setup
        let action = withAttempt(otherwise: .accept) { attempt -> HeadAction in
            if isContentEncoded, let decodedLimit = setup.decodedBodyLimit {
                attempt.bodyLimit = min(attempt.bodyLimit, decodedLimit)
            }
            if setup.sentExpectContinue && status == 417 {
                // libcurl 7.88 would resend the request without end: it drops only an Expect header it added itself.
                if attempt.stopCause == nil { attempt.stopCause = .expectationRejected }
                return .abort
            }
            let followsRedirect = setup.followsRedirects && (300..<400).contains(status)
            if status < 200 { return .accept }
            let resumeSend = attempt.send == .waitingForProducer
            // Not a response the caller gets, but libcurl 7.88 reports nothing while the send side is paused: resumed,
            // it stops sending (an answer came before the end of the body) and follows the redirect (which fails on a
            // body it cannot send again) or ends with the 417. Paused, the request waited for the producer's next
            // write, or for ever.
            if followsRedirect && attempt.framing.hasLocation { return .redirectFollowed(resumeSend: resumeSend) }
            if followsRedirect || status == 417 { return resumeSend ? .resumeSend : .accept }
            if attempt.receive == .awaitingHead { attempt.receive = .body }
            let deliverHead = setup.streamsResponse && !attempt.headDelivered
            if deliverHead { attempt.headDelivered = true }
            return .finalResponse(resumeSend: resumeSend, deliverHead: deliverHead)
        }
        if case .redirectFollowed = action { waitForConnection(from: now) }
        return action
    }

    // MARK: bodies and pauses

    /// `count` response body bytes arrived; `keptInMemory` when they go to memory (a collected body, a failed
    /// download's explanation) rather than a consumer or a file.
    @inline(__always)
    mutating func bodyReceived(count: Int, keptInMemory: Bool) -> BodyAction {
        let setup = setup
        return withAttempt(otherwise: .abort) { attempt in
            attempt.responseBytesSeen = true
            attempt.bodyBytesSeen = true
            if attempt.receive == .awaitingHead { attempt.receive = .body }
            attempt.bodyBytes += Int64(count)
            let limit = keptInMemory ? min(attempt.bodyLimit, setup.inMemoryBodyLimit) : attempt.bodyLimit
            if attempt.bodyBytes > limit {
                if attempt.stopCause == nil { attempt.stopCause = .bodyLimitExceeded(limit) }
                return .abort
            }
            let deliverHead = setup.streamsResponse && !attempt.headDelivered
            if deliverHead { attempt.headDelivered = true }
            return .accept(deliverHead: deliverHead)
        }
    }

    /// The consumer had no room for the `count` bytes ``bodyReceived(count:keptInMemory:)`` accepted: libcurl keeps
    /// them and offers them again once resumed.
    mutating func bodyNotTaken(count: Int) -> BodyAction {
        withAttempt(otherwise: .abort) {
            $0.bodyBytes -= Int64(count)
            $0.receive = .bodyWaitingForConsumer
            return .pause
        }
    }

    /// The response body's content coding failed to decode (`detail` says how): the transfer stops.
    mutating func bodyUndecodable(_ detail: String) -> BodyAction {
        withAttempt(otherwise: .abort) {
            if $0.stopCause == nil { $0.stopCause = .undecodableBody(detail) }
            return .abort
        }
    }

    /// The response body could not be stored.
    mutating func sinkFailed(_ error: CurlewError) -> BodyAction {
        withAttempt(otherwise: .abort) {
            if $0.stopCause == nil { $0.stopCause = .sinkFailed(error) }
            return .abort
        }
    }

    /// The read callback's source answered; returns what the callback gives libcurl (a count, 0 at the end,
    /// `CURL_READFUNC_PAUSE` or `CURL_READFUNC_ABORT`).
    @inline(__always)
    mutating func requestBodyRead(_ result: BodyReadResult) -> Int {
        switch result {
        case .bytes(let count):
            return count
        case .end:
            return 0
        case .pause:
            withAttempt(otherwise: ()) { $0.send = .waitingForProducer }
            return Int(CURL_READFUNC_PAUSE)
        case .abort(let error):
            withAttempt(otherwise: ()) { if $0.stopCause == nil { $0.stopCause = .requestBodyFailed(error) } }
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// libcurl asked to rewind the request body (a 307/308 redirect, an authentication retry) and the body
    /// answered; returns what the seek callback gives libcurl.
    mutating func requestBodyRewound(failure: CurlewError?) -> Int32 {
        guard let failure else { return Int32(CURL_SEEKFUNC_OK) }
        withAttempt(otherwise: ()) { if $0.stopCause == nil { $0.stopCause = .requestBodyFailed(failure) } }
        return Int32(CURL_SEEKFUNC_CANTSEEK)
    }

    /// The producer or consumer of a paused direction is ready again.
    mutating func resume(_ direction: PauseDirection) -> ResumeAction {
        withAttempt(otherwise: .none) { attempt in
            switch direction {
            case .send:
                guard attempt.send == .waitingForProducer else { return .none }
                attempt.send = .sending
            case .receive:
                guard attempt.receive == .bodyWaitingForConsumer else { return .none }
                attempt.receive = .body
            }
            return .unpause(
                stillPausedSend: attempt.send == .waitingForProducer,
                stillPausedReceive: attempt.receive == .bodyWaitingForConsumer)
        }
    }
}
