import Crypto
import CurlewEngine
import Foundation
import Synchronization

/// What an uploaded object carries beyond its bytes, and how a large file is cut into parts.
public struct S3ObjectOptions: Sendable, Hashable {
    /// Files above this size go up in parts of this size (raised to fit S3's 10,000 parts; 5 MiB to 5 GiB).
    public var partSize: Int64 = 16 << 20
    /// The `Content-Type` of every object; nil picks one by the file's extension.
    public var contentType: String?
    /// User metadata, stored as `x-amz-meta-NAME` (names lower-cased: letters, digits, `-` and `_`).
    public var metadata: [String: String] = [:]
    /// The storage class, e.g. `STANDARD_IA`, passed through to the store.
    public var storageClass: String?
    /// A canned ACL, e.g. `bucket-owner-full-control`, passed through to the store.
    public var acl: String?
    /// Leaves a file alone when the bucket holds an object with its bytes, as far as the store can tell: the first
    /// of the ``S3ExistingObjectRule``s the object offers decides. Size alone never does.
    public var skipExisting = false
    /// Stores the whole file's SHA-256 with each object (`x-amz-meta-curlew-sha256`), so a later ``skipExisting`` run
    /// recognises the object whatever part size stored it. For a file uploaded in parts this reads the file once more
    /// before its first part (the metadata is set when the upload starts), as rclone does for its MD5.
    public var recordsWholeFileSHA256 = true

    /// Options with the defaults: 16 MiB parts, content type by extension, no metadata.
    public init() {}

    /// The object's headers: its metadata (with the whole file's SHA-256, `wholeFileSHA256` in hex, when recorded),
    /// storage class and ACL.
    package func objectHeaders(wholeFileSHA256: String?) -> [(name: String, value: String)] {
        var fields = metadata.map { (key: $0.key.lowercased(), value: $0.value) }
        if let wholeFileSHA256 {
            fields.removeAll { $0.key == S3Uploader.wholeFileSHA256MetadataName }
            fields.append((S3Uploader.wholeFileSHA256MetadataName, wholeFileSHA256))
        }
        var headers: [(name: String, value: String)] = fields.sorted { $0.key < $1.key }.map {
            ("x-amz-meta-" + $0.key, $0.value)
        }
        if let storageClass { headers.append(("x-amz-storage-class", storageClass)) }
        if let acl { headers.append(("x-amz-acl", acl)) }
        return headers
    }
}

/// What ``S3Client/uploadFile(at:key:options:)`` did with a file.
///
/// A struct rather than an enum, so that outcomes can be added without breaking a caller's `switch`: compare with
/// `==` (`outcome == .uploaded`); ``name`` is stable.
public struct S3FileUpload: Sendable, Hashable, CustomStringConvertible {
    /// The package's exhaustive view of the outcome.
    package enum Storage: Sendable, Hashable {
        case uploaded
        case alreadyThere
    }

    /// What the outcome is, for an exhaustive `switch` inside the package.
    package let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// The file was sent and the store confirmed its checksum (when it reports one).
    public static let uploaded = S3FileUpload(.uploaded)
    /// ``S3ObjectOptions/skipExisting``: the bucket already held the file; nothing was sent.
    public static let alreadyThere = S3FileUpload(.alreadyThere)

    /// The stable name: the static member's name (`"uploaded"`, `"alreadyThere"`).
    public var name: String {
        switch storage {
        case .uploaded: "uploaded"
        case .alreadyThere: "alreadyThere"
        }
    }

    /// The ``name``.
    public var description: String { name }
}

/// How ``S3ObjectOptions/skipExisting`` knew that an object in the bucket holds a file's bytes, in the order it tries
/// them; each needs the object's size to match first.
public struct S3ExistingObjectRule: Sendable, Hashable, CustomStringConvertible {
    /// The stable name, as `curlew upload --json` counts it (`alreadyThereByRule`).
    public let name: String

    private init(_ name: String) { self.name = name }

    /// The whole file's SHA-256 that Curlew stored with the object (``S3ObjectOptions/recordsWholeFileSHA256``):
    /// decides for any part size.
    public static let wholeFileSHA256Metadata = S3ExistingObjectRule("metadata-sha256")
    /// The store's SHA-256 of an object sent in one piece (`x-amz-checksum-sha256`).
    public static let objectSHA256 = S3ExistingObjectRule("checksum-sha256")
    /// The store's SHA-256 of the parts' SHA-256s (`…-N`), with the part size read from the store (part 1's length).
    public static let partsSHA256 = S3ExistingObjectRule("composite-sha256")
    /// The ETag: the MD5 of an object sent in one piece, or the MD5 of its parts' MD5s (`…-N`). Objects encrypted with
    /// KMS or customer keys have other ETags: they never match, and the file is sent again.
    public static let etagMD5 = S3ExistingObjectRule("etag-md5")

    /// The ``name``.
    public var description: String { name }
}

package enum S3FileOutcome: Sendable, Equatable {
    case uploaded
    /// `--skip-existing`: the bucket already holds this file, as `rule` told.
    case alreadyThere(S3ExistingObjectRule)
    case failed(String)
}

/// Uploads one file at a time per caller: a single PUT up to the part size, a multipart upload above it, each
/// object and part with its SHA-256 signed as the payload hash and sent as `x-amz-checksum-sha256`, and the stored
/// object's checksum compared with the file's when the store reports one.
package final class S3Uploader: Sendable {
    package let client: S3Client
    package let options: S3ObjectOptions
    package let journal: (any S3UploadJournal)?
    /// Without a journal, resumes the store's own unfinished multipart upload of the key, if it has one: what
    /// makes ``S3Client/uploadFile(at:key:options:)`` resumable with no state on the client's side.
    package let resumesUnfinishedUploads: Bool

    package init(
        client: S3Client, options: S3ObjectOptions, journal: (any S3UploadJournal)?,
        resumesUnfinishedUploads: Bool = false
    ) {
        self.client = client
        self.options = options
        self.journal = journal
        self.resumesUnfinishedUploads = resumesUnfinishedUploads
    }

    /// - Parameters:
    ///   - sent: called with the bytes of each completed part or object, for live progress.
    ///   - partStored: called with the number and size of each part this call stored (not those an earlier run
    ///     stored), as it is stored.
    package func upload(
        _ item: UploadItem, key: String, sent: @escaping @Sendable (Int64) -> Void,
        partStored: @escaping @Sendable (_ number: Int, _ size: Int64) -> Void = { _, _ in }
    ) async -> S3FileOutcome {
        // S3 refuses a larger object only at CompleteMultipartUpload, once every part is sent (EntityTooLarge).
        guard item.size <= PartPlan.maximumObjectSize else {
            return .failed("\(item.size) bytes is larger than S3's largest object (5 TiB); nothing was sent")
        }
        do {
            let plan = PartPlan(fileSize: item.size, requestedPartSize: options.partSize)
            // A killed run may have stored the file just before it could journal that: look before sending again.
            let wasInFlight = journal.map { $0.wasInFlight(item) || $0.multipartUpload(of: item) != nil } ?? false
            if options.skipExisting || wasInFlight, let rule = try await ruleFindingTheFile(item, key: key) {
                // Recorded too, so a later run with the journal needs no HEAD for it.
                journal?.record(item)
                return .alreadyThere(rule)
            }
            if plan.isMultipart {
                try await uploadInParts(item, key: key, plan: plan, sent: sent, partStored: partStored)
            } else {
                journal?.recordSending(item)
                try await uploadWhole(item, key: key)
                sent(item.size)
            }
            journal?.record(item)
            return .uploaded
        } catch {
            return .failed(error.reason)
        }
    }

    private func contentType(_ item: UploadItem) -> String {
        options.contentType ?? UploadContentType.forPath(item.relativePath)
    }

    private func uploadWhole(_ item: UploadItem, key: String) async throws(S3RequestFailure) {
        let digest = try FileRangeDigest.sha256(path: item.absolutePath, offset: 0, length: item.size)
        let checksum = Data(digest).base64EncodedString()
        let recorded = options.recordsWholeFileSHA256 ? SHA256Hex(digest).text : nil
        let reply = try await client.send(
            .put, key: key,
            headers: [("content-type", contentType(item)), ("x-amz-checksum-sha256", checksum)]
                + options.objectHeaders(wholeFileSHA256: recorded),
            body: .file(path: item.absolutePath, offset: 0, length: item.size, sha256: SHA256Hex(digest)))
        try Self.checkUnchanged(item)
        if let stored = reply.header("x-amz-checksum-sha256"), stored != checksum {
            throw .transport("the store's SHA-256 \(stored) differs from the file's \(checksum)")
        }
    }

    // MARK: Multipart

    private func uploadInParts(
        _ item: UploadItem, key: String, plan: PartPlan, sent: @escaping @Sendable (Int64) -> Void,
        partStored: @escaping @Sendable (_ number: Int, _ size: Int64) -> Void
    ) async throws(S3RequestFailure) {
        var uploadID: String
        var done: [Int: CompletedPart] = [:]
        var earlier = journal?.multipartUpload(of: item)
        if earlier == nil, journal == nil, resumesUnfinishedUploads,
            let unfinished = try await latestUnfinishedUpload(key: key)
        {
            // To the millisecond, S3's precision: an upload begun in the file's own millisecond is kept.
            let changed = Double(item.modifiedNanoseconds / 1_000_000) / 1_000
            if let initiated = unfinished.initiated, initiated.timeIntervalSince1970 >= changed {
                // Its parts are checked against the file's bytes below: only those that match are kept.
                earlier = S3MultipartProgress(file: item.version, partSize: plan.partSize, uploadID: unfinished.id)
            } else {
                // Begun before the file last changed: its metadata (the whole file's SHA-256 among them) describes
                // an earlier version, and completing it would label the new bytes with it. Not kept either.
                try? await abort(item, key: key, uploadID: unfinished.id)
            }
        }
        if let stale = journal?.staleMultipartUpload(of: item) {
            // Begun for an earlier version of the file: its parts hold other bytes, and must not linger.
            try? await abort(item, key: key, uploadID: stale.uploadID)
        }
        if let earlier, earlier.partSize != plan.partSize {
            // Cut differently now (another --part-size): the old parts cannot be reused, and must not linger.
            try? await abort(item, key: key, uploadID: earlier.uploadID)
        }
        if let earlier, earlier.partSize == plan.partSize,
            let held = try await partsHeld(key: key, uploadID: earlier.uploadID)
        {
            uploadID = earlier.uploadID
            done = try reconcile(item, uploadID: uploadID, plan: plan, journaled: earlier.parts, held: held)
            sent(done.values.reduce(0) { $0 + $1.size })
        } else {
            let recorded =
                options.recordsWholeFileSHA256
                ? SHA256Hex(try FileRangeDigest.sha256(path: item.absolutePath, offset: 0, length: item.size)).text
                : nil
            let reply = try await client.send(
                .post, key: key, query: [("uploads", "")],
                headers: [("content-type", contentType(item)), ("x-amz-checksum-algorithm", "SHA256")]
                    + options.objectHeaders(wholeFileSHA256: recorded))
            guard let id = S3XML.value("UploadId", in: reply.text), !id.isEmpty else {
                throw .transport("CreateMultipartUpload's reply has no UploadId")
            }
            uploadID = id
            journal?.recordMultipartStart(item, uploadID: uploadID, partSize: plan.partSize)
        }

        do throws(S3RequestFailure) {
            let missing = plan.parts.filter { done[$0.number] == nil }
            for part in try await sendParts(
                missing, of: item, key: key, uploadID: uploadID, sent: sent, partStored: partStored)
            {
                done[part.number] = part
            }
            try Self.checkUnchanged(item)
            try await complete(item, key: key, uploadID: uploadID, parts: plan.parts.map { done[$0.number]! })
        } catch {
            // Interrupted (the failure may also read as a transport error): the upload stays when the journal or
            // the next run's listing of unfinished uploads can resume it.
            let interrupted: Bool
            if case .cancelled = error { interrupted = true } else { interrupted = Task.isCancelled }
            if interrupted && (journal != nil || resumesUnfinishedUploads) { throw .cancelled }
            // Nothing would ever resume it: dropped, even when interrupted, so its parts are not billed for ever.
            try? await abort(item, key: key, uploadID: uploadID)
            throw error
        }
    }

    /// CompleteMultipartUpload, and the stored object's checksum checked. An attempt whose reply was lost may have
    /// completed the upload: a retry then gets 404 (`NoSuchUpload`), and the object, if it holds the file's bytes
    /// (``ruleFindingTheFile``), is the upload's.
    package func complete(
        _ item: UploadItem, key: String, uploadID: String, parts: [CompletedPart]
    ) async throws(S3RequestFailure) {
        let reply = try await client.send(
            .post, key: key, query: [("uploadId", uploadID)],
            body: .bytes(Array(CompletedPart.completionXML(parts).utf8)), allowing: [404],
            expectsDocument: true)
        if reply.status == 404 {
            guard try await ruleFindingTheFile(item, key: key) != nil else {
                throw .refused(S3ErrorReply(status: 404, body: reply.body))
            }
            return
        }
        try await verifyComposite(parts: parts, completion: reply.text, key: key)
    }

    /// Aborts the multipart upload an earlier run left for a file that is no longer in the source (`key` is where
    /// it was going): nothing will complete it, and the store bills its parts until it is aborted. A failure is left
    /// for the next run, which tries again.
    package func abandon(_ upload: S3MultipartProgress, ofFileAt relativePath: String, key: String) async {
        let item = UploadItem(
            relativePath: relativePath, absolutePath: "", size: upload.file.size,
            modifiedNanoseconds: upload.file.modifiedNanoseconds)
        try? await abort(item, key: key, uploadID: upload.uploadID)
    }

    /// AbortMultipartUpload: the store drops the parts (and stops billing them); the journal forgets the upload.
    private func abort(_ item: UploadItem, key: String, uploadID: String) async throws(S3RequestFailure) {
        _ = try await client.send(.delete, key: key, query: [("uploadId", uploadID)], allowing: [404], cleanup: true)
        journal?.recordAbort(item, uploadID: uploadID)
    }

    /// ListMultipartUploads: the most recently started unfinished upload of exactly this key, if any, and when it
    /// began (nil when the store's time cannot be read).
    private func latestUnfinishedUpload(
        key: String
    ) async throws(S3RequestFailure) -> (id: String, initiated: Date?)? {
        let reply = try await client.send(.get, key: "", query: [("uploads", ""), ("prefix", key)])
        let uploads = S3XML.elements("Upload", in: reply.text).filter { S3XML.value("Key", in: $0) == key }
        // ISO 8601 times of one format sort as text.
        let latest = uploads.max { (S3XML.value("Initiated", in: $0) ?? "") < (S3XML.value("Initiated", in: $1) ?? "") }
        guard let latest, let id = S3XML.value("UploadId", in: latest) else { return nil }
        return (id, S3XML.value("Initiated", in: latest).flatMap(ISO8601Time.date))
    }

    /// The parts the store holds for an upload, or nil if the upload is gone (completed, aborted, expired).
    private func partsHeld(key: String, uploadID: String) async throws(S3RequestFailure) -> [Int: CompletedPart]? {
        var held: [Int: CompletedPart] = [:]
        var marker: String?
        repeat {
            var query: [(name: String, value: String)] = [("uploadId", uploadID)]
            if let marker { query.append(("part-number-marker", marker)) }
            let reply = try await client.send(.get, key: key, query: query, allowing: [404])
            if reply.status == 404 { return nil }
            let page = CompletedPart.parseListing(reply.text)
            for part in page.parts { held[part.number] = part }
            marker = try Self.nextPartNumberMarker(page.nextMarker, after: marker)
        } while marker != nil
        return held
    }

    /// The marker of ListParts' next page, or nil after the last page. Part numbers ascend, so a store whose marker
    /// does not (the same marker again, or a smaller one or no number at all) would list the same page for ever.
    package static func nextPartNumberMarker(
        _ next: String?, after current: String?
    ) throws(S3RequestFailure) -> String? {
        guard let next else { return nil }
        guard let number = Int(next), number > current.flatMap({ Int($0) }) ?? 0 else {
            throw .transport("ListParts gave part number marker \(next) after \(current ?? "the first page")")
        }
        return next
    }

    /// Parts the store holds that can be kept: the journal's (same ETag), and ones the run was killed before it
    /// could journal, if their checksum (or, without one, their MD5 ETag) matches the file's bytes.
    private func reconcile(
        _ item: UploadItem, uploadID: String, plan: PartPlan, journaled: [Int: CompletedPart],
        held: [Int: CompletedPart]
    ) throws(S3RequestFailure) -> [Int: CompletedPart] {
        var kept: [Int: CompletedPart] = [:]
        for part in plan.parts {
            guard let stored = held[part.number], stored.size == part.length || stored.size < 0 else { continue }
            if let known = journaled[part.number], known.etag == stored.etag, known.size == part.length {
                kept[part.number] = known
                continue
            }
            let digest = try FileRangeDigest.sha256(path: item.absolutePath, offset: part.offset, length: part.length)
            let checksum = Data(digest).base64EncodedString()
            let matches: Bool
            if !stored.checksum.isEmpty {
                matches = stored.checksum == checksum
            } else {
                let etag = stored.etag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                matches =
                    etag.count == 32
                    && (try? FileRangeDigest.md5(path: item.absolutePath, offset: part.offset, length: part.length))
                        .map(SigV4Signer.hex) == etag.lowercased()
            }
            if matches {
                let adopted = CompletedPart(
                    number: part.number, etag: stored.etag, checksum: checksum, size: part.length)
                journal?.recordPart(item, uploadID: uploadID, part: adopted)
                kept[part.number] = adopted
            }
        }
        return kept
    }

    /// Sends parts, up to `concurrency` at once; the first failure cancels the others.
    private func sendParts(
        _ parts: [PartPlan.Part], of item: UploadItem, key: String, uploadID: String,
        sent: @escaping @Sendable (Int64) -> Void,
        partStored: @escaping @Sendable (_ number: Int, _ size: Int64) -> Void
    ) async throws(S3RequestFailure) -> [CompletedPart] {
        let result = await withTaskGroup(of: Result<CompletedPart, S3RequestFailure>.self) {
            group -> Result<[CompletedPart], S3RequestFailure> in
            var pending = parts[...]
            var finished: [CompletedPart] = []
            func startNext() {
                guard let part = pending.popFirst() else { return }
                group.addTask {
                    do throws(S3RequestFailure) {
                        return .success(try await self.sendPart(part, of: item, key: key, uploadID: uploadID))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            for _ in 0..<client.concurrency { startNext() }
            while let outcome = await group.next() {
                switch outcome {
                case .success(let part):
                    journal?.recordPart(item, uploadID: uploadID, part: part)
                    sent(part.size)
                    partStored(part.number, part.size)
                    finished.append(part)
                    startNext()
                case .failure(let failure):
                    group.cancelAll()
                    return .failure(failure)
                }
            }
            return .success(finished)
        }
        return try result.get()
    }

    private func sendPart(
        _ part: PartPlan.Part, of item: UploadItem, key: String, uploadID: String
    ) async throws(S3RequestFailure) -> CompletedPart {
        let digest = try FileRangeDigest.sha256(path: item.absolutePath, offset: part.offset, length: part.length)
        let checksum = Data(digest).base64EncodedString()
        let reply = try await client.send(
            .put, key: key, query: [("partNumber", String(part.number)), ("uploadId", uploadID)],
            headers: [("x-amz-checksum-sha256", checksum)],
            body: .file(path: item.absolutePath, offset: part.offset, length: part.length, sha256: SHA256Hex(digest)))
        guard let etag = reply.header("etag"), !etag.isEmpty else {
            throw .transport("part \(part.number): the reply has no ETag")
        }
        if let stored = reply.header("x-amz-checksum-sha256"), stored != checksum {
            throw .transport("part \(part.number): the store's SHA-256 \(stored) differs from the file's \(checksum)")
        }
        return CompletedPart(number: part.number, etag: etag, checksum: checksum, size: part.length)
    }

    /// S3's checksum of a multipart object is the SHA-256 of the parts' SHA-256 digests, with `-N` appended. The
    /// completion reply carries it; a HEAD asks for it otherwise. A store that reports none cannot be checked.
    package func verifyComposite(parts: [CompletedPart], completion: String, key: String) async throws(S3RequestFailure)
    {
        let expected = Self.compositeChecksum(parts.map(\.checksum))
        var reported = S3XML.value("ChecksumSHA256", in: completion)
        if reported == nil {
            let head = try await client.send(.head, key: key, headers: [("x-amz-checksum-mode", "ENABLED")])
            reported = head.header("x-amz-checksum-sha256")
        }
        guard let reported, !reported.isEmpty else { return }
        let digestPart = reported.split(separator: "-").first.map(String.init) ?? reported
        if digestPart != expected {
            // A corrupt object must not stay under the file's name, where a later --skip-existing could take it.
            _ = try? await client.send(.delete, key: key, cleanup: true)
            throw .transport(
                "the stored object's SHA-256 of parts \(reported) differs from the file's \(expected)-\(parts.count); the object was deleted"
            )
        }
    }

    /// The HEAD of the object at `key` when it is the one `parts` complete: `size` bytes, and the store's SHA-256
    /// of its parts theirs. Nil when it is not, when there is no object, when the store keeps no checksum to tell
    /// by, or when the HEAD is refused (a write-only key may not read): never a problem of the run.
    package func headOfObjectCompleted(from parts: [CompletedPart], size: Int64, key: String) async -> S3Reply? {
        guard
            let head = try? await client.send(
                .head, key: key, headers: [("x-amz-checksum-mode", "ENABLED")], allowing: [404],
                refusalStopsTheRun: false),
            head.status == 200, head.header("content-length").flatMap({ Int64($0) }) == size,
            let reported = head.header("x-amz-checksum-sha256"),
            reported.split(separator: "-").first.map(String.init) == Self.compositeChecksum(parts.map(\.checksum))
        else { return nil }
        return head
    }

    package static func compositeChecksum(_ partChecksums: [String]) -> String {
        var hasher = SHA256()
        for checksum in partChecksums {
            if let raw = Data(base64Encoded: checksum) { hasher.update(data: raw) }
        }
        return Data(hasher.finalize()).base64EncodedString()
    }

    // MARK: Skip existing

    /// The metadata name (after `x-amz-meta-`) of the whole file's SHA-256 in hex.
    package static let wholeFileSHA256MetadataName = "curlew-sha256"

    /// The rule by which the bucket already holds this file, or nil when it does not or cannot tell: the object must
    /// have the file's size, then the first of these the object offers decides: the whole-file SHA-256 Curlew stored,
    /// the store's SHA-256 (of the object, or of its parts at the part size the store reports), the ETag's MD5.
    private func ruleFindingTheFile(
        _ item: UploadItem, key: String
    ) async throws(S3RequestFailure) -> S3ExistingObjectRule? {
        let head = try await client.send(
            .head, key: key, headers: [("x-amz-checksum-mode", "ENABLED")], allowing: [404])
        guard head.status == 200, head.header("content-length").flatMap({ Int64($0) }) == item.size else {
            return nil
        }
        if let recorded = head.header("x-amz-meta-" + Self.wholeFileSHA256MetadataName) {
            let digest = try FileRangeDigest.sha256(path: item.absolutePath, offset: 0, length: item.size)
            return recorded.lowercased() == SHA256Hex(digest).text ? .wholeFileSHA256Metadata : nil
        }
        let etag = head.header("etag")?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) ?? ""
        let etagPieces = etag.split(separator: "-")
        if let stored = head.header("x-amz-checksum-sha256"), !stored.isEmpty {
            let pieces = stored.split(separator: "-")
            let partCount = (pieces.count > 1 ? pieces[1] : etagPieces.count > 1 ? etagPieces[1] : nil).flatMap {
                Int($0)
            }
            guard let partCount else {
                let digest = try FileRangeDigest.sha256(path: item.absolutePath, offset: 0, length: item.size)
                return Data(digest).base64EncodedString() == pieces[0] ? .objectSHA256 : nil
            }
            guard let parts = try await storedParts(key: key, count: partCount, size: item.size) else { return nil }
            var checksums: [String] = []
            for part in parts {
                checksums.append(
                    Data(try FileRangeDigest.sha256(path: item.absolutePath, offset: part.offset, length: part.length))
                        .base64EncodedString())
            }
            return Self.compositeChecksum(checksums) == pieces[0] ? .partsSHA256 : nil
        }
        if etagPieces.count == 2, let partCount = Int(etagPieces[1]) {
            guard let parts = try await storedParts(key: key, count: partCount, size: item.size) else { return nil }
            var hasher = Insecure.MD5()
            for part in parts {
                hasher.update(
                    data: Data(
                        try FileRangeDigest.md5(path: item.absolutePath, offset: part.offset, length: part.length)))
            }
            return SigV4Signer.hex(hasher.finalize()) == etagPieces[0].lowercased() ? .etagMD5 : nil
        }
        if etag.count == 32 {
            let digest = try FileRangeDigest.md5(path: item.absolutePath, offset: 0, length: item.size)
            return SigV4Signer.hex(digest) == etag.lowercased() ? .etagMD5 : nil
        }
        return nil
    }

    /// The byte ranges of a stored multipart object's `count` parts: all as long as part 1 (which a HEAD with
    /// `partNumber=1` reports), the last one the rest. Nil when the store does not say, or the ranges cannot add up.
    private func storedParts(
        key: String, count: Int, size: Int64
    ) async throws(S3RequestFailure) -> [(offset: Int64, length: Int64)]? {
        if count == 1 { return [(offset: Int64(0), length: size)] }
        guard count > 1 else { return nil }
        let first = try await client.send(
            .head, key: key, query: [("partNumber", "1")], allowing: [400, 404, 416])
        guard first.status == 200 || first.status == 206,
            let partSize = first.header("content-length").flatMap({ Int64($0) }),
            Self.partsAddUp(count: count, partSize: partSize, size: size)
        else { return nil }
        return (0..<count).map { index in
            let offset = partSize * Int64(index)
            return (offset, index == count - 1 ? size - offset : partSize)
        }
    }

    /// Whether `count` parts of `partSize` bytes (the last one shorter) make `size` bytes. Both come from the store
    /// (the ETag's or checksum's `-N`, the first part's length): a count past S3's 10,000 parts, or a product past
    /// 64 bits, is not a match rather than a trap or billions of ranges to hash.
    package static func partsAddUp(count: Int, partSize: Int64, size: Int64) -> Bool {
        guard partSize > 0, count > 1, count <= PartPlan.maximumParts else { return false }
        let (allButLast, overflow) = partSize.multipliedReportingOverflow(by: Int64(count - 1))
        guard !overflow, allButLast < size else { return false }
        // The last part holds the rest: at least one byte, at most a whole part.
        return size - allButLast <= partSize
    }

    /// The file must be as it was listed once its bytes are in: the checksum sent covers what was read.
    private static func checkUnchanged(_ item: UploadItem) throws(S3RequestFailure) {
        guard let now = item.currentState() else {
            throw .transport("the file vanished while it was sent")
        }
        if now.size != item.size || now.modifiedNanoseconds != item.modifiedNanoseconds {
            throw .transport("the file changed while it was sent")
        }
    }
}
