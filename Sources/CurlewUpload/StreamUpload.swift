import Crypto
public import CurlewEngine
import CurlewS3
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Uploads one stream of unknown length (a pipe: a database dump, a backup) as one object, in constant memory:
/// what `curlew upload - URL` does, as `aws s3 cp - s3://…` and `s5cmd pipe` do.
///
/// To a ``UploadDestination/put(baseURL:)`` destination the stream goes as one PUT to that URL, chunked, the bytes
/// passed on as they are read (1 MiB ahead at most). A stream cannot be replayed, so a PUT that fails is not sent
/// again, and the folders above the URL are made with MKCOL before it (a WebDAV server that follows RFC 4918
/// refuses a PUT into a missing folder with 409 Conflict, after reading the body); a server whose folders are there
/// answers one MKCOL with 405. To an ``UploadDestination/s3(_:)`` destination the location's ``S3Location/key`` is
/// the object's: a stream that fits in one part goes as a single PUT, a longer one as a multipart upload whose part
/// size doubles every 1,000 parts, so S3's 10,000 parts hold up to 5 TiB whatever the stream's length (see
/// `StreamPartSizing`); each part is retried on its own. Either way the stream's SHA-256 is computed as it is read;
/// S3 stores it with the object (``StreamUploadSummary/sha256Stored``).
public final class StreamUpload: Sendable {
    /// What to send the stream to, and how.
    public struct Configuration: Sendable {
        /// A ``UploadDestination/put(baseURL:)`` URL (the stream's own URL, not a folder) or an
        /// ``UploadDestination/s3(_:)`` location whose ``S3Location/key`` (`s3://bucket/KEY`) names the object.
        public var destination: UploadDestination
        /// S3 parts in flight at once (each held in memory: memory is about this many parts).
        public var concurrency = 4
        /// Retries per S3 request (0 to 10); a PUT of the stream itself is never retried.
        public var retries = 2
        /// Extra request headers for a PUT destination.
        public var headers: [(name: String, value: String)] = []
        /// Bytes per second at most; nil for no limit.
        public var bytesPerSecondLimit: Int64?

        public init(destination: UploadDestination) { self.destination = destination }
    }

    private let configuration: Configuration
    private let client: CurlewClient

    /// - Throws: ``UploadError`` (``UploadError/Kind/invalidConfiguration``) for a multipart-form destination, an
    ///   S3 location without a key, or a bad URL.
    public init(_ configuration: Configuration, client: CurlewClient) throws(UploadError) {
        func invalid(_ message: String) -> UploadError { UploadError(.invalidConfiguration, message) }
        guard configuration.concurrency >= 1 else { throw invalid("concurrency must be at least 1") }
        guard (0...10).contains(configuration.retries) else { throw invalid("retries must be between 0 and 10") }
        switch configuration.destination.storage {
        case .put(let url):
            do {
                _ = try CurlewRequest(method: .put, url: url)
            } catch {
                let named = URLRedaction.messages.naming(url)
                throw invalid("cannot send to \(named): \((error as? CurlewError)?.detail ?? "\(error)")")
            }
        case .multipartForm:
            throw invalid("a stream goes as a PUT to a URL or as an S3 object, not as a form")
        case .s3(let destination):
            let key = destination.location.key
            if key.isEmpty || key.utf8.last == UInt8(ascii: "/") {
                throw invalid("a stream needs the object's key: s3://\(destination.location.bucket)/KEY")
            }
            if destination.endpoint.bucket != destination.location.bucket {
                throw invalid("the endpoint's bucket \(destination.endpoint.bucket) is not the location's")
            }
        }
        self.configuration = configuration
        self.client = client
    }

    /// Reads the stream to its end with `read` and uploads it.
    ///
    /// - Parameter read: the next bytes, at most the count asked for; empty at the end of the stream. What it throws
    ///   fails the upload (and aborts an S3 multipart upload).
    /// - Returns: the bytes, parts and SHA-256 sent; ``StreamUploadSummary/error`` says why the store did not take
    ///   the stream, if it did not.
    public func run(reading read: @escaping @Sendable (Int) async throws -> [UInt8]) async -> StreamUploadSummary {
        let started = ContinuousClock.now
        let budget = configuration.bytesPerSecondLimit.map { SendBudget(bytesPerSecond: $0) }
        var summary: StreamUploadSummary
        switch configuration.destination.storage {
        case .put(let url):
            summary = await put(to: url, read: read)
        case .s3(let destination):
            let s3 = S3Client(
                http: client, endpoint: destination.endpoint, credentials: destination.credentials,
                retries: configuration.retries, concurrency: configuration.concurrency, budget: budget)
            let uploader = S3StreamUploader(client: s3, options: destination.objectOptions)
            do throws(S3RequestFailure) {
                let stored = try await uploader.upload(key: destination.location.key, read: read)
                summary = StreamUploadSummary(
                    url: "s3://\(destination.location.bucket)/\(destination.location.key)", bytes: stored.bytes,
                    parts: stored.parts,
                    sha256: stored.sha256, sha256Stored: stored.sha256Stored)
            } catch {
                summary = StreamUploadSummary(
                    url: "s3://\(destination.location.bucket)/\(destination.location.key)", bytes: 0, parts: 0,
                    sha256: nil, sha256Stored: false,
                    error: s3.runProblem ?? error.reason)
            }
        case .multipartForm:
            summary = StreamUploadSummary(
                url: "", bytes: 0, parts: 0, sha256: nil, sha256Stored: false, error: "forms take no streams")
        }
        summary.seconds = (ContinuousClock.now - started).seconds
        return summary
    }

    /// One chunked PUT, fed as the stream is read, its SHA-256 computed on the way.
    private func put(
        to url: String, read: @escaping @Sendable (Int) async throws -> [UInt8]
    ) async
        -> StreamUploadSummary
    {
        var folderProblem: String?
        if case .failed(let failure) = await WebDAVParentFolders.makeBeforeSending(
            to: url, client: client, headers: configuration.headers)
        {
            folderProblem = failure.reason
        }
        let (body, writer) = RequestBodyStream.makeStream(bufferLimit: 1 << 20)
        let counted = Mutex<(bytes: Int64, hasher: SHA256)>((0, SHA256()))
        let pump = Task {
            do {
                while true {
                    let chunk = try await read(256 * 1024)
                    if chunk.isEmpty { break }
                    counted.withLock {
                        $0.bytes += Int64(chunk.count)
                        $0.hasher.update(data: chunk)
                    }
                    try await writer.write(chunk)
                }
                writer.finish()
            } catch {
                writer.fail("reading the input failed: \(error)")
            }
        }
        var error: String?
        do {
            var request = try CurlewRequest(method: .put, url: url, body: .stream(body))
            for (name, value) in configuration.headers { try request.addHeader(name, value) }
            request.maxSendBytesPerSecond = configuration.bytesPerSecondLimit
            let response = try await client.execute(request)
            if !(200..<300).contains(response.status.code) {
                error =
                    "HTTP \(response.status.code)"
                    + (response.status.code == 409
                        ? folderProblem.map { " (its folder could not be made: \($0))" } ?? "" : "")
            }
        } catch let failure as CurlewError {
            error = "\(failure.code.name): \(failure.detail)"
        } catch {
            pump.cancel()
            return StreamUploadSummary(
                url: url, bytes: 0, parts: 0, sha256: nil, sha256Stored: false, error: "\(error)")
        }
        if error == nil {
            // The body ended before the response came: the pump is done.
            _ = await pump.value
        } else {
            // It may be blocked in a read of a pipe that is still open: left to end with the process.
            pump.cancel()
        }
        let (bytes, hex) = counted.withLock { ($0.bytes, SHA256Hex($0.hasher.finalize()).text) }
        return StreamUploadSummary(
            url: url, bytes: bytes, parts: 0, sha256: error == nil ? hex : nil, sha256Stored: false, error: error)
    }
}

/// What a ``StreamUpload`` sent.
public struct StreamUploadSummary: Sendable, Codable, Hashable {
    /// Where the stream went (an S3 location as `s3://bucket/key`); a password or a key in the URL is redacted,
    /// since a summary is printed, logged and kept.
    public let url: String
    /// The stream's bytes, as read.
    public let bytes: Int64
    /// S3 multipart parts; 0 for a single PUT.
    public let parts: Int
    /// The whole stream's SHA-256 in hex; nil when the upload failed.
    public let sha256: String?
    /// Whether the store keeps the SHA-256 with the object (S3: `x-amz-meta-curlew-sha256`).
    public let sha256Stored: Bool
    /// Why the stream was not stored; nil when it was.
    public let error: String?
    /// Wall time of the upload.
    public package(set) var seconds: Double = 0

    package init(
        url: String, bytes: Int64, parts: Int, sha256: String?, sha256Stored: Bool, error: String? = nil
    ) {
        self.url = URLRedaction.messages.displaying(url)
        self.bytes = bytes
        self.parts = parts
        self.sha256 = sha256
        self.sha256Stored = sha256Stored
        self.error = error
    }
}

/// Reads a file descriptor (standard input for `curlew upload -`) with blocking `read(2)` calls on a thread of its
/// own, never on the cooperative pool, one call at a time.
public final class DescriptorReader: Sendable {
    private let descriptor: Int32
    private let queue = DispatchQueue(label: "curlew.descriptor-reader")

    /// A reader of `descriptor`, which stays open and the caller's.
    public init(descriptor: Int32) { self.descriptor = descriptor }

    /// Up to `count` bytes; empty at the end of the input.
    ///
    /// Cancelling the calling task ends the wait at once with `CancellationError`, though no byte may ever come (a
    /// producer that is still running); what that `read(2)` returns later is dropped.
    ///
    /// - Throws: ``UploadError`` (``UploadError/Kind/unreadableSource``) when `read(2)` fails.
    public func read(upTo count: Int) async throws -> [UInt8] {
        let descriptor = descriptor
        let waiter = ReadWaiter()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
                guard waiter.install(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                queue.async {
                    var bytes = [UInt8](repeating: 0, count: max(count, 1))
                    var got: Int
                    repeat {
                        got = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, count) }
                    } while got < 0 && errno == EINTR
                    if got < 0 {
                        waiter.finish(
                            .failure(
                                UploadError(
                                    .unreadableSource, "reading the input failed: \(String(cString: strerror(errno)))"))
                        )
                    } else {
                        bytes.removeLast(bytes.count - got)
                        waiter.finish(.success(bytes))
                    }
                }
            }
        } onCancel: {
            waiter.finish(.failure(CancellationError()))
        }
    }

    /// Resumes the caller of one read once: with the read's outcome or its cancellation, whichever comes first.
    private final class ReadWaiter: Sendable {
        private enum State {
            case notYet
            case waiting(CheckedContinuation<[UInt8], any Error>)
            case done
        }

        private let state = Mutex(State.notYet)

        /// Whether the caller waits now; false when it was cancelled first.
        func install(_ continuation: CheckedContinuation<[UInt8], any Error>) -> Bool {
            state.withLock { state in
                guard case .notYet = state else { return false }
                state = .waiting(continuation)
                return true
            }
        }

        func finish(_ outcome: Result<[UInt8], any Error>) {
            let continuation = state.withLock { state -> CheckedContinuation<[UInt8], any Error>? in
                defer { state = .done }
                if case .waiting(let continuation) = state { return continuation }
                return nil
            }
            continuation?.resume(with: outcome)
        }
    }
}
