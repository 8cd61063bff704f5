/// The life of one transfer, as a value that does no I/O: events in, actions out.
///
/// Every event is delivered on the transfer's loop, so the machine needs no lock; what makes completion
/// and cancellation resolve exactly once is that ``State/finished`` absorbs every later event.
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
        /// Ignore: the transfer was already resolved.
        case ignore
    }

    /// Why a transfer is resolved without libcurl's word.
    enum Failure: Sendable, Equatable {
        /// The caller's task was cancelled.
        case cancelled
        /// Submitted to a loop that is shutting down.
        case clientShutdown
        /// Running when the client shut down.
        case abortedByShutdown
        case timeout(CurlewError.TimeoutKind)
        /// libcurl gave the transfer a socket the loop cannot watch (descriptor exhaustion).
        case unwatchableSocket
        /// Resuming a paused transfer failed (`curl_easy_pause`); libcurl's code is attached.
        case resumeFailed(Int)
    }

    private(set) var state: State = .created(cancelRequested: false)

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

    /// libcurl reported the transfer done (successfully or not).
    mutating func curlCompleted() -> CompletionAction {
        guard state == .running else { return .ignore }
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
}
