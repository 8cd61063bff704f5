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
            queued: .nanoseconds(Int64(startedAt &- submittedAt)),
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
            freshConnectionRetries: stateMachine.freshConnectionRetries
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

    /// The one place a transfer's failure becomes the error its caller sees, however the transfer ended: libcurl's
    /// result (read with the engine's own cause of the stop, which libcurl reports only as "aborted by callback"
    /// or "write error"), or an ending of the engine's (cancellation, shutdown, a deadline, a socket it could not
    /// watch). While the transfer holds its easy handle the error carries its metrics, and a timeout says how far
    /// the transfer got.
    func error(for ending: Ending) -> any Error {
        let error: any Error
        switch (ending, easy) {
        case (.curl(let result), let easy?):
            error = curlError(result, easy: easy)
        case (.curl(let result), nil):
            error = CurlewError.fromCurl(result, message: nil, osErrno: 0, timeoutKind: .connect)
        case (.engine(.timeout(let kind)), let easy?):
            // How far the transfer got is what tells a slow server from a dead one.
            error = CurlewError(code: .timeout(kind), detail: "\(kind.rawValue) timeout, \(progress(easy))")
        case (.engine(.resumeFailed(let code)), let easy?):
            // A callback that libcurl ran inside curl_easy_pause may have failed for a reason of our own.
            error = curlError(CURLcode(rawValue: UInt32(code)), easy: easy)
        case (.engine(let failure), _):
            error = failure.error
        }
        guard let easy, let curlewError = error as? CurlewError else { return error }
        return curlewError.with(makeMetrics(easy))
    }

    /// How a transfer ended without a response, for ``error(for:)``.
    enum Ending {
        /// libcurl finished the transfer with this result.
        case curl(CURLcode)
        /// The engine ended it without libcurl's word.
        case engine(TransferStateMachine.Failure)
    }

    /// A failed libcurl result as the caller sees it: the engine's own stop causes first, then libcurl's code.
    private func curlError(_ result: CURLcode, easy: EasyHandle) -> CurlewError {
        // The body or the sink stopped the transfer (libcurl says "aborted by callback", "send failed rewind",
        // "write error"): say why.
        if let failure = openedBody?.failure { return failure }
        if let failure = sinkError(for: result) { return failure }
        switch stateMachine.stopCause {
        case .expectationRejected:
            return CurlewError(
                code: .invalidRequest,
                detail:
                    "the server refused `Expect: 100-continue` (417); send this request with expectContinue disabled",
                curlCode: Int(result.rawValue))
        case .bodyLimitExceeded where result == CURLE_WRITE_ERROR:
            return CurlewError(
                code: .bodyTooLarge, detail: "the response body exceeds the limit of \(bodyLimit) bytes",
                curlCode: Int(result.rawValue))
        case .ambiguousFraming(let detail) where result == CURLE_WRITE_ERROR:
            return CurlewError(
                code: .invalidResponse, detail: "\(detail); the connection was closed", curlCode: Int(result.rawValue))
        case .staleConnection:
            return CurlewError(
                code: .connectionClosed,
                detail: "a fresh connection too had unread bytes or was closed before the request was written",
                curlCode: Int(result.rawValue))
        default:
            break
        }
        // libcurl enforces only the connect timeout; the total and idle ones are the engine's own.
        return CurlewError.fromCurl(
            result, message: easy.errorMessage, osErrno: Int32(easy.info(CURLINFO_OS_ERRNO)),
            timeoutKind: .connect, lastStatus: easy.info(CURLINFO_RESPONSE_CODE))
    }
}
