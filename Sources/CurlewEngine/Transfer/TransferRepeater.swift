import CLibCurl

/// The figures of one response of a repeated request (``CurlewClient/executeRepeatedly(_:startingAt:next:)``):
/// what a load generator counts, read from libcurl without building a ``CurlewResponse``.
package struct RepeatedResponse: Sendable, Hashable {
    /// The final response's status code.
    package var status: Int
    /// Request body bytes sent.
    package var bytesSent: Int64
    /// Response body bytes as they arrived (before any decoding).
    package var bytesReceived: Int64
    /// Response header bytes, every header block included.
    package var headerBytesReceived: Int
    /// Whether the request went out on a connection that was already open.
    package var reusedConnection: Bool
    /// How often the request was sent again on a fresh connection (see ``TransferMetrics/freshConnectionRetries``).
    package var freshConnectionRetries: Int

    /// The figures of a response.
    package init(
        status: Int, bytesSent: Int64 = 0, bytesReceived: Int64 = 0, headerBytesReceived: Int = 0,
        reusedConnection: Bool = true, freshConnectionRetries: Int = 0
    ) {
        self.status = status
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.headerBytesReceived = headerBytesReceived
        self.reusedConnection = reusedConnection
        self.freshConnectionRetries = freshConnectionRetries
    }

    /// The same figures, taken from a whole response.
    package init(_ response: CurlewResponse) {
        let metrics = response.metrics
        self.init(
            status: response.status.code, bytesSent: metrics.bytesSent, bytesReceived: metrics.bytesReceived,
            headerBytesReceived: metrics.headerBytesReceived, reusedConnection: metrics.reusedConnection,
            freshConnectionRetries: metrics.freshConnectionRetries)
    }
}

/// Where a repeated transfer's requests come from (``CurlewClient/executeRepeatedly(_:startingAt:next:)``).
package enum RepeatedRequests: Sendable {
    /// A fixed list: `next` returns an index in it.
    case list([CurlewRequest])
    /// Made on the loop for each number `next` returns (a load test's request number, filling a template); nil
    /// ends the repeat. Each must have no logger and a replayable body, like a list's; one that has not ends the
    /// repeat too.
    case made(@Sendable (Int) -> CurlewRequest?)

    /// Request `index`, or nil when there is none.
    func request(_ index: Int) -> CurlewRequest? {
        switch self {
        case .list(let requests):
            return requests.indices.contains(index) ? requests[index] : nil
        case .made(let make):
            guard let request = make(index), request.isRepeatable else { return nil }
            return request
        }
    }

    /// Whether the same index names the same request (a list's), so a handle configured for it can be re-added
    /// as it is.
    var indexNamesTheSameRequest: Bool {
        if case .list = self { true } else { false }
    }
}

extension CurlewRequest {
    /// Whether the request can go out on a repeated transfer: no logger (which logs per request) and a body that
    /// can be read again.
    var isRepeatable: Bool { logger == nil && (body?.isReplayable ?? true) }
}

/// Chooses, on the loop, a repeated transfer's next request as each one ends.
final class TransferRepeater: Sendable {
    /// The requests the transfer chooses from; all replayable.
    let requests: RepeatedRequests
    /// Called on the loop with each request's outcome, outside libcurl; returns the index of the next request, or
    /// nil to stop.
    let next: @Sendable (Result<RepeatedResponse, any Error>) -> Int?

    init(requests: RepeatedRequests, next: @escaping @Sendable (Result<RepeatedResponse, any Error>) -> Int?) {
        self.requests = requests
        self.next = next
    }

    /// Whether a request's failure ends the whole repeat once `next` has heard of it, whatever `next` chose: the
    /// caller was cancelled, the client is shutting down, or its libcurl cannot send requests. The one rule for the
    /// loop's repeated transfer and for the one-request-at-a-time fallback.
    static func endsRepeat(after error: any Error) -> Bool {
        if error is CancellationError { return true }
        guard let error = error as? CurlewError else { return false }
        return error.code == .cancelled || error.code == .clientShutdown || error.code == .unsupportedLibcurl
    }
}

extension Transfer {
    /// What a repeated request reports: five reads from libcurl where ``makeResponse(_:)`` makes thirteen and
    /// builds a response.
    func makeRepeatedResponse(_ easy: EasyHandle) -> RepeatedResponse {
        RepeatedResponse(
            status: easy.info(CURLINFO_RESPONSE_CODE), bytesSent: easy.info(offset: CURLINFO_SIZE_UPLOAD_T),
            bytesReceived: easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T),
            headerBytesReceived: easy.info(CURLINFO_HEADER_SIZE),
            reusedConnection: easy.info(CURLINFO_NUM_CONNECTS) == 0,
            freshConnectionRetries: stateMachine.freshConnectionRetries)
    }

    /// Readies the transfer for request `index` of its repeater on the easy handle it keeps, which has left the multi
    /// handle: a new state machine whose deadlines count from `now`, and the request's options set again only when
    /// they can differ from the last request's (raw libcurl's own loop re-adds a handle as it is).
    ///
    /// - Parameter next: the request, or nil when it is the one the transfer carries (a list's same index).
    /// - Returns: why the request cannot start, if it cannot.
    func prepareRepeat(
        of index: Int, request next: CurlewRequest?, easy: EasyHandle, userdata: UnsafeMutableRawPointer, now: UInt64
    ) -> TransferStateMachine.Failure? {
        let sameRequest = next == nil
        let setup: TransferStateMachine.Setup
        if let next {
            request = next
            requestIndex = index
            checksReusedConnections = settings.checksPooledConnection(
                beforeWritingTo: request.transferURL, version: request.httpVersion ?? settings.httpVersion)
            setup = Self.setup(for: request, settings: settings, sink: sink, submittedAt: now)
        } else {
            // The same request's limits and facts, its deadlines moved from the last submission to this one.
            setup = stateMachine.setup.resubmitted(from: submittedAt, at: now)
        }
        submittedAt = now
        // With the submission, before anything can fail: a repeat waits in no queue.
        startedAt = now
        libcurlHasTheRequest = false
        // Usually empty already (no head is kept, a discarded body is not stored): emptying an empty array is a call.
        if !rawHeaders.isEmpty { rawHeaders.removeAll(keepingCapacity: true) }
        headerBlockStarting = true
        if !responseBody.isEmpty { responseBody.removeAll(keepingCapacity: true) }
        openedSockets.forget()
        connectionKey = nil
        waitsForConnectionAgain()
        finalProgress = nil
        lastProgressReport = 0
        stateMachine = TransferStateMachine(setup: setup)
        switch stateMachine.submitted(now: now, loopIsShuttingDown: false) {
        case .start: break
        case .fail(let failure): return failure
        case .ignore: return .clientShutdown
        }
        if sameRequest && easy.isConfiguredForPlainGET {
            easy.errorBuffer[0] = 0
            return nil
        }
        releaseRequestResources()
        openedBody = nil
        if !easy.isConfiguredForPlainGET { easy.reset() }
        return configure(easy, userdata: userdata, now: now)
    }
}
