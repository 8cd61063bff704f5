import CLibCurl
import Testing

@testable import CurlewEngine

@Suite("Transfer state machine")
struct TransferStateMachineTests {
    /// The machine copies an `Attempt` out of its state and back on every callback event, several times per request:
    /// a large payload inline (a `CurlewError` with its metrics once made it hundreds of bytes) costs every request.
    @Test func anAttemptStaysSmallEnoughToCopyOnEveryEvent() {
        #expect(MemoryLayout<TransferStateMachine.Attempt>.size <= 128)
        #expect(MemoryLayout<TransferStateMachine.StopCause>.size <= 24)
    }

    @Test func submittedTransferStarts() {
        var machine = TransferStateMachine()
        #expect(machine.submitted(now: 0, loopIsShuttingDown: false) == .start)
        #expect(machine.attempt != nil)
    }

    @Test func completionFinishesOnceAndAbsorbsLaterEvents() {
        var machine = TransferStateMachine()
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.curlCompleted(now: 0) == .finish)
        #expect(machine.curlCompleted(now: 0) == .ignore)
        #expect(machine.cancelRequested() == .none)
        #expect(machine.deadlineCheck(now: .max, requestSent: true) == .checkAgain(at: .max))
        #expect(machine.shutdown() == .none)
        #expect(machine.isFinished)
    }

    @Test func cancellationOfRunningTransferRemovesItAndWinsOverLateCompletion() {
        var machine = TransferStateMachine()
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.cancelRequested() == .removeAndFail(.cancelled))
        #expect(machine.curlCompleted(now: 0) == .ignore)
        #expect(machine.cancelRequested() == .none)
    }

    @Test func cancellationBeforeSubmissionFailsTheSubmissionWithoutStarting() {
        var machine = TransferStateMachine()
        #expect(machine.cancelRequested() == .none)
        #expect(machine.state == .created(cancelRequested: true))
        #expect(machine.submitted(now: 0, loopIsShuttingDown: false) == .fail(.cancelled))
        #expect(machine.curlCompleted(now: 0) == .ignore)
    }

    @Test func submissionDuringShutdownFailsWithClientShutdown() {
        var machine = TransferStateMachine()
        #expect(machine.submitted(now: 0, loopIsShuttingDown: true) == .fail(.clientShutdown))
        #expect(machine.isFinished)
    }

    @Test func deadlinesAndShutdownStopRunningTransfers() {
        var total = TransferStateMachine(setup: .init(totalDeadline: 50))
        _ = total.submitted(now: 0, loopIsShuttingDown: false)
        #expect(total.deadlineCheck(now: 49, requestSent: true) == .checkAgain(at: 50))
        #expect(total.deadlineCheck(now: 50, requestSent: true) == .removeAndFail(.timeout(.total)))
        #expect(total.isFinished)

        var shutdown = TransferStateMachine()
        _ = shutdown.submitted(now: 0, loopIsShuttingDown: false)
        #expect(shutdown.shutdown() == .removeAndFail(.abortedByShutdown))
    }

    @Test func aTransferStillWaitingForAConnectionAtItsConnectDeadlineFailsAsWaiting() {
        var machine = TransferStateMachine(setup: .init(connectionDeadline: 100))
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.nextDeadline == 100)
        #expect(machine.deadlineCheck(now: 99, requestSent: false) == .checkAgain(at: 100))
        #expect(
            machine.deadlineCheck(now: 100, requestSent: false) == .removeAndFail(.timeout(.waitingForConnection)))
        #expect(machine.isFinished)
    }

    @Test func aTransferConnectingAtItsConnectDeadlineLeavesLibcurlAMomentThenFailsAsConnect() {
        let grace = TransferStateMachine.connectTimerGrace
        var machine = TransferStateMachine(setup: .init(connectionDeadline: 100))
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(
            machine.deadlineCheck(now: 100, requestSent: false, connectionAttemptStarted: true)
                == .checkAgain(at: 100 + grace))
        #expect(
            machine.deadlineCheck(now: 99 + grace, requestSent: false, connectionAttemptStarted: true)
                == .checkAgain(at: 100 + grace))
        #expect(
            machine.deadlineCheck(now: 100 + grace, requestSent: false, connectionAttemptStarted: true)
                == .removeAndFail(.timeout(.connect)))
    }

    @Test func aRequestStartingOnAConnectionEndsTheConnectDeadline() {
        var machine = TransferStateMachine(setup: .init(totalDeadline: 1_000, connectionDeadline: 100))
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.requestStarting(connection: .notChecked) == .proceed)
        #expect(machine.nextDeadline == 1_000)
        #expect(machine.deadlineCheck(now: 500, requestSent: true) == .checkAgain(at: 1_000))
        // Without a connect timeout to count again, a retry on a fresh connection does not bring it back.
        #expect(
            machine.curlCompleted(
                failure: .init(
                    connectionFailed: true, usedPooledConnection: true, requestBytesWritten: 0, isIdempotent: true,
                    bodyIsReplayable: true), now: 0) == .retryOnFreshConnection)
        #expect(machine.deadlineCheck(now: 600, requestSent: false) == .checkAgain(at: 1_000))
    }

    @Test func aTotalDeadlinePassedBeforeTheLoopPickedTheTransferUpFailsItWithoutStarting() {
        var machine = TransferStateMachine(setup: .init(totalDeadline: 10))
        #expect(machine.submitted(now: 10, loopIsShuttingDown: false) == .fail(.totalTimeoutBeforeStart))
        #expect(machine.isFinished)
    }

    @Test func aDeadlineCheckBeforeStartChangesNothing() {
        var machine = TransferStateMachine(setup: .init(totalDeadline: 10))
        #expect(machine.deadlineCheck(now: 20, requestSent: false) == .checkAgain(at: .max))
        #expect(machine.submitted(now: 5, loopIsShuttingDown: false) == .start)
    }

    @Test func failedStartFinishesOnce() {
        var machine = TransferStateMachine()
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.startFailed() == .finish)
        #expect(machine.startFailed() == .ignore)
        #expect(machine.curlCompleted(now: 0) == .ignore)
    }

    @Test func secondSubmissionChangesNothing() {
        var machine = TransferStateMachine()
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.submitted(now: 0, loopIsShuttingDown: false) == .ignore)
        #expect(machine.attempt != nil)
        #expect(machine.curlCompleted(now: 0) == .finish)
        #expect(machine.submitted(now: 0, loopIsShuttingDown: false) == .ignore)
    }

    @Test func unwatchableSocketStopsOnlyARunningTransfer() {
        var machine = TransferStateMachine()
        #expect(machine.socketUnwatchable() == .none)
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.socketUnwatchable() == .removeAndFail(.unwatchableSocket))
        #expect(machine.curlCompleted(now: 0) == .ignore)
    }
}

/// The decisions the machine took over from libcurl's callbacks, driven synchronously: no socket, no clock.
@Suite("Transfer state machine: retries, framing, limits, pauses, heads, credentials, idle clock")
struct TransferStateMachineDecisionTests {
    typealias Setup = TransferStateMachine.Setup

    static func running(_ setup: Setup = Setup(), now: UInt64 = 0) -> TransferStateMachine {
        var machine = TransferStateMachine(setup: setup)
        _ = machine.submitted(now: now, loopIsShuttingDown: false)
        return machine
    }

    static func facts(
        connectionFailed: Bool = true, pooled: Bool = true, written: Int64 = 120, idempotent: Bool = true,
        replayable: Bool = true
    ) -> TransferStateMachine.CompletionFacts {
        .init(
            connectionFailed: connectionFailed, usedPooledConnection: pooled, requestBytesWritten: written,
            isIdempotent: idempotent, bodyIsReplayable: replayable)
    }

    // MARK: retries

    @Test func anIdempotentRequestOnADeadPooledConnectionGoesOutOnceMore() {
        var machine = Self.running()
        #expect(machine.curlCompleted(failure: Self.facts(), now: 0) == .retryOnFreshConnection)
        #expect(machine.freshConnectionRetries == 1)
        #expect(machine.attempt != nil)
        // Never twice.
        #expect(machine.curlCompleted(failure: Self.facts(), now: 0) == .finish)
        #expect(machine.isFinished)
    }

    @Test func aNonIdempotentRequestIsRepeatedOnlyWhenNothingWasWritten() {
        var written = Self.running()
        #expect(written.curlCompleted(failure: Self.facts(written: 300, idempotent: false), now: 0) == .finish)
        var unwritten = Self.running()
        #expect(
            unwritten.curlCompleted(failure: Self.facts(written: 0, idempotent: false), now: 0)
                == .retryOnFreshConnection)
    }

    @Test func aOneShotBodyIsNotRepeatedOnceWritten() {
        var machine = Self.running()
        #expect(machine.curlCompleted(failure: Self.facts(written: 10, replayable: false), now: 0) == .finish)
    }

    @Test func anIdempotentRequestWhoseHeadArrivedWithoutABodyByteGoesOutOnceMore() {
        // hypercorn drops the streams its GOAWAY announced after their HEADERS; libcurl 8.x then fails them.
        var headOnly = Self.running()
        _ = headOnly.headerLineReceived(.statusLine)
        #expect(headOnly.curlCompleted(failure: Self.facts(), now: 0) == .retryOnFreshConnection)
        // A head the server sent means it saw the request: only an idempotent, replayable one is repeated.
        var post = Self.running()
        _ = post.headerLineReceived(.statusLine)
        #expect(post.curlCompleted(failure: Self.facts(written: 0, idempotent: false), now: 0) == .finish)
        var oneShot = Self.running()
        _ = oneShot.headerLineReceived(.statusLine)
        #expect(oneShot.curlCompleted(failure: Self.facts(replayable: false), now: 0) == .finish)
    }

    @Test func noRetryOnceTheCallerHoldsPartOfAResponseOrOnAFreshConnectionOrForOtherFailures() {
        var streamedHead = Self.running(Setup(streamsResponse: true))
        _ = streamedHead.headerLineReceived(.statusLine)
        #expect(streamedHead.headEnded(status: 200, now: 0) == .finalResponse(resumeSend: false, deliverHead: true))
        #expect(streamedHead.curlCompleted(failure: Self.facts(), now: 0) == .finish)

        var body = Self.running()
        _ = body.bodyReceived(count: 1, keptInMemory: true)
        #expect(body.curlCompleted(failure: Self.facts(), now: 0) == .finish)

        var fresh = Self.running()
        #expect(fresh.curlCompleted(failure: Self.facts(pooled: false), now: 0) == .finish)

        var other = Self.running()
        #expect(other.curlCompleted(failure: Self.facts(connectionFailed: false), now: 0) == .finish)
    }

    @Test func aNewAttemptForgetsWhatTheLastOneSaw() {
        var machine = Self.running(Setup(bodyLimit: 100, decodedBodyLimit: 10, carriesCredentials: true))
        _ = machine.headerLineReceived(.statusLine)
        _ = machine.headEnded(status: 200, isContentEncoded: true, now: 0)
        #expect(machine.attempt?.bodyLimit == 10)
        _ = machine.requestStarting(
            connection: .notChecked, redirectTarget: "http://b.test/", requestURL: "http://a.test/")
        #expect(machine.attempt?.leftRequestedOrigin == true)
        #expect(machine.curlCompleted(failure: Self.facts(), now: 0) == .retryOnFreshConnection)
        #expect(machine.attempt?.bodyLimit == 100)
        #expect(machine.attempt?.leftRequestedOrigin == false)
        #expect(machine.attempt?.responseBytesSeen == false)
    }

    @Test func aConnectionWithUnreadBytesIsAbandonedAndTheRequestRepeatedWhateverItsMethod() {
        var machine = Self.running()
        #expect(machine.requestStarting(connection: .unreadBytesOrClosed) == .abandonConnection)
        #expect(machine.attempt?.stopCause == .staleConnection)
        let facts = Self.facts(connectionFailed: false, written: 0, idempotent: false, replayable: false)
        #expect(machine.curlCompleted(failure: facts, now: 0) == .retryOnFreshConnection)
        #expect(machine.attempt?.stopCause == nil, "a new attempt forgets the last one's cause")
        // The fresh connection has bytes waiting too: the request fails.
        #expect(machine.requestStarting(connection: .unreadBytesOrClosed) == .abandonConnection)
        #expect(machine.attempt?.stopCause == .staleConnection)
        #expect(machine.curlCompleted(failure: facts, now: 0) == .finish)
    }

    /// A POST answered 303 was acted on: when the GET that follows meets a connection with unread bytes, the whole
    /// transfer is not sent again from the POST. An idempotent request with a body that can start over may be.
    @Test func aDirtyConnectionAfterAnAnsweredRedirectRepeatsOnlyWhatIsSafeToRepeat() {
        for (idempotent, expected) in [
            (false, TransferStateMachine.CompletionAction.finish), (true, .retryOnFreshConnection),
        ] {
            var machine = Self.running(Setup(followsRedirects: true))
            #expect(machine.requestStarting(connection: .notChecked) == .proceed)
            _ = machine.headerLineReceived(.statusLine)
            _ = machine.headerLineReceived(.location)
            #expect(machine.headEnded(status: 303, now: 10) == .redirectFollowed(resumeSend: false))
            #expect(machine.requestStarting(connection: .unreadBytesOrClosed) == .abandonConnection)
            let facts = Self.facts(connectionFailed: false, written: 0, idempotent: idempotent)
            #expect(machine.curlCompleted(failure: facts, now: 20) == expected, "idempotent: \(idempotent)")
        }
    }

    @Test func aCleanOrUncheckedConnectionProceeds() {
        var machine = Self.running()
        #expect(machine.requestStarting(connection: .clean) == .proceed)
        #expect(machine.requestStarting(connection: .notChecked) == .proceed)
    }

    // MARK: credentials

    @Test func credentialsAreWithheldOnceARedirectLeavesTheOriginAndStayWithheld() {
        var machine = Self.running(Setup(carriesCredentials: true))
        let origin = "https://api.test/a"
        #expect(machine.requestStarting(connection: .notChecked, requestURL: origin) == .proceed)
        #expect(
            machine.requestStarting(connection: .notChecked, redirectTarget: "https://api.test/b", requestURL: origin)
                == .proceed, "same origin: the credentials go along")
        #expect(
            machine.requestStarting(connection: .notChecked, redirectTarget: "https://evil.test/", requestURL: origin)
                == .proceedWithoutCredentials)
        // Back to the origin: the list without them stays (libcurl keeps it), nothing more to do.
        #expect(
            machine.requestStarting(connection: .notChecked, redirectTarget: "https://api.test/c", requestURL: origin)
                == .proceed)
        #expect(machine.attempt?.leftRequestedOrigin == true)
        #expect(machine.leftRequestedOrigin)
    }

    @Test func aRequestWithoutCredentialsNeverSwapsItsHeaders() {
        var machine = Self.running()
        #expect(
            machine.requestStarting(
                connection: .notChecked, redirectTarget: "https://api.test/b", requestURL: "https://api.test/")
                == .proceed)
        #expect(!machine.leftRequestedOrigin, "same origin")
        #expect(
            machine.requestStarting(
                connection: .notChecked, redirectTarget: "https://evil.test/", requestURL: "https://api.test/")
                == .proceed)
        // Still noted: the response came back from elsewhere, whatever it carried.
        #expect(machine.leftRequestedOrigin)
    }

    /// A proxy's fields come off when libcurl opens a socket for a redirect hop that leaves the origin (a CONNECT
    /// is written on it before the pre-request callback runs), by libcurl's own target, and stay off for the
    /// attempt; a new attempt starts with them.
    @Test func proxyFieldsComeOffWhenAHopToAnotherOriginOpensASocket() {
        let origin = "https://api.test/a"
        var machine = Self.running(Setup(followsRedirects: true, carriesCredentials: true, hasProxyHeaderLines: true))
        func opening(_ target: String?) -> Bool {
            machine.connectionOpening(redirectTarget: target, requestURL: origin)
        }
        #expect(!opening(nil), "the request's own connection")
        #expect(!opening("https://API.test:443/c"))
        #expect(opening("https://evil.test/"))
        #expect(machine.attempt?.proxyHeaderLinesWithheld == true)
        // Once off, nothing more to take off, wherever the next hop goes.
        #expect(!opening("https://other.test/"))
        #expect(!opening("https://api.test/d"))
        #expect(
            machine.requestStarting(connection: .notChecked, redirectTarget: "https://evil.test/", requestURL: origin)
                == .proceedWithoutCredentials)
        #expect(machine.curlCompleted(failure: Self.facts(), now: 0) == .retryOnFreshConnection)
        #expect(machine.attempt?.proxyHeaderLinesWithheld == false, "a retry starts from the origin with them")
        #expect(opening("http://api.test/a"), "http after https")
    }

    /// A hop on a pooled connection opens no socket (a proxy forwards it without a CONNECT): the proxy's fields come
    /// off at the request, with the credentials.
    @Test func proxyFieldsComeOffAtTheRequestOfAHopOnAPooledConnection() {
        let origin = "http://api.test/a"
        var machine = Self.running(Setup(followsRedirects: true, carriesCredentials: true, hasProxyHeaderLines: true))
        #expect(
            machine.requestStarting(connection: .notChecked, redirectTarget: "http://evil.test/", requestURL: origin)
                == .proceedWithoutCredentials)
        #expect(machine.attempt?.proxyHeaderLinesWithheld == true)
    }

    /// Without proxy fields a socket for a hop elsewhere takes nothing off.
    @Test func aRequestWithoutProxyFieldsTakesNothingOffWhenASocketOpens() {
        var machine = Self.running(Setup(followsRedirects: true, carriesCredentials: true))
        let opened = machine.connectionOpening(redirectTarget: "https://evil.test/", requestURL: "https://api.test/")
        #expect(!opened)
        #expect(machine.attempt?.proxyHeaderLinesWithheld == false)
    }

    // MARK: framing

    @Test func conflictingContentLengthsAbortWithAmbiguousFraming() {
        var machine = Self.running()
        _ = machine.headerLineReceived(.statusLine)
        #expect(machine.headerLineReceived(.contentLength(5)) == .accept)
        #expect(machine.headerLineReceived(.contentLength(5)) == .accept, "a repeated equal value is one length")
        #expect(machine.headerLineReceived(.contentLength(7)) == .abort)
        guard case .ambiguousFraming = machine.attempt?.stopCause else {
            Issue.record("cause: \(String(describing: machine.attempt?.stopCause))")
            return
        }
    }

    @Test func contentLengthWithTransferEncodingAbortsInEitherOrder() {
        var lengthFirst = Self.running()
        _ = lengthFirst.headerLineReceived(.statusLine)
        #expect(lengthFirst.headerLineReceived(.contentLength(5)) == .accept)
        #expect(lengthFirst.headerLineReceived(.transferEncoding) == .abort)

        var encodingFirst = Self.running()
        _ = encodingFirst.headerLineReceived(.statusLine)
        #expect(encodingFirst.headerLineReceived(.transferEncoding) == .accept)
        #expect(encodingFirst.headerLineReceived(.contentLength(5)) == .abort)

        var unparsable = Self.running()
        #expect(unparsable.headerLineReceived(.contentLength(nil)) == .abort)
    }

    @Test func eachHeaderBlockHasItsOwnFraming() {
        var machine = Self.running(Setup(followsRedirects: true))
        _ = machine.headerLineReceived(.statusLine)
        #expect(machine.headerLineReceived(.contentLength(0)) == .accept)
        #expect(machine.headEnded(status: 301, now: 0) == .accept)
        // The redirect's length says nothing about the next response's.
        _ = machine.headerLineReceived(.statusLine)
        #expect(machine.headerLineReceived(.contentLength(42)) == .accept)
    }

    // MARK: heads

    @Test func aPlainRequestNeverAsksForTheStatusAtTheEndOfItsHead() {
        var machine = Self.running()
        #expect(machine.headerLineReceived(.endOfBlock) == .accept)
    }

    @Test func uploadsStreamsExpectAndContentEncodedHeadsAskForTheStatus() {
        for setup in [
            Setup(sentExpectContinue: true), Setup(hasRequestBody: true), Setup(streamsResponse: true),
        ] {
            var machine = Self.running(setup)
            #expect(machine.headerLineReceived(.endOfBlock) == .readHead(contentEncoding: false))
        }
        // A head naming a content coding is read when the engine decodes, and only the head that names one.
        var decoding = Self.running(Setup(decodesContent: true))
        #expect(decoding.headerLineReceived(.endOfBlock) == .accept)
        #expect(decoding.headerLineReceived(.statusLine) == .accept)
        #expect(decoding.headerLineReceived(.contentEncoding) == .accept)
        #expect(decoding.headerLineReceived(.endOfBlock) == .readHead(contentEncoding: true))
        #expect(decoding.headerLineReceived(.statusLine) == .accept)
        #expect(decoding.headerLineReceived(.endOfBlock) == .accept, "a new block forgets the last one's coding")
        var asSent = Self.running(Setup(decodesContent: false))
        #expect(asSent.headerLineReceived(.contentEncoding) == .accept)
        #expect(asSent.headerLineReceived(.endOfBlock) == .accept, "with decompression off, bodies go as sent")
    }

    @Test func aContentEncodedFinalHeadGetsTheDecodedLimitAndABrokenCodingStopsTheTransfer() {
        var machine = Self.running(Setup(bodyLimit: 1000, decodedBodyLimit: 10, decodesContent: true))
        #expect(machine.headEnded(status: 200, isContentEncoded: true, now: 0) != .abort)
        #expect(machine.attempt?.bodyLimit == 10)
        #expect(machine.bodyUndecodable("cut short") == .abort)
        #expect(machine.attempt?.stopCause == .undecodableBody("cut short"))
        #expect(machine.bodyUndecodable("a later cause") == .abort)
        #expect(machine.attempt?.stopCause == .undecodableBody("cut short"), "the first cause stands")
    }

    @Test func a417ToTheEnginesExpectStopsTheTransfer() {
        var machine = Self.running(Setup(sentExpectContinue: true))
        #expect(machine.headEnded(status: 417, now: 0) == .abort)
        #expect(machine.attempt?.stopCause == .expectationRejected)

        var notOurs = Self.running()
        #expect(notOurs.headEnded(status: 417, now: 0) == .accept)
        #expect(notOurs.attempt?.receive == .awaitingHead)
    }

    @Test func theFinalHeadResumesAnUploadPausedForItsProducer() {
        var machine = Self.running(Setup(followsRedirects: true, hasRequestBody: true))
        #expect(machine.headEnded(status: 302, now: 0) == .accept, "an upload still sending goes on by itself")
        #expect(machine.requestBodyRead(.pause) == Int(CURL_READFUNC_PAUSE))
        #expect(machine.headEnded(status: 100, now: 0) == .accept)
        // A redirect followed or a 417 is no head the caller gets, but libcurl moves on only once resumed.
        #expect(machine.headEnded(status: 302, now: 0) == .resumeSend)
        #expect(machine.headEnded(status: 417, now: 0) == .resumeSend)
        _ = machine.headerLineReceived(.statusLine)
        _ = machine.headerLineReceived(.location)
        #expect(machine.headEnded(status: 302, now: 0) == .redirectFollowed(resumeSend: true))
        #expect(machine.attempt?.receive == .awaitingHead)
        #expect(machine.headEnded(status: 413, now: 0) == .finalResponse(resumeSend: true, deliverHead: false))
        #expect(machine.attempt?.receive == .body)
    }

    @Test func aStreamingCallerGetsTheHeadOnceAtTheFinalHeadOrTheFirstBodyByte() {
        var machine = Self.running(Setup(followsRedirects: true, streamsResponse: true))
        #expect(machine.headEnded(status: 302, now: 0) == .accept, "a redirect is not the head the caller waits for")
        #expect(machine.headEnded(status: 200, now: 0) == .finalResponse(resumeSend: false, deliverHead: true))
        #expect(machine.headerLineReceived(.endOfBlock) == .accept, "the head is delivered: no more status reads")
        #expect(machine.bodyReceived(count: 3, keptInMemory: false) == .accept(deliverHead: false))

        // A 3xx libcurl does not follow (no Location) carries a body: its first byte delivers the head.
        var unfollowed = Self.running(Setup(followsRedirects: true, streamsResponse: true))
        #expect(unfollowed.headEnded(status: 302, now: 0) == .accept)
        #expect(unfollowed.bodyReceived(count: 3, keptInMemory: false) == .accept(deliverHead: true))
        #expect(unfollowed.bodyReceived(count: 3, keptInMemory: false) == .accept(deliverHead: false))
    }

    // MARK: body limits

    @Test func theBodyLimitStopsTheTransferWithItsCause() {
        var machine = Self.running(Setup(bodyLimit: 10, inMemoryBodyLimit: 10))
        #expect(machine.bodyReceived(count: 10, keptInMemory: true) == .accept(deliverHead: false))
        #expect(machine.bodyReceived(count: 1, keptInMemory: true) == .abort)
        #expect(machine.attempt?.stopCause == .bodyLimitExceeded(10))
        #expect(machine.curlCompleted(failure: Self.facts(connectionFailed: false), now: 0) == .finish)
    }

    @Test func aFailedDownloadsExplanationIsBoundByTheInMemoryLimit() {
        var machine = Self.running(Setup(bodyLimit: .max, inMemoryBodyLimit: 4))
        #expect(machine.bodyReceived(count: 4, keptInMemory: false) == .accept(deliverHead: false))
        #expect(machine.bodyReceived(count: 100, keptInMemory: false) == .accept(deliverHead: false))
        var explanation = Self.running(Setup(bodyLimit: .max, inMemoryBodyLimit: 4))
        #expect(explanation.bodyReceived(count: 5, keptInMemory: true) == .abort)
        #expect(explanation.attempt?.stopCause == .bodyLimitExceeded(4))
    }

    @Test func aContentEncodedResponseGetsTheSmallerDecodedLimit() {
        var encoded = Self.running(Setup(bodyLimit: 100, decodedBodyLimit: 10))
        _ = encoded.headEnded(status: 200, isContentEncoded: true, now: 0)
        #expect(encoded.bodyReceived(count: 11, keptInMemory: false) == .abort)
        #expect(encoded.attempt?.stopCause == .bodyLimitExceeded(10))

        var identity = Self.running(Setup(bodyLimit: 100, decodedBodyLimit: 10))
        _ = identity.headEnded(status: 200, isContentEncoded: false, now: 0)
        #expect(identity.bodyReceived(count: 11, keptInMemory: false) == .accept(deliverHead: false))
    }

    @Test func bytesAConsumerHadNoRoomForPauseAndDoNotCountTowardsTheLimit() {
        var machine = Self.running(Setup(bodyLimit: 10))
        #expect(machine.bodyReceived(count: 8, keptInMemory: false) == .accept(deliverHead: false))
        #expect(machine.bodyNotTaken(count: 8) == .pause)
        #expect(machine.attempt?.receive == .bodyWaitingForConsumer)
        // libcurl offers the same bytes again once resumed.
        #expect(machine.resume(.receive) == .unpause(stillPausedSend: false, stillPausedReceive: false))
        #expect(machine.bodyReceived(count: 8, keptInMemory: false) == .accept(deliverHead: false))
    }

    // MARK: body and sink failures

    @Test func aFailedRequestBodyOrSinkIsTheStopCauseAndTheFirstCauseStands() {
        let changed = CurlewError.requestBody("the file changed before it was sent")
        var body = Self.running()
        #expect(body.requestBodyRead(.abort(changed)) == Int(CURL_READFUNC_ABORT))
        #expect(body.attempt?.stopCause == .requestBodyFailed(changed))
        _ = body.headerLineReceived(.contentLength(nil))
        #expect(body.attempt?.stopCause == .requestBodyFailed(changed))

        var rewind = Self.running()
        #expect(rewind.requestBodyRewound(failure: changed) == Int32(CURL_SEEKFUNC_CANTSEEK))
        #expect(rewind.attempt?.stopCause == .requestBodyFailed(changed))
        var rewound = Self.running()
        #expect(rewound.requestBodyRewound(failure: nil) == Int32(CURL_SEEKFUNC_OK))
        #expect(rewound.attempt?.stopCause == nil)

        let diskFull = CurlewError(code: .downloadFailed, detail: "writing the download failed: No space left")
        var sink = Self.running()
        #expect(sink.sinkFailed(diskFull) == .abort)
        #expect(sink.attempt?.stopCause == .sinkFailed(diskFull))
    }

    @Test func theRequestBodysBytesAndEndPassThrough() {
        var machine = Self.running()
        #expect(machine.requestBodyRead(.bytes(512)) == 512)
        #expect(machine.requestBodyRead(.end) == 0)
        #expect(machine.attempt?.send == .sending)
    }

    // MARK: pauses

    @Test func resumingTellsLibcurlWhichDirectionsStayPaused() {
        var machine = Self.running()
        #expect(machine.resume(.send) == .none, "not paused: nothing to do")
        _ = machine.requestBodyRead(.pause)
        _ = machine.bodyReceived(count: 1, keptInMemory: false)
        _ = machine.bodyNotTaken(count: 1)
        #expect(machine.resume(.send) == .unpause(stillPausedSend: false, stillPausedReceive: true))
        #expect(machine.resume(.send) == .none)
        #expect(machine.resume(.receive) == .unpause(stillPausedSend: false, stillPausedReceive: false))
    }

    @Test func aNewRequestOnAConnectionForgetsStalePauseBits() {
        // libcurl starts every request (a redirect, a retry) unpaused: a resume must not act on the old bit.
        var machine = Self.running()
        _ = machine.requestBodyRead(.pause)
        #expect(machine.requestStarting(connection: .notChecked) == .proceed)
        #expect(machine.attempt?.send == .sending)
        #expect(machine.resume(.send) == .none)
    }

    @Test func aFinishedTransferIgnoresResumes() {
        var machine = Self.running()
        _ = machine.bodyReceived(count: 1, keptInMemory: false)
        _ = machine.bodyNotTaken(count: 1)
        #expect(machine.cancelRequested() == .removeAndFail(.cancelled))
        #expect(machine.resume(.receive) == .none)
    }

    // MARK: the idle clock

    static let second: UInt64 = 1_000_000_000

    @Test func theIdleClockWaitsForTheRequestToGoOut() {
        let second = Self.second
        var machine = Self.running(Setup(idleTimeout: 4 * second), now: 100 * second)
        // First look a quarter period after the start.
        #expect(machine.nextDeadline == 101 * second)
        #expect(machine.deadlineCheck(now: 101 * second, requestSent: false) == .checkAgain(at: 102 * second))
        // The request went out: the clock starts now.
        #expect(machine.deadlineCheck(now: 102 * second, requestSent: true) == .checkAgain(at: 106 * second))
        #expect(machine.attempt?.idle.started == true)
        #expect(machine.deadlineCheck(now: 105 * second, requestSent: true) == .checkAgain(at: 106 * second))
        #expect(machine.deadlineCheck(now: 106 * second, requestSent: true) == .removeAndFail(.timeout(.idle)))
        #expect(machine.isFinished)
    }

    @Test func activityPushesTheIdleDeadline() {
        let second = Self.second
        var machine = Self.running(Setup(idleTimeout: 2 * second), now: 10 * second)
        machine.activity(at: 11 * second)
        #expect(machine.nextDeadline == 13 * second)
        #expect(machine.deadlineCheck(now: 12 * second, requestSent: true) == .checkAgain(at: 13 * second))
        #expect(machine.deadlineCheck(now: 13 * second, requestSent: true) == .removeAndFail(.timeout(.idle)))
    }

    @Test func waitingForOurOwnProducerOrConsumerIsNotIdle() {
        let second = Self.second
        var machine = Self.running(Setup(idleTimeout: 1 * second))
        machine.activity(at: 0)
        _ = machine.bodyReceived(count: 1, keptInMemory: false)
        _ = machine.bodyNotTaken(count: 1)
        #expect(machine.deadlineCheck(now: 5 * second, requestSent: true) == .checkAgain(at: 6 * second))
        _ = machine.resume(.receive)
        _ = machine.requestStarting(connection: .notChecked)
        _ = machine.requestBodyRead(.pause)
        #expect(machine.deadlineCheck(now: 6 * second, requestSent: true) == .checkAgain(at: 7 * second))
        // Once the server answered, an upload waiting for its producer is idle like any transfer.
        _ = machine.headEnded(status: 200, now: 0)
        #expect(machine.deadlineCheck(now: 7 * second, requestSent: true) == .removeAndFail(.timeout(.idle)))
    }

    @Test func theTotalDeadlineWinsOverAnUnexpiredIdleClock() {
        let second = Self.second
        var machine = Self.running(Setup(idleTimeout: 10 * second, totalDeadline: 3 * second))
        machine.activity(at: 2 * second)
        #expect(machine.nextDeadline == 3 * second)
        #expect(machine.deadlineCheck(now: 3 * second, requestSent: true) == .removeAndFail(.timeout(.total)))
    }

    @Test func noIdleTimeoutNeverExpires() {
        var machine = Self.running(Setup(), now: 5)
        #expect(machine.nextDeadline == .max)
        #expect(machine.deadlineCheck(now: .max - 1, requestSent: true) == .checkAgain(at: .max))
    }

    // MARK: ends

    @Test func aTransferThatNeverReachedALoopEndsThroughTheMachine() {
        var unsent = TransferStateMachine()
        #expect(unsent.rejected() == .fail(.clientShutdown))
        #expect(unsent.isFinished)
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

    // MARK: connection deadlines of later requests

    /// The first request's connection ended its connection deadline; the retry's own wait for a connection (every
    /// connection of the host busy) counts the connect timeout again, from the retry.
    @Test func aRetryOnAFreshConnectionHasTheConnectTimeoutFromTheRetryToGetOne() {
        var machine = TransferStateMachine(
            setup: .init(totalDeadline: 10_000, connectionDeadline: 100, connectTimeout: 100))
        _ = machine.submitted(now: 0, loopIsShuttingDown: false)
        #expect(machine.requestStarting(connection: .clean) == .proceed)
        #expect(machine.nextDeadline == 10_000)
        #expect(machine.curlCompleted(failure: Self.facts(written: 0), now: 500) == .retryOnFreshConnection)
        #expect(machine.nextDeadline == 600)
        #expect(machine.deadlineCheck(now: 599, requestSent: false) == .checkAgain(at: 600))
        #expect(
            machine.deadlineCheck(now: 600, requestSent: false) == .removeAndFail(.timeout(.waitingForConnection)))

        var connected = TransferStateMachine(
            setup: .init(totalDeadline: 10_000, connectionDeadline: 100, connectTimeout: 100))
        _ = connected.submitted(now: 0, loopIsShuttingDown: false)
        _ = connected.requestStarting(connection: .clean)
        _ = connected.curlCompleted(failure: Self.facts(written: 0), now: 500)
        #expect(connected.requestStarting(connection: .notChecked) == .proceed)
        #expect(connected.nextDeadline == 10_000, "the retry's connection ends its deadline too")
    }

    /// A redirect libcurl follows (a 3xx with a `Location`) may need a connection the host has none free of, or one
    /// to another origin: its request has the connect timeout from the redirect's head to get one, as the first
    /// request had from its submission.
    @Test func aRedirectLibcurlFollowsHasTheConnectTimeoutFromItsHeadToGetAConnection() {
        let setup = Setup(totalDeadline: 10_000, connectionDeadline: 100, connectTimeout: 100, followsRedirects: true)
        var machine = Self.running(setup)
        _ = machine.requestStarting(connection: .notChecked)
        #expect(machine.headerLineReceived(.statusLine) == .accept)
        #expect(machine.headerLineReceived(.location) == .accept)
        #expect(machine.headerLineReceived(.endOfBlock) == .readHead(contentEncoding: false))
        #expect(machine.headEnded(status: 302, now: 400) == .redirectFollowed(resumeSend: false))
        #expect(machine.nextDeadline == 500)
        #expect(
            machine.deadlineCheck(now: 500, requestSent: true) == .removeAndFail(.timeout(.waitingForConnection)))

        // Connecting at the deadline, libcurl has a moment to say so itself; a request started ends the deadline.
        var connecting = Self.running(Setup(connectionDeadline: 100, connectTimeout: 100, followsRedirects: true))
        _ = connecting.requestStarting(connection: .notChecked)
        _ = connecting.headerLineReceived(.location)
        _ = connecting.headEnded(status: 307, now: 400)
        #expect(
            connecting.deadlineCheck(now: 500, requestSent: true, connectionAttemptStarted: true)
                == .checkAgain(at: 500 + TransferStateMachine.connectTimerGrace))
        #expect(connecting.requestStarting(connection: .clean) == .proceed)
        #expect(connecting.nextDeadline == .max)
    }

    /// Only a 3xx head with a `Location`, of a request that follows redirects, starts another wait for a connection:
    /// a 3xx without one, a 201 with one, or a request that does not follow are final responses.
    @Test func aHeadLibcurlDoesNotFollowLeavesTheConnectionDeadlineAlone() {
        let setup = Setup(totalDeadline: 10_000, connectionDeadline: 100, connectTimeout: 100, followsRedirects: true)
        var withoutLocation = Self.running(setup)
        _ = withoutLocation.requestStarting(connection: .notChecked)
        _ = withoutLocation.headerLineReceived(.statusLine)
        #expect(withoutLocation.headerLineReceived(.endOfBlock) == .accept, "no status read for a plain head")
        #expect(withoutLocation.headEnded(status: 302, now: 400) == .accept)
        #expect(withoutLocation.nextDeadline == 10_000)

        var created = Self.running(setup)
        _ = created.requestStarting(connection: .notChecked)
        _ = created.headerLineReceived(.location)
        #expect(created.headEnded(status: 201, now: 400) == .finalResponse(resumeSend: false, deliverHead: false))
        #expect(created.nextDeadline == 10_000)

        var notFollowing = Self.running(
            Setup(totalDeadline: 10_000, connectionDeadline: 100, connectTimeout: 100, followsRedirects: false))
        _ = notFollowing.requestStarting(connection: .notChecked)
        _ = notFollowing.headerLineReceived(.location)
        #expect(notFollowing.headerLineReceived(.endOfBlock) == .accept)
        #expect(notFollowing.headEnded(status: 302, now: 400) == .finalResponse(resumeSend: false, deliverHead: false))
        #expect(notFollowing.nextDeadline == 10_000)
    }

}

extension TransferStateMachineDecisionTests {
    @Test func theCauseOfAStopOutlivesTheAttemptForTheError() {
        var machine = Self.running(Setup(bodyLimit: 1))
        _ = machine.bodyReceived(count: 2, keptInMemory: true)
        #expect(machine.curlCompleted(failure: Self.facts(connectionFailed: false), now: 0) == .finish)
        #expect(machine.isFinished)
        #expect(machine.stopCause == .bodyLimitExceeded(1))
    }
}
