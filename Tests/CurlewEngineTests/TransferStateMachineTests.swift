import Testing

@testable import CurlewEngine

@Suite("Transfer state machine")
struct TransferStateMachineTests {
    @Test func submittedTransferStarts() {
        var machine = TransferStateMachine()
        #expect(machine.submitted(loopIsShuttingDown: false) == .start)
        #expect(machine.state == .running)
    }

    @Test func completionFinishesOnceAndAbsorbsLaterEvents() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.curlCompleted() == .finish)
        #expect(machine.curlCompleted() == .ignore)
        #expect(machine.cancelRequested() == .none)
        #expect(machine.deadlinePassed(.idle) == .none)
        #expect(machine.shutdown() == .none)
        #expect(machine.state == .finished)
    }

    @Test func cancellationOfRunningTransferRemovesItAndWinsOverLateCompletion() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.cancelRequested() == .removeAndFail(.cancelled))
        #expect(machine.curlCompleted() == .ignore)
        #expect(machine.cancelRequested() == .none)
    }

    @Test func cancellationBeforeSubmissionFailsTheSubmissionWithoutStarting() {
        var machine = TransferStateMachine()
        #expect(machine.cancelRequested() == .none)
        #expect(machine.state == .created(cancelRequested: true))
        #expect(machine.submitted(loopIsShuttingDown: false) == .fail(.cancelled))
        #expect(machine.curlCompleted() == .ignore)
    }

    @Test func submissionDuringShutdownFailsWithClientShutdown() {
        var machine = TransferStateMachine()
        #expect(machine.submitted(loopIsShuttingDown: true) == .fail(.clientShutdown))
        #expect(machine.state == .finished)
    }

    @Test func deadlinesAndShutdownStopRunningTransfers() {
        var idle = TransferStateMachine()
        _ = idle.submitted(loopIsShuttingDown: false)
        #expect(idle.deadlinePassed(.idle) == .removeAndFail(.timeout(.idle)))

        var total = TransferStateMachine()
        _ = total.submitted(loopIsShuttingDown: false)
        #expect(total.deadlinePassed(.total) == .removeAndFail(.timeout(.total)))

        var shutdown = TransferStateMachine()
        _ = shutdown.submitted(loopIsShuttingDown: false)
        #expect(shutdown.shutdown() == .removeAndFail(.abortedByShutdown))
    }

    @Test func deadlineBeforeStartDoesNotMarkCancellation() {
        var machine = TransferStateMachine()
        #expect(machine.deadlinePassed(.idle) == .none)
        #expect(machine.submitted(loopIsShuttingDown: false) == .start)
    }

    @Test func failedStartFinishesOnce() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.startFailed() == .finish)
        #expect(machine.startFailed() == .ignore)
        #expect(machine.curlCompleted() == .ignore)
    }

    @Test func secondSubmissionChangesNothing() {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.submitted(loopIsShuttingDown: false) == .ignore)
        #expect(machine.state == .running)
        #expect(machine.curlCompleted() == .finish)
        #expect(machine.submitted(loopIsShuttingDown: false) == .ignore)
    }

    @Test func unwatchableSocketStopsOnlyARunningTransfer() {
        var machine = TransferStateMachine()
        #expect(machine.socketUnwatchable() == .none)
        _ = machine.submitted(loopIsShuttingDown: false)
        #expect(machine.socketUnwatchable() == .removeAndFail(.unwatchableSocket))
        #expect(machine.curlCompleted() == .ignore)
    }
}

/// The decisions the machine took over from libcurl's callbacks, driven synchronously: no socket, no clock.
@Suite("Transfer state machine: retries, framing, pauses, idle clock")
struct TransferStateMachineDecisionTests {
    static func running() -> TransferStateMachine {
        var machine = TransferStateMachine()
        _ = machine.submitted(loopIsShuttingDown: false)
        return machine
    }

    static func facts(
        connectionFailed: Bool = true, pooled: Bool = true, written: Int64 = 120, idempotent: Bool = true,
        replayable: Bool = true, headDelivered: Bool = false
    ) -> TransferStateMachine.CompletionFacts {
        .init(
            connectionFailed: connectionFailed, usedPooledConnection: pooled, requestBytesWritten: written,
            isIdempotent: idempotent, bodyIsReplayable: replayable, headDelivered: headDelivered)
    }

    @Test func anIdempotentRequestOnADeadPooledConnectionGoesOutOnceMore() {
        var machine = Self.running()
        #expect(machine.curlCompleted(failure: Self.facts()) == .retryOnFreshConnection)
        #expect(machine.freshConnectionRetries == 1)
        #expect(machine.state == .running)
        // Never twice.
        #expect(machine.curlCompleted(failure: Self.facts()) == .finish)
        #expect(machine.state == .finished)
    }

    @Test func aNonIdempotentRequestIsRepeatedOnlyWhenNothingWasWritten() {
        var written = Self.running()
        #expect(written.curlCompleted(failure: Self.facts(written: 300, idempotent: false)) == .finish)
        var unwritten = Self.running()
        #expect(unwritten.curlCompleted(failure: Self.facts(written: 0, idempotent: false)) == .retryOnFreshConnection)
    }

    @Test func aOneShotBodyIsNotRepeatedOnceWritten() {
        var machine = Self.running()
        #expect(machine.curlCompleted(failure: Self.facts(written: 10, replayable: false)) == .finish)
    }

    @Test func anIdempotentRequestWhoseHeadArrivedWithoutABodyByteGoesOutOnceMore() {
        // hypercorn drops the streams its GOAWAY announced after their HEADERS; libcurl 8.x then fails them.
        var headOnly = Self.running()
        headOnly.statusLineReceived()
        #expect(headOnly.curlCompleted(failure: Self.facts()) == .retryOnFreshConnection)
        // A head the server sent means it saw the request: only an idempotent, replayable one is repeated.
        var post = Self.running()
        post.statusLineReceived()
        #expect(post.curlCompleted(failure: Self.facts(written: 0, idempotent: false)) == .finish)
        var oneShot = Self.running()
        oneShot.statusLineReceived()
        #expect(oneShot.curlCompleted(failure: Self.facts(replayable: false)) == .finish)
    }

    @Test func noRetryOnceTheCallerHoldsPartOfAResponseOrOnAFreshConnectionOrForOtherFailures() {
        var streamedHead = Self.running()
        streamedHead.statusLineReceived()
        #expect(streamedHead.curlCompleted(failure: Self.facts(headDelivered: true)) == .finish)

        var body = Self.running()
        body.bodyReceived()
        #expect(body.curlCompleted(failure: Self.facts()) == .finish)

        var fresh = Self.running()
        #expect(fresh.curlCompleted(failure: Self.facts(pooled: false)) == .finish)

        var other = Self.running()
        #expect(other.curlCompleted(failure: Self.facts(connectionFailed: false)) == .finish)
    }

    @Test func aConnectionWithUnreadBytesIsAbandonedAndTheRequestRepeatedWhateverItsMethod() {
        var machine = Self.running()
        #expect(machine.requestStarting(connection: .unreadBytesOrClosed) == .abandonConnection)
        #expect(machine.isStaleConnectionFailure)
        let facts = Self.facts(connectionFailed: false, written: 0, idempotent: false, replayable: false)
        #expect(machine.curlCompleted(failure: facts) == .retryOnFreshConnection)
        #expect(machine.stopCause == nil, "a new attempt forgets the last one's cause")
        // The fresh connection has bytes waiting too: the request fails.
        #expect(machine.requestStarting(connection: .unreadBytesOrClosed) == .abandonConnection)
        #expect(machine.curlCompleted(failure: facts) == .finish)
        #expect(machine.stopCause == .staleConnection)
    }

    @Test func aCleanOrUncheckedConnectionProceeds() {
        var machine = Self.running()
        #expect(machine.requestStarting(connection: .clean) == .proceed)
        #expect(machine.requestStarting(connection: .notChecked) == .proceed)
    }

    @Test func conflictingContentLengthsAbortWithAmbiguousFraming() {
        var machine = Self.running()
        machine.statusLineReceived()
        #expect(machine.contentLengthReceived(5) == .accept)
        #expect(machine.contentLengthReceived(5) == .accept, "a repeated equal value is one length")
        #expect(machine.contentLengthReceived(7) == .abort)
        guard case .ambiguousFraming = machine.stopCause else {
            Issue.record("cause: \(String(describing: machine.stopCause))")
            return
        }
    }

    @Test func contentLengthWithTransferEncodingAbortsInEitherOrder() {
        var lengthFirst = Self.running()
        lengthFirst.statusLineReceived()
        #expect(lengthFirst.contentLengthReceived(5) == .accept)
        #expect(lengthFirst.transferEncodingReceived() == .abort)

        var encodingFirst = Self.running()
        encodingFirst.statusLineReceived()
        #expect(encodingFirst.transferEncodingReceived() == .accept)
        #expect(encodingFirst.contentLengthReceived(5) == .abort)

        var unparsable = Self.running()
        #expect(unparsable.contentLengthReceived(nil) == .abort)
    }

    @Test func eachHeaderBlockHasItsOwnFraming() {
        var machine = Self.running()
        machine.statusLineReceived()
        #expect(machine.contentLengthReceived(0) == .accept)
        #expect(machine.headerBlockEnded(status: 301, followsRedirect: true, sentExpectContinue: false) == .accept)
        // The redirect's length says nothing about the next response's.
        machine.statusLineReceived()
        #expect(machine.contentLengthReceived(42) == .accept)
    }

    @Test func a417ToTheEnginesExpectStopsTheTransfer() {
        var machine = Self.running()
        #expect(machine.headerBlockEnded(status: 417, followsRedirect: false, sentExpectContinue: true) == .abort)
        #expect(machine.stopCause == .expectationRejected)

        var notOurs = Self.running()
        #expect(notOurs.headerBlockEnded(status: 417, followsRedirect: false, sentExpectContinue: false) == .accept)
        #expect(!notOurs.responseStarted)
    }

    @Test func theFinalHeadResumesAnUploadPausedForItsProducer() {
        var machine = Self.running()
        machine.paused(.send)
        #expect(machine.headerBlockEnded(status: 100, followsRedirect: false, sentExpectContinue: false) == .accept)
        #expect(machine.headerBlockEnded(status: 302, followsRedirect: true, sentExpectContinue: false) == .accept)
        #expect(!machine.responseStarted)
        #expect(
            machine.headerBlockEnded(status: 413, followsRedirect: false, sentExpectContinue: false)
                == .finalResponse(resumeSend: true))
        #expect(machine.responseStarted)
    }

    @Test func resumingTellsLibcurlWhichDirectionsStayPaused() {
        var machine = Self.running()
        #expect(machine.resume(.send) == .none, "not paused: nothing to do")
        machine.paused(.send)
        machine.paused(.receive)
        #expect(machine.resume(.send) == .unpause(stillPausedSend: false, stillPausedReceive: true))
        #expect(machine.resume(.send) == .none)
        #expect(machine.resume(.receive) == .unpause(stillPausedSend: false, stillPausedReceive: false))
    }

    @Test func aNewRequestOnAConnectionForgetsStalePauseBits() {
        // libcurl starts every request (a redirect, a retry) unpaused: a resume must not act on the old bit.
        var machine = Self.running()
        machine.paused(.send)
        #expect(machine.requestStarting(connection: .notChecked) == .proceed)
        #expect(!machine.sendPaused)
        #expect(machine.resume(.send) == .none)
    }

    @Test func aFinishedTransferIgnoresResumes() {
        var machine = Self.running()
        machine.paused(.receive)
        #expect(machine.cancelRequested() == .removeAndFail(.cancelled))
        #expect(machine.resume(.receive) == .none)
    }

    @Test func theIdleClockWaitsForTheRequestToGoOut() {
        let second: UInt64 = 1_000_000_000
        var machine = Self.running()
        machine.startIdleClock(timeout: 4 * second, now: 100 * second)
        // First look a quarter period after the start.
        #expect(machine.idleDeadline == 101 * second)
        #expect(machine.idleDeadlinePassed(now: 101 * second, requestSent: false) == false)
        #expect(machine.idleDeadline == 102 * second, "looked again a quarter period later")
        // The request went out: the clock starts now.
        #expect(machine.idleDeadlinePassed(now: 102 * second, requestSent: true) == false)
        #expect(machine.idleClockStarted)
        #expect(machine.idleDeadline == 106 * second)
        #expect(machine.idleDeadlinePassed(now: 105 * second, requestSent: true) == false)
        #expect(machine.idleDeadlinePassed(now: 106 * second, requestSent: true) == true)
    }

    @Test func activityPushesTheIdleDeadline() {
        let second: UInt64 = 1_000_000_000
        var machine = Self.running()
        machine.startIdleClock(timeout: 2 * second, now: 10 * second)
        machine.activity(at: 11 * second)
        #expect(machine.idleDeadline == 13 * second)
        #expect(machine.idleDeadlinePassed(now: 12 * second, requestSent: true) == false)
        #expect(machine.idleDeadlinePassed(now: 13 * second, requestSent: true) == true)
    }

    @Test func waitingForOurOwnProducerOrConsumerIsNotIdle() {
        let second: UInt64 = 1_000_000_000
        var machine = Self.running()
        machine.startIdleClock(timeout: 1 * second, now: 0)
        machine.activity(at: 0)
        machine.paused(.receive)
        #expect(machine.idleDeadlinePassed(now: 5 * second, requestSent: true) == false)
        #expect(machine.idleDeadline == 6 * second)
        _ = machine.resume(.receive)
        machine.paused(.send)
        #expect(machine.idleDeadlinePassed(now: 6 * second, requestSent: true) == false)
        // Once the server answered, an upload waiting for its producer is idle like any transfer.
        _ = machine.headerBlockEnded(status: 200, followsRedirect: false, sentExpectContinue: false)
        #expect(machine.idleDeadlinePassed(now: 7 * second, requestSent: true) == true)
    }

    @Test func noIdleTimeoutNeverExpires() {
        var machine = Self.running()
        machine.startIdleClock(timeout: 0, now: 5)
        #expect(machine.idleDeadline == .max)
        #expect(machine.idleDeadlinePassed(now: .max - 1, requestSent: true) == false)
    }

    @Test func aTransferThatNeverReachedALoopEndsThroughTheMachine() {
        var unsent = TransferStateMachine()
        #expect(unsent.rejected() == .fail(.clientShutdown))
        #expect(unsent.state == .finished)
        #expect(unsent.cancelRequested() == .none)

        var cancelled = TransferStateMachine()
        _ = cancelled.cancelRequested()
        #expect(cancelled.rejected() == .fail(.cancelled))

        var started = Self.running()
        #expect(started.rejected() == .ignore)

        // A client on a libcurl older than the engine supports starts no loop: its requests end with the reason.
        var tooOld = TransferStateMachine()
        #expect(
            tooOld.rejected(because: .unsupportedLibcurl("libcurl 7.76.1 is older than 7.80.0"))
                == .fail(.unsupportedLibcurl("libcurl 7.76.1 is older than 7.80.0")))
    }

    @Test func everyFailureHasItsOneError() {
        #expect(TransferStateMachine.Failure.cancelled.error is CancellationError)
        #expect((TransferStateMachine.Failure.clientShutdown.error as? CurlewError)?.code == .clientShutdown)
        #expect((TransferStateMachine.Failure.abortedByShutdown.error as? CurlewError)?.code == .cancelled)
        #expect((TransferStateMachine.Failure.timeout(.total).error as? CurlewError)?.code == .timeout(.total))
        #expect((TransferStateMachine.Failure.resumeFailed(43).error as? CurlewError)?.curlCode == 43)
        let tooOld = TransferStateMachine.Failure.unsupportedLibcurl("libcurl 7.76.1 is older than 7.80.0").error
        #expect((tooOld as? CurlewError)?.code == .unsupportedLibcurl)
        #expect((tooOld as? CurlewError)?.detail == "libcurl 7.76.1 is older than 7.80.0")
    }

    @Test func theBodyLimitIsTheStopCause() {
        var machine = Self.running()
        machine.bodyLimitExceeded()
        #expect(machine.stopCause == .bodyLimitExceeded)
        #expect(machine.curlCompleted(failure: Self.facts(connectionFailed: false)) == .finish)
    }
}
