public import CurlewEngine
package import CurlewS3
package import CurlewSharding
import Foundation
import Synchronization

/// One upload of a folder or manifest: listed when it is made, sent by ``run()``, N files at a time, each retried
/// when that is safe, and recorded in the journal as the server accepts it.
///
/// ```swift
/// var configuration = UploadConfiguration(
///     source: .folder("/data/photos"), destination: .put(baseURL: "https://dav.example/photos/"))
/// configuration.journalPath = "/var/lib/app/photos.journal"
/// let upload = try Upload(configuration, client: CurlewClient())
/// let summary = try await upload.run()
/// ```
///
/// Cancelling the task that runs ``run()`` cancels the transfers in flight; ``stopStartingFiles()`` lets them
/// finish. Either way, an upload made again with the same journal sends only what is missing. An `Upload` runs
/// once.
public final class Upload: Sendable {
    /// What the upload was made from.
    public let configuration: UploadConfiguration
    /// The files considered, the journal's path, and what sharding and the filters left out.
    package let selection: UploadSelection
    /// Files to send in this run: those the journal does not record as sent.
    package let pending: [UploadItem]
    package let journal: UploadJournal?
    /// The journal whose `done` records leave files out of this run; nil for a selection made from the destination.
    private let journalSkips: UploadJournal?
    /// Where files go, as the summary names it: the PUT base URL (ending in `/`), the form URL or `s3://…`.
    package let target: String
    package let mode: UploadMode
    /// Set for S3 destinations: its requests are what the summary counts.
    package let s3Client: S3Client?
    /// Set for S3 destinations: the uploader and where it puts files.
    private let s3: (uploader: S3Uploader, location: S3Location)?
    private let runner: UploadRunner
    private let broadcast: ProgressBroadcast
    private let hasRun = Atomic<Bool>(false)
    private let stopAsked = Atomic<Bool>(false)

    /// Lists the source, applies the shard and the filters, opens the journal and checks the destination; sends
    /// nothing.
    ///
    /// - Parameters:
    ///   - configuration: what to send, where, and how.
    ///   - client: sends the requests; give it at least `configuration.concurrency` connections per host. The
    ///     upload does not shut it down.
    /// - Throws: ``UploadError`` when the source cannot be read, the journal cannot be opened, or the
    ///   configuration is impossible (a bad URL, an option the destination does not take).
    public convenience init(_ configuration: UploadConfiguration, client: CurlewClient) throws(UploadError) {
        try Self.check(configuration)
        let selection = try UploadSelection.make(
            source: configuration.source, filter: configuration.filter, shard: configuration.shard,
            journalPath: configuration.journalPath)
        try self.init(configuration, client: client, selection: selection)
    }

    /// What a journal records as its destination: the target URL's scheme, host and port and its path (the S3
    /// store's bucket and prefix, and its endpoint). Another host, port or scheme with the same path is another
    /// place: a journal used for staging and then for production must not make production skip what staging got.
    /// The same place written otherwise is the same: the scheme and host are lower-cased and the port always
    /// written (`https://host:443`), as the engine names an origin; an S3 store is the same however its bucket is
    /// addressed. Nothing in it is a credential (no user-info, no query value), as a journal is a file users keep
    /// and share.
    package static func journalDestination(_ destination: UploadDestination) -> JournalDestination {
        if let name = destination.journalName { return JournalDestination(name: name, pathOnlyName: name) }
        let url: String
        let path: Substring
        let hasQuery: Bool
        switch destination.storage {
        case .put(let baseURL):
            let folder = FolderURL(baseURL)
            (url, path, hasQuery) = (baseURL, Substring(folder.path), !folder.query.isEmpty)
        case .multipartForm(let formURL, _):
            let parts = URLParts(formURL)
            (url, path, hasQuery) = (formURL, parts.pathOrRoot, !parts.query.isEmpty)
        case .s3(let s3):
            // The endpoint's authority holds the bucket when it is virtual-hosted (`bucket.host`): the store is the
            // host after it.
            let endpoint = s3.endpoint
            let bucketLabel = Array((endpoint.bucket + ".").utf8)
            let store =
                endpoint.virtualHosted && endpoint.authority.utf8.starts(with: bucketLabel)
                ? String(decoding: endpoint.authority.utf8.dropFirst(bucketLabel.count), as: UTF8.self)
                : endpoint.authority
            return JournalDestination(
                name: "\(s3.location) at \(journalOrigin(of: "\(endpoint.scheme)://\(store)/"))",
                pathOnlyName: s3.location.description)
        }
        // A URL with a query is another destination than the URL alone (`upload?env=prod` is not `upload`; a
        // folder's files went to `/files/?token=t/a.txt` before the query followed each file's path): it is marked
        // `path?`. The query's value stays out, as it may be a credential: two queries on one path are one name.
        let named = path + (hasQuery ? "?" : "")
        return JournalDestination(name: journalOrigin(of: url) + named, pathOnlyName: String(named))
    }

    /// The scheme, host and port of `url` as a journal names them: the engine's origin (`https://host:443`, the
    /// scheme and host lower-cased and the port always written), the one every credential is tied to. A URL the
    /// engine's origin parser cannot read (`http+unix://%2Ftmp%2Fa.sock/`, whose host is a percent-encoded socket
    /// path) is named by its lower-cased scheme and its authority as written, never by nothing: a journal of one
    /// socket must not pass for another socket's, nor for a path-only journal that any host would take. User-info
    /// (a password) never goes in.
    private static func journalOrigin(of url: String) -> String {
        if let origin = CredentialPolicy.Origin(url) { return origin.key }
        let parts = URLParts(url)
        return "\((parts.scheme ?? "").lowercased())://\(parts.hostAndPort)"
    }

    /// An upload of a selection already made (`Sync` sends only the files its comparison chose).
    ///
    /// - Parameter skipsFilesTheJournalHasDone: false when the selection was made from what the destination holds
    ///   now (`Sync`): a file the journal records as sent but the destination lacks or holds otherwise (deleted or
    ///   changed there since) is sent again. The journal still resumes the files a killed run had in flight.
    package init(
        _ configuration: UploadConfiguration, client: CurlewClient, selection: UploadSelection,
        skipsFilesTheJournalHasDone: Bool = true
    ) throws(UploadError) {
        try Self.check(configuration)
        self.configuration = configuration
        self.selection = selection
        let journal = try selection.journalPath.map { path throws(UploadError) in try UploadJournal(path: path) }
        do {
            try journal?.bind(to: Self.journalDestination(configuration.destination))
        } catch {
            journal?.finish()
            throw error
        }
        self.journal = journal
        let journalSkips = skipsFilesTheJournalHasDone ? journal : nil
        self.journalSkips = journalSkips
        let pending = selection.listing.items.filter { !(journalSkips?.isDone($0) ?? false) }
        self.pending = pending

        let budget = configuration.bytesPerSecondLimit.map { SendBudget(bytesPerSecond: $0) }
        var fields: [(String, String)] = []
        var s3: (uploader: S3Uploader, location: S3Location)?
        switch configuration.destination.storage {
        case .put(let baseURL):
            target = FolderURL(baseURL).url
            mode = .put
            s3Client = nil
        case .multipartForm(let url, let formFields):
            target = url
            mode = .multipart
            fields = formFields.map { ($0.name, $0.value) }
            s3Client = nil
        case .s3(let destination):
            target = destination.location.description
            mode = .put
            let s3Client = S3Client(
                http: client, endpoint: destination.endpoint, credentials: destination.credentials,
                retries: configuration.retries, concurrency: configuration.concurrency, budget: budget)
            self.s3Client = s3Client
            s3 = (
                S3Uploader(client: s3Client, options: destination.objectOptions, journal: journal), destination.location
            )
        }
        if s3 == nil {
            // A bad URL fails here, once, rather than once per file.
            do {
                _ = try CurlewRequest(method: .put, url: target)
            } catch {
                journal?.finish()
                let detail = (error as? CurlewError)?.detail ?? "\(error)"
                throw UploadError(
                    .invalidConfiguration,
                    "cannot send to \(URLRedaction.messages.naming(target)): \(detail)")
            }
        }
        let plan = UploadPlan(
            baseURL: target, folderURL: FolderURL(target), mode: mode,
            headers: configuration.headers.map { ($0.name, $0.value) }, fields: fields,
            gzip: configuration.gzip, retries: configuration.retries, concurrency: configuration.concurrency,
            filesPerSecond: configuration.filesPerSecond, budget: budget, checksumHeader: configuration.checksumHeader)
        let broadcast = ProgressBroadcast(
            filesTotal: pending.count, bytesTotal: pending.reduce(Int64(0)) { $0 + $1.size })
        self.broadcast = broadcast
        self.s3 = s3
        runner = UploadRunner(
            client: client, plan: plan, items: pending, journal: journal, s3: s3,
            onFileSettled: { broadcast.publish($0) }, onEvent: configuration.onEvent)
    }

    /// The upload's progress, reported after each file is settled (sent, skipped or failed), starting with where
    /// it is now. Each use gives a sequence of its own, which ends when ``run()`` returns; a slow reader sees the
    /// latest progress, not every step.
    public var progress: AsyncStream<UploadProgress> { broadcast.subscribe() }

    /// Starts no further file; the files in flight finish, then ``run()`` returns (its summary counts the rest as
    /// not started). What the command does on the first Ctrl-C.
    public func stopStartingFiles() {
        stopAsked.store(true, ordering: .relaxed)
        runner.requestStop()
    }

    /// Sends the files and returns what happened to them; files that fail are listed in the summary, not thrown.
    ///
    /// - Throws: ``UploadError`` (``UploadError/Kind/journal``) when the journal could not be written: the files
    ///   were sent, but a later run would send them again. Also when the upload already ran.
    public func run() async throws(UploadError) -> UploadSummary {
        let (summary, journalFailure) = try await runKeepingSummary()
        if let journalFailure { throw UploadError(.journal, "the journal could not be written: \(journalFailure)") }
        return summary
    }

    deinit {
        // An upload dropped unrun releases its journal (and the journal's lock) here, on the caller's thread.
        journal?.finish()
    }

    /// Aborts the multipart uploads the journal holds for files no longer in the source folder (deleted, or renamed
    /// since a run was stopped midway): nothing would ever complete them, and S3 bills their parts until they are
    /// aborted. A file that is still there, this run's filters or shard leaving it out included, keeps its upload
    /// for a later run to resume; so does a file of a manifest source, whose paths the journal does not hold.
    private func abortUploadsOfFilesGone() async {
        guard let journal, let s3, let folder = configuration.source.folder else { return }
        for (relativePath, upload) in journal.multipartUploads.sorted(by: { $0.key < $1.key }) {
            // Completed (its done line records the same version): nothing is left to abort.
            if journal.entries[relativePath] == upload.file { continue }
            var status = stat()
            guard lstat(folder + "/" + relativePath, &status) != 0, errno == ENOENT || errno == ENOTDIR else {
                continue
            }
            await s3.uploader.abandon(upload, ofFileAt: relativePath, key: s3.location.key(for: relativePath))
        }
    }

    /// ``run()`` for the command, which prints the summary before it reports a journal that could not be written.
    package func runKeepingSummary() async throws(UploadError) -> (summary: UploadSummary, journalFailure: String?) {
        guard !hasRun.exchange(true, ordering: .relaxed) else {
            throw UploadError(.invalidConfiguration, "an upload runs once: make another with the same journal")
        }
        let started = ContinuousClock.now
        let startedAt = Date()
        if let onEvent = configuration.onEvent {
            for problem in selection.listing.problems {
                onEvent(UploadEvent(.failed, path: problem.relativePath, error: problem.reason))
            }
            for item in selection.listing.items where journalSkips?.isDone(item) ?? false {
                onEvent(UploadEvent(.skipped, path: item.relativePath, size: item.size, rule: "journal"))
            }
        }
        let tally = await runner.run()
        let elapsed = ContinuousClock.now - started
        let interrupted = stopAsked.load(ordering: .relaxed) || Task.isCancelled
        if !interrupted { await abortUploadsOfFilesGone() }
        journal?.finish()
        broadcast.finish(runner.progress)

        var total = tally
        if let s3Client {
            // S3 requests are counted by its client: a file is several requests there.
            let requests = s3Client.tally
            total.statusCounts = requests.statusCounts
            total.retries = requests.retries
            total.connectionsOpened = requests.connectionsOpened
        }
        var summary = UploadSummary(
            source: configuration.source.path, url: target, mode: mode, concurrency: configuration.concurrency,
            listing: selection.listing, skipped: selection.listing.items.count - pending.count, tally: total,
            notStarted: runner.notStarted, elapsed: elapsed, journal: journal?.path, interrupted: interrupted)
        summary.excluded = selection.excluded
        summary.error = s3Client?.runProblem
        summary.shard = configuration.shard.isWhole ? nil : configuration.shard
        summary.startedAt = startedAt.timeIntervalSince1970
        return (summary, journal?.failure)
    }

    /// Progress as the command's progress line polls it.
    package var progressSnapshot: UploadProgressSnapshot { runner.progress }

    /// What the command checks too, with its own option names; a service gets these as errors here.
    private static func check(_ configuration: UploadConfiguration) throws(UploadError) {
        func invalid(_ message: String) -> UploadError { UploadError(.invalidConfiguration, message) }
        guard configuration.concurrency >= 1 else { throw invalid("concurrency must be at least 1") }
        guard (0...10).contains(configuration.retries) else { throw invalid("retries must be between 0 and 10") }
        if let rate = configuration.filesPerSecond, !(rate > 0 && rate.isFinite) {
            throw invalid("filesPerSecond must be a positive number")
        }
        if let limit = configuration.bytesPerSecondLimit, limit < 1024 {
            throw invalid("bytesPerSecondLimit must be at least 1 kB per second")
        }
        if let contradiction = configuration.filter.contradiction { throw invalid(contradiction) }
        switch configuration.destination.storage {
        case .put:
            if configuration.checksumHeader != nil && configuration.gzip {
                throw invalid("a checksum header describes the file as is: it cannot go with gzip")
            }
        case .multipartForm:
            if configuration.checksumHeader != nil { throw invalid("a checksum header is for PUT destinations") }
        case .s3(let destination):
            if configuration.gzip || configuration.checksumHeader != nil || !configuration.headers.isEmpty {
                throw invalid("S3 destinations take no gzip, checksum header or extra headers (every header is signed)")
            }
            if destination.endpoint.bucket != destination.location.bucket {
                throw invalid("the endpoint's bucket \(destination.endpoint.bucket) is not the location's")
            }
            if !(PartPlan.minimumPartSize...PartPlan.maximumPartSize).contains(destination.objectOptions.partSize) {
                throw invalid("the part size must be between 5MiB and 5GiB (S3's limits)")
            }
        }
    }
}

/// The files an upload considers: listed, then the shard's share, then the filters; and its journal's path.
package struct UploadSelection: Sendable {
    package var listing: UploadListing
    package let listedBeforeSharding: Int
    package let ownedByShard: Int
    /// Files the filters (patterns, sizes and ages) left out.
    package let excluded: Int
    /// A shard keeps a journal of its own: shards may run at once on one shared file system.
    package let journalPath: String?
    /// Every path the source listed, before sharding and the filters, unreadable ones included: what `curlew sync
    /// --delete` must never delete from the destination. By exact bytes: `café` in NFC and in NFD are two files.
    package var listedPaths: Set<ExactPath> = []
    /// The paths the source could not list or read, before sharding (a folder's stands for all it holds): every
    /// shard lists the whole source, so each knows that the listing was not whole even where another shard owns
    /// the path, and `curlew sync --delete` deletes nothing then.
    package var unlistedPaths: [String] = []

    package static func make(
        source: UploadSource, filter: UploadFilter, shard: ShardAssignment, journalPath: String?
    ) throws(UploadError) -> UploadSelection {
        var listing = try source.list()
        let listedPaths = Set(
            (listing.items.map(\.relativePath) + listing.problems.map(\.relativePath)).map(ExactPath.init))
        let unlistedPaths = listing.problems.map(\.relativePath)
        // A shard sends the files whose path hashes to it; the others' shards send theirs. Sharding comes before the
        // filters, so each shard counts only its own files as excluded and the merge's sum is the run's.
        let listedBeforeSharding = listing.items.count
        if !shard.isWhole {
            listing.items.removeAll { !shard.owns(relativePath: $0.relativePath) }
            listing.problems.removeAll { !shard.owns(relativePath: $0.relativePath) }
        }
        let ownedByShard = listing.items.count
        let now = UploadFilter.nowNanoseconds
        listing.items.removeAll { !filter.admits($0, nowNanoseconds: now) }
        return UploadSelection(
            listing: listing, listedBeforeSharding: listedBeforeSharding, ownedByShard: ownedByShard,
            excluded: ownedByShard - listing.items.count,
            journalPath: journalPath.map { shard.isWhole ? $0 : "\($0).\(shard.fileTag)" }, listedPaths: listedPaths,
            unlistedPaths: unlistedPaths)
    }
}

/// Hands each progress report to every sequence ``Upload/progress`` gave out, and ends them when the run ends.
private final class ProgressBroadcast: Sendable {
    private struct State {
        var latest: UploadProgress
        var watchers: [AsyncStream<UploadProgress>.Continuation] = []
        var finished = false
    }

    private let filesTotal: Int
    private let bytesTotal: Int64
    private let state: Mutex<State>

    init(filesTotal: Int, bytesTotal: Int64) {
        self.filesTotal = filesTotal
        self.bytesTotal = bytesTotal
        state = Mutex(
            State(
                latest: UploadProgress(
                    filesDone: 0, filesFailed: 0, filesTotal: filesTotal, bytesSent: 0, bytesTotal: bytesTotal)))
    }

    func subscribe() -> AsyncStream<UploadProgress> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: UploadProgress.self, bufferingPolicy: .bufferingNewest(1))
        state.withLock { state in
            continuation.yield(state.latest)
            if state.finished {
                continuation.finish()
            } else {
                state.watchers.append(continuation)
            }
        }
        return stream
    }

    func publish(_ snapshot: UploadProgressSnapshot) {
        let progress = UploadProgress(
            filesDone: snapshot.files, filesFailed: snapshot.failed, filesTotal: filesTotal, bytesSent: snapshot.bytes,
            bytesTotal: bytesTotal)
        state.withLock { state in
            guard !state.finished else { return }
            state.latest = progress
            for watcher in state.watchers { watcher.yield(progress) }
        }
    }

    func finish(_ snapshot: UploadProgressSnapshot) {
        publish(snapshot)
        state.withLock { state in
            state.finished = true
            for watcher in state.watchers { watcher.finish() }
            state.watchers = []
        }
    }
}
