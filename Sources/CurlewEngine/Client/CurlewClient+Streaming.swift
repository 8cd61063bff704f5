import Glibc

extension CurlewClient {
    /// Sends a request and returns as soon as the final response's status and header fields have arrived; the
    /// body follows as an `AsyncSequence` with backpressure.
    ///
    /// While the consumer is more than `bufferLimit` bytes behind, the transfer pauses
    /// (`CURL_WRITEFUNC_PAUSE`) and TCP or HTTP/2 flow control holds the server back, so a slow consumer of a
    /// large download keeps memory bounded. A pause for the consumer never counts as idleness. The client's
    /// ``Configuration/maxResponseBodySize`` does not apply (it bounds memory, which streaming does not use); a
    /// request's own ``CurlewRequest/maxResponseBodySize`` does.
    ///
    /// - Throws: like ``execute(_:)`` until the head has arrived; later failures are thrown by the body.
    nonisolated(nonsending) public func stream(
        _ request: CurlewRequest, bufferLimit: Int = 1 << 20
    ) async throws -> CurlewStreamingResponse {
        let box = TransferBox()
        let buffer = ResponseBodyBuffer(limit: bufferLimit) { box.unpause(.receive) }
        let head = try await run(request, sink: .stream(buffer), box: box)
        return CurlewStreamingResponse(
            head: head, body: ResponseBodyStream(owner: StreamedTransfer(buffer: buffer) { box.cancel() }))
    }

    /// Sends a request and reads the response body without keeping it: for load generators and calls whose body
    /// does not matter. The returned response's `body` is empty; `metrics.bytesReceived` counts what arrived. A
    /// request's own ``CurlewRequest/maxResponseBodySize`` still applies, so a body the server announces as larger is
    /// refused early; the client's ``Configuration/maxResponseBodySize`` does not (it bounds memory, which a discarded
    /// body does not use).
    nonisolated(nonsending) public func executeDiscardingBody(
        _ request: CurlewRequest
    ) async throws -> CurlewResponse {
        try await run(request, sink: .discard, box: nil)
    }

    /// Downloads a response body into a file, in constant memory.
    ///
    /// The bytes go to a temporary file beside `path` (`<path>.curlew-<random>.partial`), which is flushed to
    /// disk (`fsync`) and renamed to `path` (and the directory flushed) only when the whole body has arrived with a
    /// 2xx status. A failed or
    /// cancelled download removes it, so a file at `path` is always complete. A response that is not 2xx is
    /// returned with its body in memory (within ``Configuration/maxResponseBodySize``) and `path` is left as it
    /// was. The returned response's `body` is empty on success; its metrics count the bytes.
    ///
    /// - Throws: like ``execute(_:)``, and ``CurlewError/Code/downloadFailed`` if the file cannot be created,
    ///   written, flushed or renamed.
    nonisolated(nonsending) public func download(
        _ request: CurlewRequest, to path: String
    ) async throws -> CurlewResponse {
        let temporaryPath = "\(path).curlew-\(MultipartForm.randomBoundary().dropFirst(7).prefix(12)).partial"
        let descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw Self.downloadError("cannot create \(temporaryPath)", errno: errno)
        }
        let sink = FileSink(descriptor: descriptor)
        var renamed = false
        defer {
            close(descriptor)
            if !renamed { unlink(temporaryPath) }
        }
        let response = try await run(request, sink: .file(sink), box: nil)
        // An empty body never reaches the write callback, where the sink decides: a 2xx with no body is an
        // empty file.
        let isSuccess = sink.hasDecided ? sink.writesToFile : (200..<300).contains(response.status.code)
        guard isSuccess else { return response }
        // fsync can block for seconds on a large file: never on an event loop thread, which a caller running on
        // one of ``executors`` would otherwise be on.
        try await withTaskExecutorPreference(globalConcurrentExecutor) {
            guard fsync(descriptor) == 0 else {
                throw Self.downloadError("cannot flush \(temporaryPath)", errno: errno)
            }
            guard rename(temporaryPath, path) == 0 else {
                throw Self.downloadError("cannot rename \(temporaryPath) to \(path)", errno: errno)
            }
            // The rename itself survives a crash only once the directory is flushed too; best effort, since the
            // file is already complete under its name.
            let slash = path.lastIndex(of: "/")
            let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
            let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if directoryDescriptor >= 0 {
                _ = fsync(directoryDescriptor)
                close(directoryDescriptor)
            }
        }
        renamed = true
        return response
    }

    private static func downloadError(_ detail: String, errno code: Int32) -> CurlewError {
        CurlewError(code: .downloadFailed, detail: "\(detail): \(String(cString: strerror(code)))", osErrno: code)
    }
}

/// Lets a streamed response's consumer reach the transfer and its loop, which exist only once the request
/// has been submitted.
final class TransferBox: @unchecked Sendable {
    // Written once before the transfer is submitted, read after: the submission orders the accesses. Weak: the
    // transfer's sink refers back to this box, and a finished transfer has nothing left to resume or cancel.
    weak var transfer: Transfer?
    var loop: (any CurlEventLoop)?

    func unpause(_ direction: PauseDirection) {
        guard let transfer, let loop else { return }
        loop.unpause(transfer, direction)
    }

    func cancel() {
        guard let transfer, let loop else { return }
        loop.cancel(transfer)
    }
}
