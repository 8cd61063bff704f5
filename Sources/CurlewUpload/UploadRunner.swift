package import CurlewEngine
package import CurlewS3
import Foundation
import Synchronization

package enum UploadMode: String, Sendable, CaseIterable {
    /// PUT to the URL plus the file's relative path.
    case put
    /// POST of a multipart form to the URL: the file as part `file`, its relative path as field `path`.
    case multipart
}

/// A digest of each file in its PUT's headers, for servers that check what they store (`--checksum-header`).
///
/// A struct rather than an enum, so that algorithms (crc32c) can be added without breaking a caller's `switch`:
/// compare with `==`; ``name`` is stable, and is what `--checksum-header` takes.
public struct UploadChecksumHeader: Sendable, Hashable, CustomStringConvertible {
    /// The package's exhaustive view of the algorithm.
    package enum Storage: Sendable, Hashable {
        case md5
        case sha256
    }

    /// What the algorithm is, for an exhaustive `switch` inside the package.
    package let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// `Content-MD5` (RFC 1864): what S3's PUT API, Azure and many WebDAV servers verify.
    public static let md5 = UploadChecksumHeader(.md5)
    /// `Digest: SHA-256=…` (RFC 3230) and `Content-Digest: sha-256=:…:` (RFC 9530), old and new spellings.
    public static let sha256 = UploadChecksumHeader(.sha256)

    /// Every algorithm, in the order the command's help lists them.
    package static let all: [UploadChecksumHeader] = [.md5, .sha256]

    /// The algorithm with this ``name``; nil for a name that is none of them.
    ///
    /// - Parameter name: `"md5"` or `"sha256"`.
    public init?(name: String) {
        guard let header = Self.all.first(where: { $0.name == name }) else { return nil }
        self = header
    }

    /// The stable name: the static member's name (`"md5"`, `"sha256"`), as `--checksum-header` takes it.
    public var name: String {
        switch storage {
        case .md5: "md5"
        case .sha256: "sha256"
        }
    }

    /// The ``name``.
    public var description: String { name }

    /// The headers for a file, read once with `pread` before it is sent.
    package func headers(forFile path: String, length: Int64) throws(S3RequestFailure) -> [(String, String)] {
        switch storage {
        case .md5:
            return [
                (
                    "Content-MD5",
                    Data(try FileRangeDigest.md5(path: path, offset: 0, length: length)).base64EncodedString()
                )
            ]
        case .sha256:
            let digest = Data(try FileRangeDigest.sha256(path: path, offset: 0, length: length)).base64EncodedString()
            return [("Digest", "SHA-256=\(digest)"), ("Content-Digest", "sha-256=:\(digest):")]
        }
    }
}

package struct UploadPlan: Sendable {
    /// The PUT folder's URL, or the form's URL.
    package let baseURL: String
    /// ``baseURL`` read as a folder, once for every file: where a PUT's path goes.
    package let folderURL: FolderURL
    package let mode: UploadMode
    package let headers: [(String, String)]
    package let fields: [(String, String)]
    package let gzip: Bool
    package let retries: Int
    package let concurrency: Int
    /// Files started per second at most; nil starts the next one as soon as a transfer slot is free.
    package let filesPerSecond: Double?
    /// `--bwlimit`, shared by every request of the run.
    package let budget: SendBudget?
    package let checksumHeader: UploadChecksumHeader?

    package func url(for item: UploadItem) -> String {
        mode == .put ? folderURL.appending(item.relativePath) : baseURL
    }
}

/// A file that was not sent, and why.
public struct UploadFailure: Sendable, Codable, Hashable {
    /// The file's relative path: its name on the server.
    public let path: String
    /// Why it was not sent: the server's status and the start of its reply, a transport error (after how many
    /// attempts), `cancelled (interrupted)`, or why it could not be listed.
    public let error: String

    package init(path: String, error: String) {
        self.path = path
        self.error = error
    }
}

package struct UploadTally: Sendable {
    package var uploaded = 0
    /// `--skip-existing`: files the bucket already held.
    package var alreadyThere = 0
    /// ``alreadyThere`` by the rule that recognised each file (``S3ExistingObjectRule`` names, and
    /// `in-flight-size` for a PUT a killed run had in flight).
    package var alreadyThereByRule: [String: Int] = [:]
    /// Forms a killed run had in flight, sent again: a second copy unless the server honours `Idempotency-Key`.
    package var resentAfterCrash: [String] = []
    package var bytes: Int64 = 0
    package var retries = 0
    package var connectionsOpened = 0
    package var statusCounts: [Int: Int] = [:]
    package var failures: [UploadFailure] = []

    /// One more response: its status, and a connection opened unless it reused one.
    package mutating func count(status: Int, reusedConnection: Bool) {
        statusCounts[status, default: 0] += 1
        if !reusedConnection { connectionsOpened += 1 }
    }

    /// One more file the destination already held, recognised by the rule named `rule`.
    package mutating func countAlreadyThere(by rule: String) {
        alreadyThere += 1
        alreadyThereByRule[rule, default: 0] += 1
    }

    package mutating func add(_ other: UploadTally) {
        uploaded += other.uploaded
        alreadyThere += other.alreadyThere
        alreadyThereByRule.merge(other.alreadyThereByRule, uniquingKeysWith: +)
        resentAfterCrash += other.resentAfterCrash
        bytes += other.bytes
        retries += other.retries
        connectionsOpened += other.connectionsOpened
        statusCounts.merge(other.statusCounts, uniquingKeysWith: +)
        failures += other.failures
    }
}

package struct UploadProgressSnapshot: Sendable {
    package let files: Int
    package let bytes: Int64
    package let failed: Int
}

package final class UploadRunner: Sendable {
    private let client: CurlewClient
    private let plan: UploadPlan
    private let items: [UploadItem]
    private let journal: UploadJournal?
    /// Set for s3:// targets: files go through it instead of one request each.
    private let s3: S3Uploader?
    /// Where the S3 uploader puts each file: the bucket and key prefix.
    private let s3Location: S3Location?
    /// For PUTs to http(s): the folders a server that does not make them needs (MKCOL after a 409).
    private let parentFolders: WebDAVParentFolders?
    /// Called after each file is settled (sent, skipped or failed), for the progress sequence.
    private let onFileSettled: @Sendable (UploadProgressSnapshot) -> Void
    /// Called with every file event as it happens (``UploadConfiguration/onEvent``).
    private let onEvent: (@Sendable (UploadEvent) -> Void)?
    private let nextIndex = Atomic<Int>(0)
    private let stopRequested = Atomic<Bool>(false)
    private let filesDone = Atomic<Int>(0)
    private let bytesDone = Atomic<Int>(0)
    private let filesFailed = Atomic<Int>(0)
    /// `curlew upload`'s rules with the run's `--retries`.
    private let retryRules: RetryRules
    package static let liveProgressThreshold: Int64 = 4 << 20

    package init(
        client: CurlewClient, plan: UploadPlan, items: [UploadItem], journal: UploadJournal?,
        s3: (uploader: S3Uploader, location: S3Location)? = nil,
        onFileSettled: @escaping @Sendable (UploadProgressSnapshot) -> Void = { _ in },
        onEvent: (@Sendable (UploadEvent) -> Void)? = nil
    ) {
        self.onEvent = onEvent
        self.client = client
        self.plan = plan
        self.items = items
        self.journal = journal
        self.s3 = s3?.uploader
        self.s3Location = s3?.location
        self.parentFolders =
            plan.mode == .put && s3 == nil
            ? WebDAVParentFolders(
                folder: WebDAVFolder(
                    baseURL: plan.baseURL, client: client, headers: plan.headers.map { (name: $0.0, value: $0.1) }))
            : nil
        self.onFileSettled = onFileSettled
        self.retryRules = RetryRules.upload.allowingRetries(plan.retries)
    }

    /// Stops starting new files (Ctrl-C); transfers in flight go on.
    package func requestStop() {
        stopRequested.store(true, ordering: .relaxed)
    }

    /// Files never started because the run was stopped.
    package var notStarted: Int { max(0, items.count - min(nextIndex.load(ordering: .relaxed), items.count)) }

    package var progress: UploadProgressSnapshot {
        UploadProgressSnapshot(
            files: filesDone.load(ordering: .relaxed), bytes: Int64(bytesDone.load(ordering: .relaxed)),
            failed: filesFailed.load(ordering: .relaxed))
    }

    package func run() async -> UploadTally {
        let start = ContinuousClock.now
        let executors = client.executors
        let workers = min(plan.concurrency, max(items.count, 1))
        return await withTaskGroup(of: UploadTally.self) { group in
            for worker in 0..<workers {
                if executors.isEmpty {
                    group.addTask { await self.work(start: start) }
                } else {
                    // Workers do little between transfers (a stat, a journal line), so they can live on the loops.
                    group.addTask(executorPreference: executors[worker % executors.count]) {
                        await self.work(start: start)
                    }
                }
            }
            var total = UploadTally()
            for await tally in group { total.add(tally) }
            return total
        }
    }

    private func work(start: ContinuousClock.Instant) async -> UploadTally {
        var tally = UploadTally()
        while !stopRequested.load(ordering: .relaxed) && !Task.isCancelled {
            let index = nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue
            guard index < items.count else { break }
            if let filesPerSecond = plan.filesPerSecond {
                // A tiny rate puts a later file centuries away, past 64-bit nanoseconds: it waits "for ever"
                // (until the run is stopped) rather than trapping.
                let offset = Double(index) * 1e9 / filesPerSecond
                let due = start + .nanoseconds(offset < Double(Int64.max) ? Int64(offset) : .max)
                if due > .now {
                    do { try await Task.sleep(until: due, clock: .continuous) } catch {
                        fail(items[index], "cancelled (interrupted)", into: &tally)
                        break
                    }
                }
            }
            await send(items[index], into: &tally)
            onFileSettled(progress)
        }
        return tally
    }

    private func send(_ listed: UploadItem, into tally: inout UploadTally) async {
        if let s3, let s3Location {
            await send(listed, to: s3, key: s3Location.key(for: listed.relativePath), into: &tally)
            return
        }
        let idempotent = plan.mode == .put
        // A PUT refused with 409 is sent again once its folders are made or found: once per file, not per attempt.
        var madeParentFolders = false
        // An attempt whose MKCOL failed in a way worth retrying leaves the next attempt to make the folders before
        // its PUT: the 409 is known, and sending the body into the missing folder again would only meet it again.
        var makeFoldersBeforePUT = false
        await retrying(maxAttempts: retryRules.maxAttempts) { (attempt: RetryAttempt) async -> RetryStep<Void> in
            // The state just before sending is what the journal records: the engine fails the transfer if the file
            // changes from there on.
            guard let item = listed.currentState() else {
                fail(listed, "file vanished: \(String(cString: strerror(errno)))", into: &tally)
                return .finished(())
            }
            let failure: String
            let retryDelay: Duration?
            // Only large plain files report progress: for small ones the per-file count is fine-grained enough, and
            // gzip changes what "bytes sent" means.
            if attempt.number == 1, let journal {
                switch plan.mode {
                case .put:
                    if journal.wasInFlight(item), await serverHolds(item) {
                        // A run killed while this file was in flight; the server has it whole: not sent twice.
                        journal.record(item)
                        tally.countAlreadyThere(by: Self.inFlightSizeRule)
                        filesDone.add(1, ordering: .relaxed)
                        onEvent?(
                            UploadEvent(.skipped, path: item.relativePath, size: item.size, rule: Self.inFlightSizeRule)
                        )
                        return .finished(())
                    }
                case .multipart:
                    // A form cannot be looked up: the user is told which ones may now be stored twice.
                    if journal.wasInFlight(item) { tally.resentAfterCrash.append(item.relativePath) }
                }
                journal.recordSending(item)
            }
            if attempt.number == 1 { onEvent?(UploadEvent(.started, path: item.relativePath, size: item.size)) }
            let live = item.size >= Self.liveProgressThreshold && !plan.gzip ? LiveFileBytes(limit: item.size) : nil
            defer { if let live { bytesDone.subtract(live.settle(), ordering: .relaxed) } }
            do {
                func send() async throws -> CurlewResponse {
                    var request = try makeRequest(for: item)
                    if let live {
                        request.progressInterval = .milliseconds(200)
                        request.onProgress = { [self] progress in
                            live.report(sent: progress.bytesSent, into: bytesDone)
                        }
                    }
                    let response = try await client.execute(request)
                    tally.count(status: Int(response.status.code), reusedConnection: response.metrics.reusedConnection)
                    return response
                }
                func count(_ request: WebDAVParentFolders.Request) {
                    tally.count(status: request.status, reusedConnection: request.reusedConnection)
                }
                if makeFoldersBeforePUT, let parentFolders {
                    makeFoldersBeforePUT = false
                    if case .failed(let problem) = await parentFolders.makeAfterConflict(
                        for: item.relativePath, made: count)
                    {
                        try Task.checkCancellation()
                        throw FoldersNotMade(problem: problem)
                    }
                }
                await parentFolders?.prepare(for: item.relativePath, made: count)
                // A 409 for a file whose folder was known to exist is about the file, not its folders.
                let folderKnown = parentFolders?.knowsFolder(of: item.relativePath) ?? true
                try await plan.budget?.reserve(item.size)
                var response = try await send()
                var parentFoldersProblem: String?
                var parentFoldersRetryDelay: Duration?
                if response.status.code == 409, let parentFolders, !folderKnown, !madeParentFolders {
                    madeParentFolders = true
                    switch await parentFolders.makeAfterConflict(for: item.relativePath, made: count) {
                    case .made, .foundThere:
                        try await plan.budget?.reserve(item.size)
                        response = try await send()
                    case .failed(let problem):
                        try Task.checkCancellation()
                        parentFoldersProblem = problem.reason
                        parentFoldersRetryDelay = folderRetryDelay(after: problem, idempotent: idempotent, attempt)
                        makeFoldersBeforePUT = parentFoldersRetryDelay != nil
                    }
                }
                if (200..<300).contains(response.status.code) {
                    parentFolders?.fileSent(item.relativePath)
                    journal?.record(item)
                    tally.uploaded += 1
                    tally.bytes += item.size
                    filesDone.add(1, ordering: .relaxed)
                    bytesDone.add(Int(item.size), ordering: .relaxed)
                    onEvent?(UploadEvent(.done, path: item.relativePath, size: item.size))
                    return .finished(())
                }
                failure =
                    "HTTP \(response.status.code)" + Self.bodyHint(response.body)
                    + (parentFoldersProblem.map { " (its folder could not be made: \($0))" } ?? "")
                retryDelay =
                    parentFoldersRetryDelay
                    ?? retryRules.delayBeforeRetry(
                        afterStatus: Int(response.status.code), retryAfter: response.header("Retry-After"),
                        idempotent: idempotent, attempt: attempt.number)
            } catch let error as CurlewError {
                failure = "\(error.code.name): \(error.detail)" + (error.curlMessage.map { " (\($0))" } ?? "")
                retryDelay = retryRules.delayBeforeRetry(after: error, idempotent: idempotent, attempt: attempt.number)
            } catch let notMade as FoldersNotMade {
                failure = "its folder could not be made: \(notMade.problem.reason)"
                retryDelay = folderRetryDelay(after: notMade.problem, idempotent: idempotent, attempt)
                makeFoldersBeforePUT = retryDelay != nil
            } catch is CancellationError {
                fail(listed, "cancelled (interrupted)", into: &tally)
                return .finished(())
            } catch {
                fail(listed, "\(error)", into: &tally)
                return .finished(())
            }
            // A run being stopped does not wait to retry: the file fails with what its last attempt met.
            guard let retryDelay, !Task.isCancelled else {
                fail(listed, attempt.failureReason(failure), into: &tally)
                return .finished(())
            }
            tally.retries += 1
            return .retry(after: retryDelay)
        } onCancelledWait: { _ in
            fail(listed, "cancelled (interrupted)", into: &tally)
        }
    }

    /// An attempt that made its file's folders before the PUT, and failed to: the body was not sent.
    private struct FoldersNotMade: Error {
        let problem: WebDAVParentFolders.Failure
    }

    /// The wait before the next attempt of a file whose folder's MKCOL failed, when what it met is worth retrying
    /// (a 503, a connection refused): nil otherwise.
    private func folderRetryDelay(
        after failure: WebDAVParentFolders.Failure, idempotent: Bool, _ attempt: RetryAttempt
    ) -> Duration? {
        switch failure.cause {
        case .status(let status, let retryAfter):
            retryRules.delayBeforeRetry(
                afterStatus: status, retryAfter: retryAfter, idempotent: idempotent, attempt: attempt.number)
        case .error(let error):
            retryRules.delayBeforeRetry(after: error, idempotent: idempotent, attempt: attempt.number)
        case .other: nil
        }
    }

    private func send(_ listed: UploadItem, to s3: S3Uploader, key: String, into tally: inout UploadTally) async {
        guard let item = listed.currentState() else {
            fail(listed, "file vanished: \(String(cString: strerror(errno)))", into: &tally)
            return
        }
        let counted = Atomic<Int>(0)
        onEvent?(UploadEvent(.started, path: item.relativePath, size: item.size))
        let onEvent = onEvent
        let outcome = await s3.upload(
            item, key: key,
            sent: { [self] bytes in
                counted.add(Int(bytes), ordering: .relaxed)
                bytesDone.add(Int(bytes), ordering: .relaxed)
            },
            partStored: { number, size in
                onEvent?(UploadEvent(.partDone, path: item.relativePath, size: size, part: number))
            })
        switch outcome {
        case .uploaded:
            tally.uploaded += 1
            tally.bytes += item.size
            filesDone.add(1, ordering: .relaxed)
            // Parts resumed from an earlier run count as progress, not as bytes sent by this one.
            bytesDone.add(Int(item.size) - counted.load(ordering: .relaxed), ordering: .relaxed)
            onEvent?(UploadEvent(.done, path: item.relativePath, size: item.size))
        case .alreadyThere(let rule):
            tally.countAlreadyThere(by: rule.name)
            filesDone.add(1, ordering: .relaxed)
            onEvent?(UploadEvent(.skipped, path: item.relativePath, size: item.size, rule: rule.name))
        case .failed(let reason):
            bytesDone.subtract(counted.load(ordering: .relaxed), ordering: .relaxed)
            fail(listed, reason, into: &tally)
            // Bad credentials, a missing bucket…: every other file would fail the same way.
            if s3.client.runProblem != nil { requestStop() }
        }
    }

    private func fail(_ item: UploadItem, _ reason: String, into tally: inout UploadTally) {
        tally.failures.append(UploadFailure(path: item.relativePath, error: reason))
        filesFailed.add(1, ordering: .relaxed)
        onEvent?(UploadEvent(.failed, path: item.relativePath, size: item.size, error: reason))
    }

    /// The rule name of a file a killed run had in flight that the server holds with its length, stored no earlier
    /// than the file's last change (``serverHolds``): a PUT lands whole or not at all on the servers this targets
    /// (nginx and WebDAV servers write to a temporary file).
    static let inFlightSizeRule = "in-flight-size"

    /// Whether the server answers HEAD for the file's URL with a 2xx, the length it was sent and a `Last-Modified` no
    /// earlier than the file's last change, as WebDAV servers and object stores do for a stored file: the file's
    /// length, or with `--gzip` its compressed length (the server holds the gzip bytes; the file is compressed again
    /// to know it, in constant memory). Without a `Last-Modified` the file is sent again.
    private func serverHolds(_ item: UploadItem) async -> Bool {
        let compression: CurlewRequest.BodyCompression? = plan.gzip ? .gzip() : nil
        guard var request = try? CurlewRequest(method: .head, url: plan.url(for: item)),
            let sentLength = try? CurlewRequest.Body.file(.path(item.absolutePath)).encodedLength(
                compression: compression)
        else {
            return false
        }
        for (name, value) in plan.headers where name.lowercased() == "authorization" {
            try? request.setHeader(name, value)
        }
        guard let response = try? await client.execute(request), (200..<300).contains(response.status.code),
            response.header("Content-Length").flatMap({ Int64($0) }) == sentLength,
            let stored = response.header("Last-Modified").flatMap(WebDAVFolder.httpDate)
        else {
            return false
        }
        // A copy stored before the file last changed is an earlier version at the same length (a file rewritten in
        // place after a run that sent it, then killed while sending it again): sent again.
        return item.mayBeHeld(byCopyModifiedAt: stored)
    }

    private func makeRequest(for item: UploadItem) throws -> CurlewRequest {
        var request: CurlewRequest
        switch plan.mode {
        case .put:
            request = try CurlewRequest(method: .put, url: plan.url(for: item), body: .file(.path(item.absolutePath)))
        case .multipart:
            // The path and fields come before the file, so a server can decide where the file goes before it streams.
            var form = MultipartForm()
            form.append(value: item.relativePath, forKey: "path")
            for (name, value) in plan.fields { form.append(value: value, forKey: name) }
            let fileName =
                PercentEncoding.segments(of: item.relativePath, omittingEmpty: true).last.map(String.init)
                ?? item.relativePath
            form.append(fileAt: item.absolutePath, forKey: "file", fileName: fileName)
            request = try CurlewRequest(method: .post, url: plan.url(for: item), body: .multipart(form))
        }
        for (name, value) in plan.headers { try request.addHeader(name, value) }
        if request.header("Idempotency-Key") == nil {
            try request.setHeader("Idempotency-Key", Self.idempotencyKey(for: item, url: plan.url(for: item)))
        }
        if let checksumHeader = plan.checksumHeader {
            do {
                for (name, value) in try checksumHeader.headers(forFile: item.absolutePath, length: item.size) {
                    try request.setHeader(name, value)
                }
            } catch let failure as S3RequestFailure {
                throw UnreadableFile(description: failure.reason)
            }
        }
        if plan.gzip { request.bodyCompression = .gzip() }
        request.maxSendBytesPerSecond = plan.budget?.bytesPerSecond
        return request
    }

    /// The same for every attempt and every run that sends this version of the file to this URL, and different for
    /// any other (the IETF's `Idempotency-Key` header, a structured-field string): a server that honours it stores a
    /// file once even when a run killed mid-file sends it again, which a form upload cannot otherwise be spared (no
    /// HEAD can tell whether a form endpoint took the file).
    static func idempotencyKey(for item: UploadItem, url: String) -> String {
        let identity = "\(url)\n\(item.relativePath)\n\(item.size)\n\(item.modifiedNanoseconds)"
        return "\"" + SigV4Signer.hexSHA256(Array(identity.utf8)).prefix(32) + "\""
    }

    private static func bodyHint(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(120), as: UTF8.self)
            .split(whereSeparator: \.isNewline).joined(separator: " ").trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? "" : ": \(text)"
    }
}

/// A file whose checksum header could not be computed: the file fails with this reason.
private struct UnreadableFile: Error, CustomStringConvertible {
    let description: String
}

/// Bytes of one large file counted into the live progress while it is sent, so a big file moves the MB/s and
/// ETA figures before it completes. Called on the loop thread: one exchange and one add.
private final class LiveFileBytes: Sendable {
    private let counted = Atomic<Int>(0)
    private let limit: Int

    package init(limit: Int64) { self.limit = Int(limit) }

    /// Adds the growth since the last report to `total`, unless the file was settled (a late report after the end).
    package func report(sent: Int64, into total: borrowing Atomic<Int>) {
        let now = min(Int(sent), limit)
        var before = counted.load(ordering: .relaxed)
        while before >= 0 && now > before {
            let (exchanged, original) = counted.compareExchange(expected: before, desired: now, ordering: .relaxed)
            if exchanged {
                total.add(now - before, ordering: .relaxed)
                return
            }
            before = original
        }
    }

    /// Stops counting and returns what was counted, so the caller can settle the total.
    package func settle() -> Int {
        max(0, counted.exchange(-1, ordering: .relaxed))
    }
}
