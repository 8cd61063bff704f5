import CurlewEngine
public import CurlewSharding
import Foundation

/// What an upload did: counts, bytes, timing, and every file that failed. `curlew upload --json` prints it as is,
/// so its coding keys are part of the command's interface.
public struct UploadSummary: Sendable, Codable {
    /// The command's embedded loopback server: what it received.
    package struct EmbeddedServer: Sendable, Codable {
        package var requests: Int
        package var bytes: Int

        package init(requests: Int, bytes: Int) {
            self.requests = requests
            self.bytes = bytes
        }
    }

    /// The source folder or manifest, as given.
    public package(set) var source: String
    /// Where the files went: the PUT base URL, the form's URL, or `s3://BUCKET/PREFIX`; a password or a key in the
    /// URL is redacted, since a summary is printed, logged and kept.
    public package(set) var url: String
    /// `put` (PUT and S3) or `multipart` (a form POST).
    public package(set) var mode: String
    /// Files in flight at most.
    public package(set) var concurrency: Int
    /// Files listed (after sharding and the filters), including those that could not be read.
    public package(set) var files: Int
    /// Files the server accepted in this run.
    public package(set) var uploaded: Int
    /// Files the journal says an earlier run sent, left alone.
    public package(set) var skipped: Int
    /// ``S3ObjectOptions/skipExisting``, or a resumed PUT the server had received: files the server already held.
    public package(set) var alreadyThere: Int
    /// ``alreadyThere`` by the rule that recognised each file: `metadata-sha256`, `checksum-sha256`,
    /// `composite-sha256` and `etag-md5` (``S3ExistingObjectRule``), `in-flight-size` for a PUT a killed run had in
    /// flight.
    public package(set) var alreadyThereByRule: [String: Int] = [:]
    /// Forms (`--mode multipart`) a killed run had in flight that this run sent again, sorted; nil when none. A form
    /// cannot be looked up, so each may now be stored twice unless the server honours `Idempotency-Key`.
    public package(set) var resentAfterCrash: [String]?
    /// Files left out by the include and exclude patterns.
    public package(set) var excluded = 0
    /// Files that were not sent (``failures`` lists them).
    public package(set) var failed: Int
    /// Files never started because the upload was stopped or cancelled.
    public package(set) var notStarted: Int
    /// Bytes of the files uploaded in this run.
    public package(set) var bytes: Int64
    /// From the first file started to the last one settled.
    public package(set) var durationSeconds: Double
    /// Files uploaded per second over the run.
    public package(set) var filesPerSecond: Double
    /// Megabytes (10⁶ bytes) uploaded per second over the run.
    public package(set) var megabytesPerSecond: Double
    /// Requests sent again after a failure that was safe to retry.
    public package(set) var retries: Int
    /// Connections opened (the rest were reused).
    public package(set) var connectionsOpened: Int
    /// Responses by HTTP status (as text, JSON's object keys): every request a file took (S3's several; a PUT sent
    /// again once its folders were made, and their MKCOLs).
    public package(set) var statusCodes: [String: Int]
    /// The journal's path, if the upload kept one.
    public package(set) var journal: String?
    /// Whether the upload was stopped or cancelled before every file was settled.
    public package(set) var interrupted: Bool
    /// Every file that was not sent, sorted by path.
    public package(set) var failures: [UploadFailure]
    package var embeddedServer: EmbeddedServer?
    /// What stopped the run (bad credentials, missing bucket, clock skew, wrong region), once.
    public package(set) var error: String?
    /// This process's part of a sharded run; nil for a whole run.
    public package(set) var shard: ShardAssignment?
    /// The sharded run's id, as the command's `--run-id` gives it.
    package var runId: String?
    /// When sending started, in seconds since 1970.
    public package(set) var startedAt: Double?
    /// `curlew merge`: how many shards' results this summary adds up.
    package var shardsMerged: Int?
    /// `--output-dir` files only: what `curlew merge` checks.
    package var run: UploadRunRecord?

    package init(
        source: String, url: String, mode: UploadMode, concurrency: Int, listing: UploadListing, skipped: Int,
        tally: UploadTally, notStarted: Int, elapsed: Duration, journal: String?, interrupted: Bool
    ) {
        self.source = source
        self.url = url
        self.mode = mode.rawValue
        self.concurrency = concurrency
        self.files = listing.items.count + listing.problems.count
        self.uploaded = tally.uploaded
        self.skipped = skipped
        self.alreadyThere = tally.alreadyThere
        self.alreadyThereByRule = tally.alreadyThereByRule
        self.resentAfterCrash = tally.resentAfterCrash.isEmpty ? nil : tally.resentAfterCrash.sorted()
        self.failures =
            (listing.problems.map { UploadFailure(path: $0.relativePath, error: $0.reason) } + tally.failures)
            .sorted { $0.path < $1.path }
        self.failed = failures.count
        self.notStarted = notStarted
        self.bytes = tally.bytes
        self.durationSeconds = 0
        self.filesPerSecond = 0
        self.megabytesPerSecond = 0
        self.retries = tally.retries
        self.connectionsOpened = tally.connectionsOpened
        self.statusCodes = Dictionary(uniqueKeysWithValues: tally.statusCounts.map { (String($0.key), $0.value) })
        self.journal = journal
        self.interrupted = interrupted
        setDuration(seconds: elapsed.seconds)
        // A summary is printed, logged and kept: a password or a key in the URL stays out of it.
        redactURLs()
    }

    /// Redacts the URLs the summary names: in its initialiser, and for a summary read back from a file, which an
    /// earlier version may have written with the URL as typed.
    package mutating func redactURLs() {
        url = URLRedaction.messages.displaying(url)
        if let planURL = run?.plan.url { run?.plan.url = URLRedaction.messages.displaying(planURL) }
    }

    /// The shards' summaries added up; rates over the run's window, from the first shard's start to the last
    /// one's end.
    package init(merging shards: [UploadSummary]) {
        var merged = shards[0]
        for shard in shards.dropFirst() {
            merged.files += shard.files
            merged.uploaded += shard.uploaded
            merged.skipped += shard.skipped
            merged.alreadyThere += shard.alreadyThere
            merged.alreadyThereByRule.merge(shard.alreadyThereByRule, uniquingKeysWith: +)
            if let resent = shard.resentAfterCrash {
                merged.resentAfterCrash = ((merged.resentAfterCrash ?? []) + resent).sorted()
            }
            merged.excluded += shard.excluded
            merged.failed += shard.failed
            merged.notStarted += shard.notStarted
            merged.bytes += shard.bytes
            merged.retries += shard.retries
            merged.connectionsOpened += shard.connectionsOpened
            merged.statusCodes.merge(shard.statusCodes, uniquingKeysWith: +)
            merged.failures += shard.failures
            merged.interrupted = merged.interrupted || shard.interrupted
            merged.error = merged.error ?? shard.error
        }
        merged.failures.sort { $0.path < $1.path }
        let start = shards.map { $0.startedAt ?? 0 }.min() ?? 0
        let end = shards.map { ($0.startedAt ?? 0) + $0.durationSeconds }.max() ?? start
        merged.setDuration(seconds: max(end - start, 0))
        merged.startedAt = start
        merged.shard = nil
        merged.shardsMerged = shards.count
        merged.run = nil
        merged.journal = nil
        merged.embeddedServer = nil
        merged.source = shards.count == 1 ? merged.source : "\(shards.count) shards"
        self = merged
    }

    /// Sets the upload's duration and the rates over it (none for a run that took no time).
    private mutating func setDuration(seconds: Double) {
        durationSeconds = seconds
        filesPerSecond = seconds > 0 ? Double(uploaded) / seconds : 0
        megabytesPerSecond = seconds > 0 ? Double(bytes) / 1e6 / seconds : 0
    }
}

/// What `curlew upload --output-dir` writes beyond the summary.
package struct UploadRunRecord: Codable, Sendable {
    package var plan: UploadRunPlan

    package init(plan: UploadRunPlan) { self.plan = plan }
}

/// The upload as asked for: the same in every shard of one run. The source path is not part of it: on many
/// machines the same data may sit under different paths.
package struct UploadRunPlan: Codable, Sendable, Equatable {
    /// The destination, redacted as the summary's.
    package var url: String
    package var mode: String
    package var shards: Int

    package init(url: String, mode: String, shards: Int) {
        self.url = URLRedaction.messages.displaying(url)
        self.mode = mode
        self.shards = shards
    }
}
