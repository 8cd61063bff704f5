package import Crypto
public import CurlewEngine
import Foundation
package import HTTPTypes
import Synchronization

/// `--bwlimit`: one budget of bytes per second for the whole run, shared by every file and part.
///
/// Each request books its body's bytes before it starts: it may start once the bytes booked before it have had
/// their time at the limit, so the run's average does not exceed it. A run that fell behind (the server was slow,
/// the process was not scheduled) may catch up by at most `catchUp` worth of bytes, never more: a token bucket
/// whose capacity is that window, empty at the start. Each transfer is also capped at the limit by libcurl
/// (`CurlewRequest.maxSendBytesPerSecond`), so one large body is spread over its time slot instead of sent at once.
package final class SendBudget: Sendable {
    package let bytesPerSecond: Int64
    private let catchUp: Duration
    private let nextStart = Mutex<ContinuousClock.Instant?>(nil)

    package init(bytesPerSecond: Int64, catchUp: Duration = .milliseconds(250)) {
        self.bytesPerSecond = bytesPerSecond
        self.catchUp = catchUp
    }

    /// Waits until a body of `bytes` may start.
    package func reserve(_ bytes: Int64) async throws {
        let start = nextStart.withLock { next -> ContinuousClock.Instant in
            let now = ContinuousClock.now
            let start = max(now - catchUp, next ?? now)
            next = start + .nanoseconds(Int64(Double(bytes) / Double(bytesPerSecond) * 1e9))
            return start
        }
        if start > .now { try await Task.sleep(until: start, clock: .continuous) }
    }
}

/// What the requests of an S3 client met, for a run's summary: a file is several requests there.
package struct S3RequestTally: Sendable {
    package var statusCounts: [Int: Int] = [:]
    package var retries = 0
    package var connectionsOpened = 0
}

/// A request to the store that failed, or a file that could not be uploaded.
public struct S3Error: Error, Sendable, CustomStringConvertible {
    /// What failed: the store's error code and message, a transport error, or a checksum mismatch.
    public let description: String

    package init(_ description: String) { self.description = description }
}

/// At most N requests in flight across every file and every part of a run: `--concurrency` counts requests, so
/// one big file can use all of them and many small files share them.
package final class TransferSlots: Sendable {
    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    package init(_ count: Int) { state = Mutex(State(free: count)) }

    package func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    package func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}

/// A SHA-256 as lower-case hex: what `x-amz-content-sha256` carries.
package struct SHA256Hex: Sendable, Equatable {
    package let text: String
    package init(_ digest: SHA256.Digest) { text = SigV4Signer.hex(digest) }
}

/// A request body for S3: its SHA-256 is known before it is sent, because it is signed and sent as the checksum.
package enum S3Body: Sendable {
    case none
    case bytes([UInt8])
    /// A range of a file, streamed with `pread` by the engine.
    case file(path: String, offset: Int64, length: Int64, sha256: SHA256Hex)

    package var length: Int64 {
        switch self {
        case .none: 0
        case .bytes(let bytes): Int64(bytes.count)
        case .file(_, _, let length, _): length
        }
    }

    package var payloadHash: String {
        switch self {
        case .none: SigV4Signer.emptyPayloadHash
        case .bytes(let bytes): SigV4Signer.hexSHA256(bytes)
        case .file(_, _, _, let digest): digest.text
        }
    }
}

package struct S3Reply: Sendable {
    package let status: Int
    package let headers: HTTPFields
    package let body: [UInt8]

    package var text: String { String(decoding: body, as: UTF8.self) }

    package func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
}

package enum S3RequestFailure: Error {
    /// A problem of the whole run (bad credentials, missing bucket, clock skew, wrong region), named once.
    case run(String)
    /// The store refused this request.
    case refused(S3ErrorReply)
    /// The request did not complete (connection, file read), after the retries allowed.
    case transport(String)
    case cancelled

    package var reason: String {
        switch self {
        case .run: "not sent: the run stopped (see the error above)"
        case .refused(let reply): reply.summary
        case .transport(let reason): reason
        case .cancelled: "cancelled (interrupted)"
        }
    }
}

/// Signed requests to one bucket: objects uploaded whole or in parts, each with its SHA-256 checked by the store,
/// and existence checks. Every request is signed with AWS Signature Version 4 and retried with bounded backoff
/// when that is safe.
///
/// ```swift
/// let endpoint = try S3Endpoint(endpoint: "http://127.0.0.1:9000", region: "us-east-1", bucket: "photos")
/// let s3 = S3Client(endpoint: endpoint, credentials: try .fromEnvironment(), client: CurlewClient())
/// if try await !s3.objectExists(key: "2026/cat.jpg") {
///     try await s3.uploadFile(at: "/data/cat.jpg", key: "2026/cat.jpg")
/// }
/// ```
public final class S3Client: Sendable {
    package let http: CurlewClient
    /// Where the client's requests go.
    public let endpoint: S3Endpoint
    package let signer: SigV4Signer
    /// `curlew upload`'s rules with the run's `--retries`.
    package let retryRules: RetryRules
    package let slots: TransferSlots
    /// Parts of one file in flight at most.
    package let concurrency: Int
    package let budget: SendBudget?
    private let problem = Mutex<String?>(nil)
    private let counts = Mutex(S3RequestTally())

    /// A client for one bucket.
    ///
    /// - Parameters:
    ///   - endpoint: the bucket and where its requests go.
    ///   - credentials: what every request is signed with.
    ///   - client: the engine client that sends the requests (its connections are shared with other users).
    ///   - retries: retries per request for failures that are safe to retry (0 to 10).
    ///   - concurrency: requests in flight at most, across every file and part sent through this client.
    public convenience init(
        endpoint: S3Endpoint, credentials: AWSCredentials, client: CurlewClient, retries: Int = 2,
        concurrency: Int = 8
    ) {
        self.init(
            http: client, endpoint: endpoint, credentials: credentials, retries: min(max(retries, 0), 10),
            concurrency: max(concurrency, 1), budget: nil)
    }

    package init(
        http: CurlewClient, endpoint: S3Endpoint, credentials: AWSCredentials, retries: Int, concurrency: Int,
        budget: SendBudget?
    ) {
        self.http = http
        self.endpoint = endpoint
        self.signer = SigV4Signer(credentials: credentials, region: endpoint.region, service: "s3")
        self.retryRules = RetryRules.upload.allowingRetries(retries)
        self.slots = TransferSlots(concurrency)
        self.concurrency = concurrency
        self.budget = budget
    }

    /// The run's problem, once one request has met it.
    package var runProblem: String? { problem.withLock { $0 } }

    /// Status counts, retries and connections, for the summary.
    package var tally: S3RequestTally { counts.withLock { $0 } }

    /// Whether the bucket holds an object under `key` (a HEAD request: 200 or 404).
    ///
    /// - Throws: ``S3Error`` when the store refuses the request (bad credentials, a missing bucket) or cannot be
    ///   reached after the retries allowed.
    public func objectExists(key: String) async throws(S3Error) -> Bool {
        do {
            return try await send(.head, key: key, allowing: [404]).status != 404
        } catch {
            throw S3Error(runProblem ?? error.reason)
        }
    }

    /// Uploads one file as the object `key`: a single PUT up to the part size, a multipart upload above it (its
    /// parts in parallel), every object and part carrying its SHA-256 for the store to check.
    ///
    /// Resumable: a multipart upload that was cancelled (or whose process died) stays in the store, and the next
    /// call for the same key continues it, keeping the parts whose SHA-256 matches the file's bytes. Only an upload
    /// begun after the file last changed is continued, with the content type and metadata it was begun with; one
    /// begun before is aborted and the file sent afresh (its metadata, the whole file's SHA-256 among them, would
    /// describe an earlier version).
    ///
    /// - Parameters:
    ///   - path: the file to send; it must not change while it is sent.
    ///   - key: the object's key in the bucket.
    ///   - options: the object's content type, metadata and storage options, and how it is cut into parts.
    /// - Returns: whether the file was sent, or was left alone because the bucket held it already
    ///   (``S3ObjectOptions/skipExisting``).
    /// - Throws: ``S3Error`` when the file cannot be read or the store did not take it; a failed multipart upload
    ///   is aborted, so no parts linger.
    @discardableResult
    public func uploadFile(
        at path: String, key: String, options: S3ObjectOptions = S3ObjectOptions()
    ) async throws(S3Error) -> S3FileUpload {
        let listed = UploadItem(relativePath: key, absolutePath: path, size: 0, modifiedNanoseconds: 0)
        guard let item = listed.currentState() else {
            // currentState's ENOENT also stands for "there but not a regular file": say which.
            let reason = errno
            var status = stat()
            if reason == ENOENT, stat(path, &status) == 0 {
                throw S3Error("cannot read \(path.debugDescription): it is not a regular file")
            }
            throw S3Error("cannot read \(path.debugDescription): \(String(cString: strerror(reason)))")
        }
        let uploader = S3Uploader(client: self, options: options, journal: nil, resumesUnfinishedUploads: true)
        switch await uploader.upload(item, key: key, sent: { _ in }) {
        case .uploaded: return .uploaded
        case .alreadyThere: return .alreadyThere
        case .failed(let reason): throw S3Error(runProblem ?? reason)
        }
    }

    /// Sends one request, signing each attempt anew (the signature carries the time).
    ///
    /// - Parameters:
    ///   - allowing: non-2xx statuses returned as a reply instead of thrown (404 for HEAD and ListParts). A 2xx
    ///     whose body is an error document is thrown as a refusal (retried when its code says so).
    ///   - expectsDocument: whether a 2xx must carry a whole XML document: CompleteMultipartUpload and CopyObject
    ///     send their 200 before their outcome, and a store that fails after it may leave the body empty or cut.
    ///     A 2xx without one is a failure, retried.
    ///   - cleanup: an abort or delete that tidies up after a failure: sent even once the run has stopped.
    ///   - refusalStopsTheRun: whether a refusal that would fail every request (credentials, access, region) stops
    ///     the run. False for a request whose failure is its own: it is thrown (and retried when retryable) as a
    ///     refusal of this request, and later requests still go out.
    package func send(
        _ method: HTTPRequest.Method, key: String, query: [(name: String, value: String)] = [],
        headers: [(name: String, value: String)] = [], body: S3Body = .none, allowing: Set<Int> = [],
        expectsDocument: Bool = false, cleanup: Bool = false, refusalStopsTheRun: Bool = true
    ) async throws(S3RequestFailure) -> S3Reply {
        if cleanup && Task.isCancelled {
            // An interrupted run still tidies up (an abort left unsent leaves parts billed for ever): the cleanup
            // goes out in a task of its own, which the caller's cancellation does not reach. Bounded by the retries.
            let outcome = await Task { () -> Result<S3Reply, S3RequestFailure> in
                do throws(S3RequestFailure) {
                    return .success(
                        try await self.send(
                            method, key: key, query: query, headers: headers, body: body, allowing: allowing,
                            expectsDocument: expectsDocument, cleanup: true, refusalStopsTheRun: refusalStopsTheRun))
                } catch {
                    return .failure(error)
                }
            }.value
            return try outcome.get()
        }
        return try await retrying(maxAttempts: retryRules.maxAttempts) {
            (attempt: RetryAttempt) async throws(S3RequestFailure) -> RetryStep<S3Reply> in
            if let runProblem, !cleanup { throw .run(runProblem) }
            if Task.isCancelled { throw .cancelled }
            let failure: S3RequestFailure
            let retryDelay: Duration?
            if let budget, body.length > 0 {
                do { try await budget.reserve(body.length) } catch { throw .cancelled }
            }
            await slots.acquire()
            do {
                let request = try makeRequest(method, key: key, query: query, headers: headers, body: body)
                let response = try await http.execute(request)
                slots.release()
                let status = Int(response.status.code)
                counts.withLock {
                    $0.statusCounts[status, default: 0] += 1
                    if !response.metrics.reusedConnection { $0.connectionsOpened += 1 }
                }
                let reply = S3Reply(status: status, headers: response.headerFields, body: response.body)
                let isSuccessStatus = (200..<300).contains(status)
                // A 2xx carrying an error document is a refusal like any other, retried when S3 says so (its own
                // advice for an InternalError after CompleteMultipartUpload's or CopyObject's 200).
                let carriesError = isSuccessStatus && S3XML.isErrorDocument(response.body)
                if isSuccessStatus, !carriesError, expectsDocument, !S3XML.isWholeDocument(response.body) {
                    failure = .transport("HTTP \(status) without a whole XML result: the reply was empty or cut")
                    retryDelay = retryRules.delayBeforeRetry(afterAttempt: attempt.number)
                } else {
                    if (isSuccessStatus || allowing.contains(status)) && !carriesError { return .finished(reply) }
                    let refusal = S3ErrorReply(
                        status: status, body: response.body, bucketRegionHeader: reply.header("x-amz-bucket-region"),
                        requestRegion: endpoint.region)
                    // Past a 2xx status line the credentials, region and bucket were accepted: an error after it
                    // is this operation's, not the run's.
                    if refusalStopsTheRun, !isSuccessStatus, let runProblem = refusal.runProblem {
                        problem.withLock { $0 = $0 ?? runProblem }
                        throw S3RequestFailure.run(self.runProblem ?? runProblem)
                    }
                    failure = .refused(refusal)
                    // S3's error codes say more than its statuses: the store's own verdict decides.
                    retryDelay = refusal.isRetryable ? retryRules.delayBeforeRetry(afterAttempt: attempt.number) : nil
                }
            } catch let error as S3RequestFailure {
                throw error
            } catch let error as CurlewError {
                slots.release()
                failure = .transport(
                    "\(error.code.name): \(error.detail)" + (error.curlMessage.map { " (\($0))" } ?? ""))
                // Every S3 request is idempotent: the same bytes to the same name, or a read.
                retryDelay = retryRules.delayBeforeRetry(after: error, idempotent: true, attempt: attempt.number)
            } catch {
                slots.release()
                throw .cancelled
            }
            guard let retryDelay, !Task.isCancelled else {
                // A first attempt's failure keeps its kind (a refusal); a retried one is told with its attempts.
                guard attempt.number > 1 else { throw failure }
                throw .transport(attempt.failureReason(failure.reason))
            }
            counts.withLock { $0.retries += 1 }
            return .retry(after: retryDelay)
        } onCancelledWait: { (_: RetryAttempt) throws(S3RequestFailure) -> S3Reply in
            throw .cancelled
        }
    }

    private func makeRequest(
        _ method: HTTPRequest.Method, key: String, query: [(name: String, value: String)],
        headers: [(name: String, value: String)], body: S3Body
    ) throws -> CurlewRequest {
        let payloadHash = body.payloadHash
        let signable = SigV4Signer.Request(
            method: method.rawValue, path: endpoint.path(forKey: key), query: query,
            headers: [("host", endpoint.authority), ("x-amz-content-sha256", payloadHash)] + headers,
            payloadHash: payloadHash)
        var request = try CurlewRequest(method: method, url: endpoint.url(pathAndQuery: signable.encodedPathAndQuery))
        // libcurl writes the Host header from the URL, the same authority that was signed.
        for (name, value) in signable.headers.dropFirst() + signer.authorizationHeaders(for: signable, at: Date()) {
            try request.addHeader(name, value)
        }
        request.maxSendBytesPerSecond = budget?.bytesPerSecond
        switch body {
        case .none:
            // POST and PUT need a body to send Content-Length: 0.
            if method == .post || method == .put { request.body = .bytes([]) }
        case .bytes(let bytes): request.body = .bytes(bytes)
        case .file(let path, let offset, let length, _):
            request.body = .file(.path(path, offset: offset, length: length))
        }
        return request
    }
}

/// SHA-256 and MD5 (`--checksum-header md5`, and parts the store holds but the journal missed) of a file range, read with `pread`
/// in 1 MiB blocks: constant memory whatever the size.
package enum FileRangeDigest {
    package static let blockSize = 1 << 20

    package static func sha256(path: String, offset: Int64, length: Int64) throws(S3RequestFailure) -> SHA256.Digest {
        var hasher = SHA256()
        try read(path: path, offset: offset, length: length) { hasher.update(bufferPointer: $0) }
        return hasher.finalize()
    }

    package static func md5(path: String, offset: Int64, length: Int64) throws(S3RequestFailure) -> Insecure.MD5Digest {
        var hasher = Insecure.MD5()
        try read(path: path, offset: offset, length: length) { hasher.update(bufferPointer: $0) }
        return hasher.finalize()
    }

    private static func read(
        path: String, offset: Int64, length: Int64, _ consume: (UnsafeRawBufferPointer) -> Void
    ) throws(S3RequestFailure) {
        // Non-blocking, so a path that has become a FIFO since it was listed is refused below instead of holding
        // this worker in open() until something writes to it; a regular file reads the same either way.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw .transport("cannot open the file: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw .transport("cannot read the file: \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .transport("the file is not a regular file") }
        // O_NONBLOCK was for the open only: a file system that honours it on a regular file (FUSE may) could make
        // pread answer EAGAIN.
        guard fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK) == 0 else {
            throw .transport("cannot read the file: \(String(cString: strerror(errno)))")
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 16)
        defer { buffer.deallocate() }
        var position: Int64 = 0
        while position < length {
            let wanted = Int(min(Int64(blockSize), length - position))
            let got = pread(descriptor, buffer.baseAddress, wanted, off_t(offset + position))
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                throw .transport(
                    got < 0
                        ? "reading the file failed: \(String(cString: strerror(errno)))"
                        : "the file shrank while it was read")
            }
            consume(UnsafeRawBufferPointer(rebasing: buffer[..<got]))
            position += Int64(got)
        }
    }
}
