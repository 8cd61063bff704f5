import CLibCurl
import Testing

@testable import CurlewEngine

/// `TransferFailure`: every ending, cause and handle fact to the one error the caller sees.
@Suite("Transfer failure: the one error factory")
struct TransferFailureTests {
    static func error(
        _ ending: Transfer.Ending, cause: TransferStateMachine.StopCause? = nil
    ) -> CurlewError? {
        TransferFailure.error(for: ending, cause: cause, handle: nil) as? CurlewError
    }

    @Test func everyEngineFailureHasItsOneError() {
        #expect(TransferFailure.error(for: .engine(.cancelled), cause: nil, handle: nil) is CancellationError)
        #expect(Self.error(.engine(.clientShutdown))?.code == .clientShutdown)
        #expect(Self.error(.engine(.abortedByShutdown))?.code == .cancelled)
        #expect(Self.error(.engine(.timeout(.total)))?.code == .timeout(.total))
        #expect(Self.error(.engine(.timeout(.idle)))?.detail == "idle timeout: no data moved")
        #expect(Self.error(.engine(.totalTimeoutBeforeStart))?.code == .timeout(.total))
        #expect(Self.error(.engine(.resumeFailed(43)))?.curlCode == 43)
        #expect(Self.error(.engine(.noEasyHandle))?.code == .transport)
        #expect(
            Self.error(.engine(.optionRejected(Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue))))?.code == .invalidRequest)
        #expect(Self.error(.engine(.multiRefused(Int(CURLM_OUT_OF_MEMORY.rawValue))))?.code == .transport)
        let invalid = CurlewError.invalidRequest("bad boundary")
        #expect(Self.error(.engine(.invalidRequest(invalid))) == invalid)
        let tooOld = Self.error(.engine(.unsupportedLibcurl("libcurl 7.76.1 is older than 7.80.0")))
        #expect(tooOld?.code == .unsupportedLibcurl)
        #expect(tooOld?.detail == "libcurl 7.76.1 is older than 7.80.0")
    }

    @Test func theEnginesStopCauseExplainsLibcurlsGenericFailure() {
        #expect(Self.error(.curl(CURLE_WRITE_ERROR), cause: .bodyLimitExceeded(10))?.code == .bodyTooLarge)
        #expect(
            Self.error(.curl(CURLE_WRITE_ERROR), cause: .bodyLimitExceeded(10))?.detail
                == "the response body exceeds the limit of 10 bytes")
        #expect(Self.error(.curl(CURLE_WRITE_ERROR), cause: .ambiguousFraming("x"))?.code == .invalidResponse)
        #expect(Self.error(.curl(CURLE_ABORTED_BY_CALLBACK), cause: .expectationRejected)?.code == .invalidRequest)
        #expect(Self.error(.curl(CURLE_ABORTED_BY_CALLBACK), cause: .staleConnection)?.code == .connectionClosed)
        let changed = CurlewError.requestBody("the file changed before it was sent")
        #expect(Self.error(.curl(CURLE_ABORTED_BY_CALLBACK), cause: .requestBodyFailed(changed)) == changed)
        let diskFull = CurlewError(code: .downloadFailed, detail: "writing the download failed")
        #expect(Self.error(.curl(CURLE_WRITE_ERROR), cause: .sinkFailed(diskFull)) == diskFull)
        // Without a cause of the engine's, libcurl's code speaks.
        #expect(Self.error(.curl(CURLE_COULDNT_CONNECT))?.code == .connectFailed)
    }

    /// libcurl 8 counts the wait for a free connection in its connect timeout: its code 28 for a transfer that never
    /// left that wait is the same timeout the engine reports when it sees it first.
    @Test func libcurlsTimeoutBeforeAnyConnectionAttemptIsTheWaitForOne() {
        func timedOut(waitingForConnection: Bool) -> CurlewError? {
            let facts = Transfer.HandleFacts(
                message: nil, osErrno: 0, lastStatus: 0, proxyConnectStatus: 0, progress: nil,
                metrics: TransferMetrics(), waitingForConnection: waitingForConnection)
            return TransferFailure.error(for: .curl(CURLE_OPERATION_TIMEDOUT), cause: nil, handle: facts)
                as? CurlewError
        }
        let waiting = timedOut(waitingForConnection: true)
        #expect(waiting?.code == .timeout(.waitingForConnection))
        #expect(waiting?.curlCode == Int(CURLE_OPERATION_TIMEDOUT.rawValue))
        #expect(waiting?.detail == Self.error(.engine(.timeout(.waitingForConnection)))?.detail)
        #expect(timedOut(waitingForConnection: false)?.code == .timeout(.connect))
    }
}
