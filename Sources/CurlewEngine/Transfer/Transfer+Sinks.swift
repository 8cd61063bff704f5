import CLibCurl

/// Where a transfer's response body goes.
enum ResponseSink {
    /// Collected in memory, up to the size limit, and returned whole (``CurlewClient/execute(_:)``).
    case collect
    /// Handed to a consumer chunk by chunk (``CurlewClient/stream(_:bufferLimit:)``).
    case stream(ResponseBodyBuffer)
    /// Written to a file (``CurlewClient/download(_:to:)``).
    case file(FileSink)
    /// Read and dropped; only the count is kept (``CurlewClient/executeDiscardingBody(_:)``).
    case discard

    /// Whether the transfer's options are those of a collected body, so a pooled plain-GET handle fits as is.
    var usesCollectingOptions: Bool {
        switch self {
        case .collect, .discard: true
        case .stream, .file: false
        }
    }
}

extension Transfer {
    /// The write callback for streamed, downloaded and discarded bodies: the machine decides, the sink stores.
    func receiveStreamedBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        switch sink {
        case .collect:
            return 0
        case .discard:
            guard case .accept = stateMachine.bodyReceived(count: bytes.count, keptInMemory: false) else { return 0 }
            return bytes.count
        case .stream(let buffer):
            guard case .accept(let deliverHead) = stateMachine.bodyReceived(count: bytes.count, keptInMemory: false)
            else { return 0 }
            if deliverHead { core?.deliverHeadAfterLibcurlReturns(self) }
            guard buffer.offer(bytes) else {
                // libcurl keeps these bytes and offers them again once resumed.
                _ = stateMachine.bodyNotTaken(count: bytes.count)
                return Int(CURL_WRITEFUNC_PAUSE)
            }
            return bytes.count
        case .file(let file):
            if !file.hasDecided, let easy { file.decide(status: easy.info(CURLINFO_RESPONSE_CODE)) }
            // Not a success: the body is the server's explanation, kept in memory like any collected body.
            let action = stateMachine.bodyReceived(count: bytes.count, keptInMemory: !file.writesToFile)
            guard case .accept = action else { return 0 }
            if file.writesToFile {
                if let failure = file.write(bytes) {
                    _ = stateMachine.sinkFailed(failure)
                    return 0
                }
                return bytes.count
            }
            responseBody.append(contentsOf: bytes)
            return bytes.count
        }
    }

    /// Resumes a streaming caller with the status and header fields; the body follows through the buffer. Called
    /// by the loop once libcurl has returned, never inside a callback.
    func deliverHead() {
        guard let continuation, let easy else { return }
        self.continuation = nil
        continuation.resume(returning: makeResponse(easy))
    }

    /// The transfer has ended: resume the caller (or finish the stream) exactly once.
    func finish(with outcome: Result<CurlewResponse, any Error>) {
        if let onProgress = request.onProgress {
            var last =
                finalProgress
                ?? TransferProgress(
                    bytesSent: 0, totalBytesToSend: openedBody?.length, bytesReceived: 0, totalBytesToReceive: nil,
                    isComplete: true)
            last.isComplete = true
            onProgress(last)
        }
        if case .stream(let buffer) = sink {
            buffer.complete(outcome.map(\.metrics))
        }
        if openedBody == nil { request.body?.abandonUnsentStreams() }
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: outcome)
    }

    // MARK: progress

    /// The progress callback: throttled to ``CurlewRequest/progressInterval``.
    func reportProgress(downloadTotal: Int64, downloaded: Int64, uploaded: Int64) {
        guard let onProgress = request.onProgress, let core else { return }
        let now = core.clock.now
        guard now &- lastProgressReport >= request.progressInterval.saturatingNanoseconds else { return }
        lastProgressReport = now
        onProgress(
            TransferProgress(
                bytesSent: uploaded, totalBytesToSend: openedBody?.length, bytesReceived: downloaded,
                totalBytesToReceive: downloadTotal > 0 ? downloadTotal : nil, isComplete: false))
    }

    /// Reads the final counts from libcurl, before the handle is reset.
    func captureFinalProgress() {
        guard request.onProgress != nil, let easy else { return }
        let announced = easy.info(offset: CURLINFO_CONTENT_LENGTH_DOWNLOAD_T)
        finalProgress = TransferProgress(
            bytesSent: easy.info(offset: CURLINFO_SIZE_UPLOAD_T), totalBytesToSend: openedBody?.length,
            bytesReceived: easy.info(offset: CURLINFO_SIZE_DOWNLOAD_T),
            totalBytesToReceive: announced >= 0 ? announced : nil, isComplete: true)
    }
}

extension CurlewRequest.Body {
    /// Releases the writers of streams a request ended without sending (failed or cancelled before it started).
    func abandonUnsentStreams() {
        switch storage {
        case .stream(let stream):
            stream.channel.abandonIfUnclaimed()
        case .multipart(let form):
            for part in form.parts {
                if case .stream(let stream) = part.content.storage { stream.channel.abandonIfUnclaimed() }
            }
        case .bytes, .file:
            break
        }
    }
}
