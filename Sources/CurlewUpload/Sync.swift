public import CurlewEngine
package import CurlewS3
package import CurlewSharding
import Foundation

/// What `curlew sync` does with each file, decided from the source's listing and the destination's, with no I/O:
/// tested on its own.
///
/// A file the destination lacks is sent (`missing`); one of another size is sent (`size`). One of the same size is,
/// on S3, left to the store's checksum (`checksum`: the uploader's `--skip-existing` rules read the object's
/// SHA-256 or ETag and skip it when they match); on WebDAV, whose servers report no checksum, it is unchanged when
/// the destination's copy is at least as new as the file (`size-and-time`) and sent otherwise (`newer`). With
/// deletion on, a destination file goes when the source listed no such path at all (filtered-out and unreadable
/// files count as listed, so they are never deleted), the include and exclude patterns admit it (so, as with rclone,
/// excluded files on the destination are kept), and it is the shard's own (a shard never deletes another's).
package struct SyncPlan: Sendable, Equatable {
    package struct Upload: Sendable, Equatable {
        package let item: UploadItem
        package let reason: String
    }

    package struct Unchanged: Sendable, Equatable {
        package let item: UploadItem
        package let rule: String
    }

    /// A file of the destination, by its path under the destination's URL or key prefix.
    package struct DestinationFile: Sendable, Equatable {
        package let relativePath: String
        package let size: Int64
        /// Seconds since 1970; nil when the store does not say.
        package let modified: Double?

        package init(relativePath: String, size: Int64, modified: Double?) {
            self.relativePath = relativePath
            self.size = size
            self.modified = modified
        }
    }

    package var uploads: [Upload] = []
    package var unchanged: [Unchanged] = []
    package var deletions: [String] = []
    /// Destination paths no source file could have and no request may name: empty, `.` or `..` segments (a
    /// hostile or broken server's listing). They are neither compared nor deleted: a URL with `..` would reach
    /// outside the destination once normalised.
    package var unaddressable: [String] = []

    /// Whether `path` is a plain relative path: no empty, `.` or `..` segment, no leading `/`.
    package static func isAddressable(_ path: String) -> Bool {
        !path.isEmpty
            && PercentEncoding.segments(of: path).allSatisfy {
                !$0.isEmpty && $0 != "." && $0 != ".."
            }
    }

    /// A listed S3 key's path under the destination's prefix, cut by bytes; nil for a key that does not start with
    /// the prefix's bytes (a store's listing cannot put a key outside the prefix into the comparison or `--delete`).
    /// Cut by `Character`s, `p/\u{301}x` lost the grapheme `/\u{301}` with the prefix `p/` and became `x`, another
    /// file: deleted for it, and the source's `\u{301}x` was sent again every run.
    package static func relativePath(ofKey key: String, under prefix: String) -> String? {
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        return String(decoding: key.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }

    /// - Parameters:
    ///   - comparesChecksums: the store reports checksums (S3): same-size files go to the uploader to compare them.
    package static func make(
        selection: UploadSelection, destination: [DestinationFile], comparesChecksums: Bool, filter: UploadFilter,
        shard: ShardAssignment, deletes: Bool
    ) -> SyncPlan {
        var plan = SyncPlan()
        let addressable = destination.filter { isAddressable($0.relativePath) }
        plan.unaddressable = destination.map(\.relativePath).filter { !isAddressable($0) }
        // By exact bytes: a destination that holds `café` in NFC does not hold the source's `café` in NFD (two names
        // on Linux and on every store), and `String`'s canonical equivalence would call one the other.
        let held = Dictionary(addressable.map { (ExactPath($0.relativePath), $0) }) { first, _ in first }
        for item in selection.listing.items {
            guard let there = held[ExactPath(item.relativePath)] else {
                plan.uploads.append(Upload(item: item, reason: "missing"))
                continue
            }
            if there.size != item.size {
                plan.uploads.append(Upload(item: item, reason: "size"))
            } else if comparesChecksums {
                plan.uploads.append(Upload(item: item, reason: "checksum"))
            } else if let modified = there.modified, item.mayBeHeld(byCopyModifiedAt: modified) {
                plan.unchanged.append(Unchanged(item: item, rule: "size-and-time"))
            } else {
                plan.uploads.append(Upload(item: item, reason: "newer"))
            }
        }
        if deletes {
            let patterns = UploadFilter(includes: filter.includes, excludes: filter.excludes)
            // Nothing under a folder the source could not list: its files may all still be there.
            let unlistedFolders = selection.unlistedPaths.map { $0.isEmpty ? "" : $0 + "/" }
            plan.deletions = Set(addressable.map { ExactPath($0.relativePath) }).filter { exact in
                let path = exact.path
                return !selection.listedPaths.contains(exact)
                    && !unlistedFolders.contains { path.utf8.starts(with: $0.utf8) }
                    && patterns.admits(path) && shard.owns(relativePath: path)
            }.map(\.path).sorted()
        }
        return plan
    }
}

/// Makes a destination mirror a source: uploads what is missing or changed and, only when asked, deletes what the
/// source no longer has, after every upload succeeded. What `curlew sync` runs, as `rclone sync`, `s5cmd sync
/// --delete` and `aws s3 sync --delete` do, with checksums where the store keeps them (S3) instead of size and time.
///
/// Deletions never happen when any file failed or the run was interrupted: the summary counts them as withheld.
public final class Sync: Sendable {
    private let configuration: UploadConfiguration
    private let client: CurlewClient
    private let deletes: Bool

    /// - Parameters:
    ///   - configuration: the source, an S3 or WebDAV (``UploadDestination/put(baseURL:)``) destination, and the
    ///     upload's settings (journal, filters, shard, concurrency…).
    ///   - deletes: removes destination files the source no longer has (`--delete`).
    /// - Throws: ``UploadError`` (``UploadError/Kind/invalidConfiguration``) for a multipart-form destination or
    ///   gzip (a compressed copy's size is not the file's).
    public init(_ configuration: UploadConfiguration, client: CurlewClient, deletes: Bool) throws(UploadError) {
        if configuration.destination.multipartForm != nil {
            throw UploadError(.invalidConfiguration, "sync needs a destination it can list: WebDAV or S3, not a form")
        }
        if configuration.gzip {
            throw UploadError(.invalidConfiguration, "sync compares sizes: it cannot send gzip-compressed copies")
        }
        self.configuration = configuration
        self.client = client
        self.deletes = deletes
    }

    /// Lists the source and the destination and decides, sending nothing but the listing requests (`--dry-run`).
    ///
    /// - Throws: ``UploadError``: ``UploadError/Kind/unreadableSource``,
    ///   ``UploadError/Kind/unreadableDestination`` when the destination cannot be listed, or
    ///   ``UploadError/Kind/journal`` when the journal cannot be read or records another destination (as ``run()``).
    public func plan() async throws(UploadError) -> SyncPreview {
        let (selection, plan) = try await decide()
        // The run is refused for a journal of another destination: so is its preview, which writes nothing to it.
        // The selection names the journal the run opens (a shard's own, with its tag).
        if let journalPath = selection.journalPath {
            _ = try UploadJournal.read(
                path: journalPath, boundTo: Upload.journalDestination(configuration.destination))
        }
        return SyncPreview(plan)
    }

    private func decide() async throws(UploadError) -> (UploadSelection, SyncPlan) {
        let selection = try UploadSelection.make(
            source: configuration.source, filter: configuration.filter, shard: configuration.shard,
            journalPath: configuration.journalPath)
        let destination: [SyncPlan.DestinationFile]
        var comparesChecksums = false
        do {
            switch configuration.destination.storage {
            case .s3(let s3):
                comparesChecksums = true
                let prefix = s3.location.prefix
                let lister = S3Client(
                    http: client, endpoint: s3.endpoint, credentials: s3.credentials,
                    retries: configuration.retries, concurrency: 1, budget: nil)
                let objects: [S3ListedObject]
                do throws(S3RequestFailure) {
                    objects = try await lister.listObjects(prefix: prefix)
                } catch {
                    throw UploadError(
                        .unreadableDestination, "cannot list \(s3.location): \(lister.runProblem ?? error.reason)")
                }
                destination = objects.compactMap { object in
                    SyncPlan.relativePath(ofKey: object.key, under: prefix).map {
                        SyncPlan.DestinationFile(relativePath: $0, size: object.size, modified: nil)
                    }
                }
            case .put(let baseURL):
                destination = try await WebDAVFolder(baseURL: baseURL, client: client, headers: configuration.headers)
                    .list().map {
                        SyncPlan.DestinationFile(relativePath: $0.relativePath, size: $0.size, modified: $0.modified)
                    }
            case .multipartForm:
                destination = []
            }
        } catch let error as UploadError {
            throw error
        } catch {
            throw UploadError(.unreadableDestination, "cannot list the destination: \(error)")
        }
        let plan = SyncPlan.make(
            selection: selection, destination: destination, comparesChecksums: comparesChecksums,
            filter: configuration.filter, shard: configuration.shard, deletes: deletes)
        return (selection, plan)
    }

    /// Uploads what the comparison chose, then deletes what it chose if every upload succeeded.
    public func run() async throws(UploadError) -> SyncSummary {
        let (selection, plan) = try await decide()
        let onEvent = configuration.onEvent
        for unchanged in plan.unchanged {
            onEvent?(
                UploadEvent(
                    .skipped, path: unchanged.item.relativePath, size: unchanged.item.size, rule: unchanged.rule))
        }
        var chosen = selection
        chosen.listing.items = plan.uploads.map(\.item)
        var configuration = configuration
        let reasons = Dictionary(plan.uploads.map { (ExactPath($0.item.relativePath), $0.reason) }) { first, _ in first
        }
        if let onEvent {
            configuration.onEvent = { event in
                guard event.kind == .started, event.rule == nil else { return onEvent(event) }
                onEvent(
                    UploadEvent(
                        .started, path: event.path, size: event.size, rule: reasons[ExactPath(event.path)],
                        time: event.time))
            }
        }
        if case .s3(var s3) = configuration.destination.storage {
            // Same-size objects are compared by the store's checksums before anything is sent.
            s3.objectOptions.skipExisting = true
            configuration.destination = .s3(s3)
        }
        // The destination's listing says what it holds: the journal only resumes files in flight.
        let upload = try Upload(configuration, client: client, selection: chosen, skipsFilesTheJournalHasDone: false)
        let (uploadSummary, journalFailure) = try await upload.runKeepingSummary()
        var summary = SyncSummary(upload: uploadSummary, plan: plan)
        summary.sourcePathsNotListed = selection.unlistedPaths.count
        if let journalFailure {
            summary.deletionsWithheld = plan.deletions.count
            throw UploadError(.journal, "the journal could not be written: \(journalFailure)")
        }
        // A source not listed whole (anywhere: another shard's unreadable folder too) deletes nothing, as
        // `rclone sync` deletes nothing after an error: what it could not see may still be there.
        guard uploadSummary.failed == 0, uploadSummary.notStarted == 0, !uploadSummary.interrupted,
            selection.unlistedPaths.isEmpty
        else {
            summary.deletionsWithheld = plan.deletions.count
            return summary
        }
        for path in plan.deletions {
            do {
                try await delete(path)
                summary.deleted += 1
                onEvent?(UploadEvent(.deleted, path: path))
            } catch {
                summary.deleteFailures.append(UploadFailure(path: path, error: "\(error)"))
                onEvent?(UploadEvent(.failed, path: path, error: "not deleted: \(error)"))
            }
        }
        return summary
    }

    private func delete(_ relativePath: String) async throws {
        switch configuration.destination.storage {
        case .s3(let s3):
            let deleter = S3Client(
                http: client, endpoint: s3.endpoint, credentials: s3.credentials, retries: configuration.retries,
                concurrency: 1, budget: nil)
            do throws(S3RequestFailure) {
                try await deleter.deleteObject(key: s3.location.key(for: relativePath))
            } catch {
                throw WebDAVListingError(deleter.runProblem ?? error.reason)
            }
        case .put(let baseURL):
            try await WebDAVFolder(baseURL: baseURL, client: client, headers: configuration.headers).delete(
                relativePath)
        case .multipartForm:
            break
        }
    }
}

/// What `curlew sync --dry-run` shows: what would be sent and why, what is unchanged, what would be deleted.
public struct SyncPreview: Sendable, Hashable {
    /// Relative paths and why each would be sent (`missing`, `size`, `checksum`: the store's checksum decides at the
    /// time of sending, `newer`).
    public let uploads: [(path: String, size: Int64, reason: String)]
    /// Relative paths left alone without a request, and the rule (`size-and-time`).
    public let unchanged: [(path: String, rule: String)]
    /// Relative paths that would be deleted (`--delete`), if every upload succeeded.
    public let deletions: [String]

    init(_ plan: SyncPlan) {
        uploads = plan.uploads.map { ($0.item.relativePath, $0.item.size, $0.reason) }
        unchanged = plan.unchanged.map { ($0.item.relativePath, $0.rule) }
        deletions = plan.deletions
    }

    public static func == (lhs: SyncPreview, rhs: SyncPreview) -> Bool {
        lhs.uploads.map(\.path) == rhs.uploads.map(\.path) && lhs.unchanged.map(\.path) == rhs.unchanged.map(\.path)
            && lhs.deletions == rhs.deletions
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(uploads.map(\.path))
        hasher.combine(deletions)
    }
}

/// What a ``Sync`` did: the upload's summary, why files were sent, and what was deleted or withheld.
public struct SyncSummary: Sendable, Codable {
    /// The upload of the files the comparison chose.
    public package(set) var upload: UploadSummary
    /// Files sent (or compared by checksum, on S3) by why: `missing`, `size`, `checksum`, `newer`.
    public package(set) var toSendByReason: [String: Int]
    /// Files left alone without a request, by rule (`size-and-time`).
    public package(set) var unchangedByRule: [String: Int]
    /// Destination files deleted.
    public package(set) var deleted = 0
    /// Deletions not made because a file failed, the source could not be listed whole (by any shard) or the run was
    /// interrupted.
    public package(set) var deletionsWithheld = 0
    /// Paths of the source that could not be listed or read, in every shard's share (a folder's stands for all it
    /// holds): any withholds the deletions, so a shard whose own files all went tells why it deleted nothing.
    public package(set) var sourcePathsNotListed = 0
    /// Deletions the destination refused.
    public package(set) var deleteFailures: [UploadFailure] = []

    init(upload: UploadSummary, plan: SyncPlan) {
        self.upload = upload
        toSendByReason = Dictionary(plan.uploads.map { ($0.reason, 1) }, uniquingKeysWith: +)
        unchangedByRule = Dictionary(plan.unchanged.map { ($0.rule, 1) }, uniquingKeysWith: +)
    }
}
