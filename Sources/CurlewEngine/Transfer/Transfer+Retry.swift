import CLibCurl
import HTTPTypes

extension Transfer {
    /// The facts of a failed transfer that `TransferStateMachine.curlCompleted(failure:now:)` decides a retry on.
    func completionFacts(_ result: CURLcode, easy: EasyHandle) -> TransferStateMachine.CompletionFacts {
        TransferStateMachine.CompletionFacts(
            connectionFailed: Self.isConnectionFailure(result),
            usedPooledConnection: easy.info(CURLINFO_NUM_CONNECTS) == 0,
            requestBytesWritten: Int64(easy.info(CURLINFO_REQUEST_SIZE)) + easy.info(offset: CURLINFO_SIZE_UPLOAD_T),
            isIdempotent: Self.isIdempotent(request.method),
            bodyIsReplayable: request.body?.isReplayable ?? true)
    }

    /// The libcurl failures a connection that died under the request causes: nothing came back, sending or
    /// receiving failed, or HTTP/2 said the connection or stream is gone (GOAWAY, a reset, or libcurl 7.88's
    /// "stream was not closed cleanly before end of the underlying stream", reported as a partial file). The state
    /// machine retries only when no byte of a response arrived, so a body cut short is never sent again.
    static func isConnectionFailure(_ result: CURLcode) -> Bool {
        switch result {
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_PARTIAL_FILE:
            true
        default: false
        }
    }

    /// RFC 9110 §9.2.2: the methods whose repetition has the effect of one request.
    static func isIdempotent(_ method: HTTPRequest.Method) -> Bool {
        switch method {
        case .get, .head, .options, .trace, .put, .delete: true
        default: false
        }
    }

    /// Makes the transfer ready to go out again on a new connection; false when its body cannot start over.
    func prepareRetry(_ easy: EasyHandle) -> Bool {
        if let openedBody, openedBody.rewind(to: 0) != nil { return false }
        rawHeaders.removeAll(keepingCapacity: true)
        headerBlockStarting = true
        responseBody.removeAll(keepingCapacity: true)
        bodyDecoding = nil
        connectionKey = nil
        waitsForConnectionAgain()
        if let headerList {
            // Start again from the original origin with the full list, whether or not a hop to another origin went
            // out without credentials (its list is nil when every field was one: nil cannot say it was swapped).
            _ = curlew_easy_setopt_slist(easy.raw, CURLOPT_HTTPHEADER, headerList)
        }
        if let proxyHeaderList {
            _ = curlew_easy_setopt_slist(easy.raw, CURLOPT_PROXYHEADER, proxyHeaderList)
        }
        // The option stays on the handle: a pooled plain-GET handle must be reset before its next transfer.
        self.easy?.isConfiguredForPlainGET = false
        return easy.set(CURLOPT_FRESH_CONNECT, true) == CURLE_OK
    }
}
