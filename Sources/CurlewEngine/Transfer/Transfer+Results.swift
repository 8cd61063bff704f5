import CLibCurl
import Foundation
import HTTPTypes

extension Transfer {
    /// Gathers the response and metrics once libcurl reports the transfer done.
    func makeResponse(_ easy: EasyHandle) -> CurlewResponse {
        let metrics = makeMetrics(easy)
        let url = metrics.redirectCount > 0 ? (easy.info(string: CURLINFO_EFFECTIVE_URL) ?? request.url) : request.url
        return CurlewResponse(
            status: HTTPResponse.Status(code: easy.info(CURLINFO_RESPONSE_CODE)),
            rawHeaders: rawHeaders, body: responseBody, metrics: metrics, url: url)
    }

    /// The transfer's timings and sizes so far, from libcurl.
    func makeMetrics(_ easy: EasyHandle) -> TransferMetrics {
        let versionCode = easy.info(CURLINFO_HTTP_VERSION)
        let httpVersion: TransferMetrics.HTTPVersion =
            switch versionCode {
            case Int(CURL_HTTP_VERSION_1_0): .http1_0
            case Int(CURL_HTTP_VERSION_1_1): .http1_1
            case Int(CURL_HTTP_VERSION_2_0): .http2
            case Int(CURL_HTTP_VERSION_3): .http3
            default: .unknown
            }
        return TransferMetrics(
            // Never negative: a transfer that failed before the loop started it has no start of its own.
            queued: .nanoseconds(Int64(clamping: startedAt >= submittedAt ? startedAt - submittedAt : 0)),
            dnsLookup: easy.info(microseconds: CURLINFO_NAMELOOKUP_TIME_T),
            connected: easy.info(microseconds: CURLINFO_CONNECT_TIME_T),
            tlsHandshakeDone: easy.info(microseconds: CURLINFO_APPCONNECT_TIME_T),
            firstByte: easy.info(microseconds: CURLINFO_STARTTRANSFER_TIME_T),
            total: easy.info(microseconds: CURLINFO_TOTAL_TIME_T),
            reusedConnection: easy.info(CURLINFO_NUM_CONNECTS) == 0,
            httpVersion: httpVersion,
            bytesSent: easy.info(offset: CURLINFO_SIZE_UPLOAD_T),
            bytesReceived: easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T),
            headerBytesReceived: easy.info(CURLINFO_HEADER_SIZE),
            redirectCount: easy.info(CURLINFO_REDIRECT_COUNT),
            localPort: easy.info(CURLINFO_LOCAL_PORT),
            freshConnectionRetries: stateMachine.freshConnectionRetries,
            leftRequestedOrigin: stateMachine.leftRequestedOrigin
        )
    }

    /// How far a transfer got, for timeout messages: "connected, request sent, 0 body bytes received".
    func progress(_ easy: EasyHandle) -> String {
        var phases: [String] = []
        phases.append(easy.info(microseconds: CURLINFO_CONNECT_TIME_T) > .zero ? "connected" : "not connected")
        if easy.info(microseconds: CURLINFO_PRETRANSFER_TIME_T) > .zero { phases.append("request sent") }
        if easy.info(microseconds: CURLINFO_STARTTRANSFER_TIME_T) > .zero { phases.append("response started") }
        phases.append("\(easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T)) body bytes received")
        return phases.joined(separator: ", ")
    }

    /// How a transfer ended without a response, for ``error(for:)``.
    enum Ending: Equatable {
        /// libcurl finished the transfer with this result.
        case curl(CURLcode)
        /// The engine ended it without libcurl's word.
        case engine(TransferStateMachine.Failure)
    }

    /// What the easy handle knew when a transfer failed, read for ``TransferFailure/error(for:cause:handle:)``.
    struct HandleFacts {
        /// libcurl's error buffer.
        var message: String?
        var osErrno: Int32
        /// The status of the last response head, 0 for none.
        var lastStatus: Int
        /// The proxy's answer to CONNECT, 0 for none (`CURLINFO_HTTP_CONNECTCODE`).
        var proxyConnectStatus: Int
        /// How far the transfer got ("connected, request sent, …"), read for timeouts only.
        var progress: String?
        var metrics: TransferMetrics
        /// Whether the transfer was still waiting for a free connection: no connection, and libcurl had neither
        /// resolved a name nor opened a socket for it.
        var waitingForConnection = false
    }

    /// The error the caller of a failed transfer sees (see ``TransferFailure/error(for:cause:handle:)``), with
    /// what the easy handle knows while the transfer still holds it.
    func error(for ending: Ending) -> any Error {
        let facts = (libcurlHasTheRequest ? easy : nil).map { easy in
            var wantsProgress = false
            if case .engine(.timeout) = ending { wantsProgress = true }
            return HandleFacts(
                message: easy.errorMessage.map {
                    URLRedaction.hidingProxyCredentials(in: $0, configured: settings.proxy.url)
                },
                osErrno: Int32(easy.info(CURLINFO_OS_ERRNO)),
                lastStatus: easy.info(CURLINFO_RESPONSE_CODE),
                proxyConnectStatus: easy.info(CURLINFO_HTTP_CONNECTCODE),
                progress: wantsProgress ? progress(easy) : nil,
                metrics: makeMetrics(easy),
                waitingForConnection: !hasLeftConnectionQueue)
        }
        return TransferFailure.error(for: ending, cause: stateMachine.stopCause, handle: facts)
    }
}

/// The one place a transfer's failure becomes the error its caller sees, however the transfer ended.
enum TransferFailure {
    /// Builds the error from how the transfer ended, the engine's own cause of a stop (libcurl reports one only as
    /// "aborted by callback" or "write error"), and what the easy handle knew. A pure function: tested without a
    /// transfer.
    static func error(
        for ending: Transfer.Ending, cause: TransferStateMachine.StopCause?, handle: Transfer.HandleFacts?
    ) -> any Error {
        let error: CurlewError
        switch ending {
        case .curl(let result):
            error = curlError(result, cause: cause, handle: handle)
        case .engine(.cancelled):
            return CancellationError()
        case .engine(.resumeFailed(let code)):
            // A callback that libcurl ran inside curl_easy_pause may have failed for a reason of our own.
            error = curlError(CURLcode(rawValue: UInt32(code)), cause: cause, handle: handle)
        case .engine(let failure):
            error = engineError(failure, progress: handle?.progress)
        }
        guard let handle else { return error }
        return error.with(handle.metrics)
    }

    private static func engineError(_ failure: TransferStateMachine.Failure, progress: String?) -> CurlewError {
        switch failure {
        case .cancelled, .resumeFailed:
            preconditionFailure("handled by error(for:cause:handle:)")
        case .clientShutdown:
            return CurlewError(code: .clientShutdown, detail: "the client was shut down")
        case .unsupportedLibcurl(let reason):
            return CurlewError(code: .unsupportedLibcurl, detail: reason)
        case .abortedByShutdown:
            return CurlewError(code: .cancelled, detail: "the client was shut down while the request was running")
        case .timeout(.waitingForConnection):
            return CurlewError(code: .timeout(.waitingForConnection), detail: CurlewError.waitingForConnectionDetail)
        case .timeout(let kind):
            // How far the transfer got is what tells a slow server from a dead one.
            if let progress {
                return CurlewError(code: .timeout(kind), detail: "\(kind.name) timeout, \(progress)")
            }
            return CurlewError(
                code: .timeout(kind), detail: kind == .idle ? "idle timeout: no data moved" : "\(kind.name) timeout"
            )
        case .totalTimeoutBeforeStart:
            return CurlewError(code: .timeout(.total), detail: "total timeout elapsed before the transfer started")
        case .unwatchableSocket:
            return CurlewError(code: .transport, detail: "the event loop could not watch the transfer's socket")
        case .noEasyHandle:
            return CurlewError(code: .transport, detail: "libcurl could not create an easy handle")
        case .optionRejected(let code):
            return CurlewError(
                code: .invalidRequest, detail: "libcurl rejected an option of this request", curlCode: code,
                curlMessage: String(cString: curl_easy_strerror(CURLcode(rawValue: UInt32(code)))))
        case .multiRefused(let code):
            return CurlewError(
                code: .transport,
                detail:
                    "libcurl refused the transfer: \(String(cString: curl_multi_strerror(CURLMcode(rawValue: Int32(code)))))"
            )
        case .invalidRequest(let error):
            return error
        }
    }

    /// A failed libcurl result as the caller sees it: the engine's own stop causes first, then libcurl's code.
    private static func curlError(
        _ result: CURLcode, cause: TransferStateMachine.StopCause?, handle: Transfer.HandleFacts?
    ) -> CurlewError {
        let curlCode = Int(result.rawValue)
        switch cause {
        case .requestBodyFailed(let error), .sinkFailed(let error):
            // The body or the sink stopped the transfer (libcurl says "aborted by callback", "send failed rewind",
            // "write error"): say why.
            return error
        case .expectationRejected:
            return CurlewError(
                code: .invalidRequest,
                detail:
                    "the server refused `Expect: 100-continue` (417); send this request with expectContinue disabled",
                curlCode: curlCode)
        case .bodyLimitExceeded(let limit) where result == CURLE_WRITE_ERROR:
            return CurlewError(
                code: .bodyTooLarge, detail: "the response body exceeds the limit of \(limit) bytes", curlCode: curlCode
            )
        case .undecodableBody(let detail) where result == CURLE_WRITE_ERROR:
            // libcurl saw nothing wrong (its write error is the engine's stop, or its success was not).
            return CurlewError(code: .invalidResponse, detail: detail)
        case .ambiguousFraming(let detail) where result == CURLE_WRITE_ERROR:
            return CurlewError(
                code: .invalidResponse, detail: "\(detail); the connection was closed", curlCode: curlCode)
        case .staleConnection:
            return CurlewError(
                code: .connectionClosed,
                detail:
                    "the connection had unread bytes or was closed before the request was written, and the request "
                    + "was not sent again (a fresh connection had failed the same way, or a redirect it followed was "
                    + "already answered)",
                curlCode: curlCode)
        default:
            break
        }
        // libcurl enforces only the connect timeout; the total and idle ones are the engine's own. libcurl 8 counts
        // the wait for a free connection in it.
        return CurlewError.fromCurl(
            result, message: handle?.message, osErrno: handle?.osErrno ?? 0,
            timeoutKind: handle?.waitingForConnection == true ? .waitingForConnection : .connect,
            lastStatus: handle?.lastStatus ?? 0, proxyConnectStatus: handle?.proxyConnectStatus ?? 0)
    }
}
