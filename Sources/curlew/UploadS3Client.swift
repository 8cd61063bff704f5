import Crypto
import CurlewEngine
import Foundation
import HTTPTypes
import Synchronization

/// At most N requests in flight across every file and every part of a run: `--concurrency` counts requests, so
/// one big file can use all of them and many small files share them.
final class TransferSlots: Sendable {
    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(free: count)) }

    func acquire() async {
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

    func release() {
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
struct SHA256Hex: Sendable, Equatable {
    let text: String
    init(_ digest: SHA256.Digest) { text = SigV4Signer.hex(digest) }
}

/// A request body for S3: its SHA-256 is known before it is sent, because it is signed and sent as the checksum.
enum S3Body: Sendable {
    case none
    case bytes([UInt8])
    /// A range of a file, streamed with `pread` by the engine.
    case file(path: String, offset: Int64, length: Int64, sha256: SHA256Hex)

    var length: Int64 {
        switch self {
        case .none: 0
        case .bytes(let bytes): Int64(bytes.count)
        case .file(_, _, let length, _): length
        }
    }

    var payloadHash: String {
        switch self {
        case .none: SigV4Signer.emptyPayloadHash
        case .bytes(let bytes): SigV4Signer.hexSHA256(bytes)
        case .file(_, _, _, let digest): digest.text
        }
    }
}

struct S3Reply: Sendable {
    let status: Int
    let headers: HTTPFields
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
}

enum S3RequestFailure: Error {
    /// A problem of the whole run (bad credentials, missing bucket, clock skew, wrong region), named once.
    case run(String)
    /// The store refused this request.
    case refused(S3ErrorReply)
    /// The request did not complete (connection, file read), after the retries allowed.
    case transport(String)
    case cancelled

    var reason: String {
        switch self {
        case .run: "not sent: the run stopped (see the error above)"
        case .refused(let reply): reply.summary
        case .transport(let reason): reason
        case .cancelled: "cancelled (interrupted)"
        }
    }
}

/// Signed requests to one bucket, each retried by `RetryRules.upload` and counted.
final class S3Client: Sendable {
    let http: CurlewClient
    let endpoint: S3Endpoint
    let signer: SigV4Signer
    /// `curlew upload`'s rules with the run's `--retries`.
    let retryRules: RetryRules
    let slots: TransferSlots
    let budget: SendBudget?
    private let problem = Mutex<String?>(nil)
    private let counts = Mutex(UploadTally())

    init(
        http: CurlewClient, endpoint: S3Endpoint, signer: SigV4Signer, retries: Int, slots: TransferSlots,
        budget: SendBudget?
    ) {
        self.http = http
        self.endpoint = endpoint
        self.signer = signer
        self.retryRules = RetryRules.upload.allowingRetries(retries)
        self.slots = slots
        self.budget = budget
    }

    /// The run's problem, once one request has met it.
    var runProblem: String? { problem.withLock { $0 } }

    /// Status counts, retries and connections, for the summary.
    var tally: UploadTally { counts.withLock { $0 } }

    /// Sends one request, signing each attempt anew (the signature carries the time).
    ///
    /// - Parameters:
    ///   - allowing: non-2xx statuses returned as a reply instead of thrown (404 for HEAD and ListParts).
    ///   - cleanup: an abort or delete that tidies up after a failure: sent even once the run has stopped.
    func send(
        _ method: HTTPRequest.Method, key: String, query: [(name: String, value: String)] = [],
        headers: [(name: String, value: String)] = [], body: S3Body = .none, allowing: Set<Int> = [],
        cleanup: Bool = false
    ) async throws(S3RequestFailure) -> S3Reply {
        try await retrying(maxAttempts: retryRules.maxAttempts) {
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
                if (200..<300).contains(status) || allowing.contains(status) { return .finished(reply) }
                let refusal = S3ErrorReply(
                    status: status, body: response.body, bucketRegionHeader: reply.header("x-amz-bucket-region"))
                if let runProblem = refusal.runProblem {
                    problem.withLock { $0 = $0 ?? runProblem }
                    throw S3RequestFailure.run(self.runProblem ?? runProblem)
                }
                failure = .refused(refusal)
                // S3's error codes say more than its statuses: the store's own verdict decides.
                retryDelay = refusal.isRetryable ? retryRules.delayBeforeRetry(afterAttempt: attempt.number) : nil
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
                if attempt.number == 1 { throw failure }
                throw .transport(failure.reason + " after \(attempt.number) attempts")
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
enum FileRangeDigest {
    static let blockSize = 1 << 20

    static func sha256(path: String, offset: Int64, length: Int64) throws(S3RequestFailure) -> SHA256.Digest {
        var hasher = SHA256()
        try read(path: path, offset: offset, length: length) { hasher.update(bufferPointer: $0) }
        return hasher.finalize()
    }

    static func md5(path: String, offset: Int64, length: Int64) throws(S3RequestFailure) -> Insecure.MD5Digest {
        var hasher = Insecure.MD5()
        try read(path: path, offset: offset, length: length) { hasher.update(bufferPointer: $0) }
        return hasher.finalize()
    }

    private static func read(
        path: String, offset: Int64, length: Int64, _ consume: (UnsafeRawBufferPointer) -> Void
    ) throws(S3RequestFailure) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .transport("cannot open the file: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
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
