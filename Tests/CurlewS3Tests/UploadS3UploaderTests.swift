import CurlewEngine
import CurlewTestSupport
import Foundation
import Synchronization
import Testing

@testable import CurlewS3

/// ``S3ObjectOptions/skipExisting`` against moto (signature checks on): an object is recognised by the first rule it
/// offers, whatever part size or tool stored it, a file changed at the same size never is, and moto's request log
/// shows that nothing was written for a recognised file.
@Suite(.serialized) struct UploadS3UploaderTests {
    static let fileSize = (20 << 20) + 3

    /// An uploader of `bucket` on moto's checked server.
    static func uploader(
        _ moto: MotoServer, bucket: String, client: CurlewClient, partSize: Int64, skipExisting: Bool,
        journal: (any S3UploadJournal)? = nil
    ) throws -> S3Uploader {
        let s3 = S3Client(
            endpoint: try S3Endpoint(endpoint: moto.endpoint, region: "us-east-1", bucket: bucket),
            credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey),
            client: client)
        var options = S3ObjectOptions()
        options.partSize = partSize
        options.skipExisting = skipExisting
        return S3Uploader(client: s3, options: options, journal: journal)
    }

    /// What a run killed mid-file leaves in its journal: the file was being sent (a single PUT) or had a multipart
    /// upload, and no `done` line followed. In memory: the journal's own file format is tested in CurlewUploadTests.
    final class KilledRunJournal: S3UploadJournal {
        let inFlight: FileVersion?
        let multipart: S3MultipartProgress?
        let writes = Mutex<[String]>([])

        init(inFlight: FileVersion? = nil, multipart: S3MultipartProgress? = nil) {
            self.inFlight = inFlight
            self.multipart = multipart
        }

        func staleMultipartUpload(of item: UploadItem) -> S3MultipartProgress? {
            multipart.flatMap { $0.file != item.version ? $0 : nil }
        }

        func record(_ item: UploadItem) { writes.withLock { $0.append("done") } }
        func recordSending(_ item: UploadItem) { writes.withLock { $0.append("sending") } }
        func wasInFlight(_ item: UploadItem) -> Bool { item.version == inFlight }
        func multipartUpload(of item: UploadItem) -> S3MultipartProgress? {
            multipart?.file == item.version ? multipart : nil
        }
        func recordMultipartStart(_ item: UploadItem, uploadID: String, partSize: Int64) {
            writes.withLock { $0.append("upload") }
        }
        func recordPart(_ item: UploadItem, uploadID: String, part: CompletedPart) {}
        func recordAbort(_ item: UploadItem, uploadID: String) { writes.withLock { $0.append("abort") } }
    }

    static func upload(_ uploader: S3Uploader, path: String, key: String) async throws -> S3FileOutcome {
        await uploader.upload(try item(path, key: key), key: key, sent: { _ in })
    }

    static func item(_ path: String, key: String) throws -> UploadItem {
        try #require(UploadItem(relativePath: key, absolutePath: path, size: 0, modifiedNanoseconds: 0).currentState())
    }

    /// Writes (PUT, POST) moto logged for the bucket.
    static func writes(_ moto: MotoServer, _ bucket: String) -> Int {
        moto.loggedRequests { method, target in
            (method == "PUT" || method == "POST") && target.hasPrefix("/\(bucket)/")
        }.count
    }

    /// A file larger than S3's largest object (a sparse one here) fails before anything is sent: S3 would refuse
    /// it only at CompleteMultipartUpload, after 5 TiB of parts.
    @Test func aFileLargerThanS3sLargestObjectFailsBeforeAnythingIsSent() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("too-large")
        let tree = try SourceTree(prefix: "curlew-s3-too-large")
        defer { tree.remove() }
        let path = try tree.write("huge.bin", [])
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(PartPlan.maximumObjectSize) + 1)
        try handle.close()
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }
        let uploader = try Self.uploader(moto, bucket: bucket, client: client, partSize: 16 << 20, skipExisting: false)
        // Bounded: without the check the upload would go on sending zeros.
        let outcome = try await withTimeout(.seconds(60)) {
            try await Self.upload(uploader, path: path, key: "huge.bin")
        }
        guard case .failed(let reason) = outcome else {
            Issue.record("a file over 5 TiB was not refused")
            return
        }
        #expect(reason.contains("5 TiB"))
        #expect(Self.writes(moto, bucket) == 0, "no upload was started")
    }

    /// An interrupted upload that nothing can resume (no journal, no listing of unfinished uploads) is aborted, so
    /// its parts are not billed for ever. Before, the abort never went out: the client refused every request of a
    /// cancelled task, cleanups included.
    @Test func anInterruptedUploadNothingCanResumeIsAborted() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("interrupted")
        let tree = try SourceTree(prefix: "curlew-s3-interrupted")
        defer { tree.remove() }
        let path = try tree.write("large.bin", SourceTree.content(for: "large", size: Self.fileSize))
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }
        // One part at a time at 5 MiB/s: the upload is still sending when the first part is stored.
        let s3 = S3Client(
            http: client, endpoint: try S3Endpoint(endpoint: moto.endpoint, region: "us-east-1", bucket: bucket),
            credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey),
            retries: 2, concurrency: 1, budget: SendBudget(bytesPerSecond: 5 << 20))
        var options = S3ObjectOptions()
        options.partSize = 5 << 20
        let uploader = S3Uploader(client: s3, options: options, journal: nil)
        let upload = Task { try await Self.upload(uploader, path: path, key: "large.bin") }
        try await waitUntil(timeout: .seconds(60), "a part stored") {
            !moto.loggedRequests { method, target in
                method == "PUT" && target.hasPrefix("/\(bucket)/large.bin?") && target.contains("partNumber=")
            }.filter { $0.status == 200 }.isEmpty
        }
        upload.cancel()
        let outcome = try await withTimeout(.seconds(60)) { try await upload.value }
        guard case .failed = outcome else {
            Issue.record("the interrupted upload did not fail")
            return
        }
        #expect(
            try await moto.inspect("uploads", bucket: bucket).trimmingCharacters(in: .whitespacesAndNewlines) == "[]",
            "the upload was aborted")
        let aborts = moto.loggedRequests { method, target in method == "DELETE" && target.contains("uploadId=") }
        #expect(aborts.contains { $0.target.hasPrefix("/\(bucket)/large.bin?") && $0.status == 204 })
    }

    /// A journal's multipart upload for an earlier version of the file (it changed since the run was killed) cannot
    /// be continued: it is aborted, not forgotten, and the file goes afresh. Before, the upload stayed in the store.
    @Test func aJournaledUploadOfAnEarlierVersionIsAbortedNotForgotten() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("stale-journal")
        let tree = try SourceTree(prefix: "curlew-s3-stale-journal")
        defer { tree.remove() }
        let path = try tree.write("large.bin", SourceTree.content(for: "now", size: Self.fileSize))
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }
        let uploader = try Self.uploader(moto, bucket: bucket, client: client, partSize: 8 << 20, skipExisting: false)
        // What the killed run left: an upload begun for the file when it was one byte shorter.
        let created = try await uploader.client.send(.post, key: "large.bin", query: [("uploads", "")])
        let staleID = try #require(S3XML.value("UploadId", in: created.text))
        let item = try Self.item(path, key: "large.bin")
        let earlier = FileVersion(size: item.size - 1, modifiedNanoseconds: item.modifiedNanoseconds)
        let journal = KilledRunJournal(
            multipart: S3MultipartProgress(file: earlier, partSize: 8 << 20, uploadID: staleID))
        let journaled = S3Uploader(client: uploader.client, options: uploader.options, journal: journal)
        #expect(await journaled.upload(item, key: "large.bin", sent: { _ in }) == .uploaded)
        #expect(
            try await moto.inspect("uploads", bucket: bucket).trimmingCharacters(in: .whitespacesAndNewlines) == "[]",
            "the earlier version's upload was aborted")
        #expect(journal.writes.withLock { $0.first } == "abort")
    }

    @Test func anObjectCurlewStoredIsRecognisedWhateverPartSizeTheNextRunUses() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("rules")
        let tree = try SourceTree(prefix: "curlew-s3-rules")
        defer { tree.remove() }
        let path = try tree.write("large.bin", SourceTree.content(for: "large", size: Self.fileSize))
        let small = try tree.write("small.txt", SourceTree.content(for: "small", size: 4000))
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }

        let first = try Self.uploader(moto, bucket: bucket, client: client, partSize: 8 << 20, skipExisting: true)
        #expect(try await Self.upload(first, path: path, key: "large.bin") == .uploaded)
        #expect(try await Self.upload(first, path: small, key: "small.txt") == .uploaded)
        let inventory = try await moto.inspect("inventory", bucket: bucket)
        #expect(inventory.contains("curlew-sha256"), "the whole file's SHA-256 is stored with each object")
        let writesAfterFirst = Self.writes(moto, bucket)

        // The default part size now: the parts' composite checksum differs, the recorded SHA-256 does not.
        let second = try Self.uploader(moto, bucket: bucket, client: client, partSize: 16 << 20, skipExisting: true)
        #expect(try await Self.upload(second, path: path, key: "large.bin") == .alreadyThere(.wholeFileSHA256Metadata))
        #expect(try await Self.upload(second, path: small, key: "small.txt") == .alreadyThere(.wholeFileSHA256Metadata))
        #expect(Self.writes(moto, bucket) == writesAfterFirst, "nothing was written for files the bucket held")

        // The same size, other bytes: sent again.
        try tree.write("large.bin", SourceTree.content(for: "changed", size: Self.fileSize))
        #expect(try await Self.upload(second, path: path, key: "large.bin") == .uploaded)
    }

    /// What another tool stored (boto3's upload_file, no Curlew metadata) is recognised by the store's checksum or
    /// the ETag, with the part size read from the store, whatever part size this run uses.
    @Test(arguments: [
        (partSize: 8 << 20, checksum: "sha256", rule: S3ExistingObjectRule.partsSHA256),
        (partSize: 8 << 20, checksum: "none", rule: .etagMD5),
        (partSize: 64 << 20, checksum: "sha256", rule: .objectSHA256),
        (partSize: 64 << 20, checksum: "none", rule: .etagMD5),
    ])
    func anObjectAnotherToolStoredIsRecognisedByItsChecksumOrETag(
        partSize: Int, checksum: String, rule: S3ExistingObjectRule
    ) async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("boto")
        let tree = try SourceTree(prefix: "curlew-s3-boto")
        defer { tree.remove() }
        let path = try tree.write("large.bin", SourceTree.content(for: "large", size: Self.fileSize))
        _ = try await moto.inspect("put", bucket: bucket, ["large.bin", path, String(partSize), checksum])
        let writesAfterBoto = Self.writes(moto, bucket)
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }

        let uploader = try Self.uploader(moto, bucket: bucket, client: client, partSize: 5 << 20, skipExisting: true)
        #expect(try await Self.upload(uploader, path: path, key: "large.bin") == .alreadyThere(rule))
        #expect(Self.writes(moto, bucket) == writesAfterBoto)

        try tree.write("large.bin", SourceTree.content(for: "changed", size: Self.fileSize))
        #expect(try await Self.upload(uploader, path: path, key: "large.bin") == .uploaded, "same size, other bytes")
    }

    /// A run killed after the store took the file but before the journal said so: the next run, without
    /// `skipExisting`, looks before sending, in one piece or in parts, and writes nothing.
    @Test(arguments: [false, true])
    func aFileAKilledRunHadInFlightIsLookedUpNotSentAgain(multipart: Bool) async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("inflight")
        let tree = try SourceTree(prefix: "curlew-s3-inflight")
        defer { tree.remove() }
        let path = try tree.write("file.bin", SourceTree.content(for: "file", size: multipart ? Self.fileSize : 3000))
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }
        let partSize: Int64 = 8 << 20
        let first = try Self.uploader(moto, bucket: bucket, client: client, partSize: partSize, skipExisting: false)
        #expect(try await Self.upload(first, path: path, key: "file.bin") == .uploaded)
        let writesAfterFirst = Self.writes(moto, bucket)

        let version = try Self.item(path, key: "file.bin").version
        let journal =
            multipart
            ? KilledRunJournal(multipart: S3MultipartProgress(file: version, partSize: partSize, uploadID: "gone"))
            : KilledRunJournal(inFlight: version)
        let resumed = try Self.uploader(
            moto, bucket: bucket, client: client, partSize: partSize, skipExisting: false, journal: journal)
        #expect(try await Self.upload(resumed, path: path, key: "file.bin") == .alreadyThere(.wholeFileSHA256Metadata))
        #expect(Self.writes(moto, bucket) == writesAfterFirst, "nothing written again")
        #expect(journal.writes.withLock { $0 } == ["done"])
    }

    /// Whether a stream's vanished upload left its object is asked with a HEAD, which a write-only key may not
    /// send: the store's bare 403 is "cannot tell", not the run's "access denied". A HEAD whose size or checksum of
    /// parts differs is not the stream's object either.
    @Test func aRefusedOrDifferentHeadDoesNotConfirmACompletedStream() async throws {
        let part = CompletedPart(
            number: 1, etag: "\"e\"", checksum: Data(repeating: 7, count: 32).base64EncodedString(), size: 10)
        let composite = S3Uploader.compositeChecksum([part.checksum]) + "-1"
        try await withScriptedServer({ request in
            switch request.path {
            case "/bucket/refused": ScriptedResponse(status: 403)
            case "/bucket/other-size":
                ScriptedResponse(headers: [("Content-Length", "11"), ("x-amz-checksum-sha256", composite)])
            default:
                ScriptedResponse(headers: [
                    ("Content-Length", "10"), ("x-amz-checksum-sha256", composite), ("ETag", "\"e-1\""),
                ])
            }
        }) { server in
            let client = CurlewClient()
            defer { Task { await client.shutdown() } }
            let s3 = try UploadS3ClientTests.s3Client(scripted: server, client: client)
            let uploader = S3Uploader(client: s3, options: S3ObjectOptions(), journal: nil)
            #expect(await uploader.headOfObjectCompleted(from: [part], size: 10, key: "refused") == nil)
            #expect(s3.runProblem == nil, "a refused HEAD is not the run's problem")
            #expect(await uploader.headOfObjectCompleted(from: [part], size: 10, key: "other-size") == nil)
            let head = await uploader.headOfObjectCompleted(from: [part], size: 10, key: "ours")
            #expect(head?.header("etag") == "\"e-1\"")
        }
    }

    /// CompleteMultipartUpload retried after an attempt whose reply was lost gets 404 `NoSuchUpload` (the upload is
    /// complete and gone): the object holds the file's bytes, so the upload succeeded; an object with other bytes
    /// fails it. moto completes a completed upload again and fails an unknown one with a 500, so a scripted store
    /// answers here as S3 does.
    @Test func aCompletionAnswered404ChecksTheObject() async throws {
        let tree = try SourceTree(prefix: "curlew-s3-complete")
        defer { tree.remove() }
        let path = try tree.write("file.bin", SourceTree.content(for: "file", size: Self.fileSize))
        let other = try tree.write("other.bin", SourceTree.content(for: "other", size: Self.fileSize))
        let stored = SHA256Hex(try FileRangeDigest.sha256(path: path, offset: 0, length: Int64(Self.fileSize))).text
        let noSuchUpload = Array("<Error><Code>NoSuchUpload</Code><Message>gone</Message></Error>".utf8)
        try await withScriptedServer({ request in
            switch request.method {
            case "POST":
                ScriptedResponse(status: 404, headers: [("Content-Type", "application/xml")], body: noSuchUpload)
            case "HEAD":
                ScriptedResponse(headers: [
                    ("Content-Length", String(Self.fileSize)), ("x-amz-meta-curlew-sha256", stored),
                ])
            default: ScriptedResponse(status: 405)
            }
        }) { server in
            let client = CurlewClient()
            defer { Task { await client.shutdown() } }
            let s3 = try UploadS3ClientTests.s3Client(scripted: server, client: client)
            let uploader = S3Uploader(client: s3, options: S3ObjectOptions(), journal: nil)
            let parts = [CompletedPart(number: 1, etag: "\"e\"", checksum: "", size: Int64(Self.fileSize))]

            try await uploader.complete(
                try Self.item(path, key: "file.bin"), key: "file.bin", uploadID: "gone", parts: parts)
            await #expect(throws: S3RequestFailure.self) {
                try await uploader.complete(
                    try Self.item(other, key: "file.bin"), key: "file.bin", uploadID: "gone", parts: parts)
            }
            // One completion and one HEAD per call; nothing retried a 404.
            #expect(server.requestCount == 4)
        }
    }

    /// ListParts is paged by part number: a store whose next marker does not move forward (the same one again, a
    /// smaller one, not a number) fails the file with a clear reason after the pages it gave. Before, the uploader
    /// asked for the same page for ever.
    @Test(arguments: [(marker: "1", pages: 2), (marker: "0", pages: 1), (marker: "next", pages: 1)])
    func aListPartsMarkerThatDoesNotMoveForwardFailsTheFile(marker: String, pages: Int) async throws {
        let tree = try SourceTree(prefix: "curlew-s3-list-parts")
        defer { tree.remove() }
        let path = try tree.write("large.bin", SourceTree.content(for: "large", size: (12 << 20) + 3))
        let listParts = Atomic<Int>(0)
        let page =
            "<ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>\(marker)</NextPartNumberMarker>"
            + "<Part><PartNumber>1</PartNumber><ETag>\"e\"</ETag><Size>5242880</Size></Part></ListPartsResult>"
        try await withScriptedServer({ request in
            switch request.method {
            case "GET" where request.uri.contains("uploadId="):
                listParts.add(1, ordering: .relaxed)
                return ScriptedResponse(headers: [("Content-Type", "application/xml")], body: Array(page.utf8))
            case "HEAD": return ScriptedResponse(status: 404)
            default: return ScriptedResponse(status: 405)
            }
        }) { server in
            let client = CurlewClient()
            defer { Task { await client.shutdown() } }
            let s3 = try UploadS3ClientTests.s3Client(scripted: server, client: client)
            var options = S3ObjectOptions()
            options.partSize = 5 << 20
            let item = try Self.item(path, key: "large.bin")
            // A killed run's upload of this very file: its parts are listed before any is sent again.
            let journal = KilledRunJournal(
                multipart: S3MultipartProgress(file: item.version, partSize: 5 << 20, uploadID: "u1"))
            let uploader = S3Uploader(client: s3, options: options, journal: journal)
            let outcome = try await withTimeout(.seconds(20), "listing the parts") {
                await uploader.upload(item, key: "large.bin", sent: { _ in })
            }
            guard case .failed(let reason) = outcome else {
                Issue.record("the upload did not fail: \(outcome)")
                return
            }
            #expect(reason.contains("ListParts") && reason.contains(marker), "\(reason)")
            #expect(listParts.load(ordering: .relaxed) == pages)
        }
    }

    /// The part count (the ETag's `-N`) and the part size (part 1's length) that say how a stored object was cut
    /// come from the store: a product past 64 bits, or more parts than S3 allows, does not match the file, and the
    /// file is sent. Before, the multiplication trapped.
    @Test(arguments: [
        (count: "9223372036854775807", partLength: "2"), (count: "3", partLength: "4611686018427387904"),
    ])
    func aStoredPartLayoutThatOverflowsIsNotAMatch(count: String, partLength: String) async throws {
        let tree = try SourceTree(prefix: "curlew-s3-part-layout")
        defer { tree.remove() }
        let size = 30_000
        let path = try tree.write("file.bin", SourceTree.content(for: "file", size: size))
        let puts = Atomic<Int>(0)
        try await withScriptedServer({ request in
            switch request.method {
            case "HEAD" where request.uri.contains("partNumber=1"):
                return ScriptedResponse(headers: [("Content-Length", partLength)])
            case "HEAD":
                return ScriptedResponse(headers: [
                    ("Content-Length", String(size)), ("ETag", "\"0123456789abcdef0123456789abcdef-\(count)\""),
                ])
            case "PUT":
                puts.add(1, ordering: .relaxed)
                return ScriptedResponse()
            default: return ScriptedResponse(status: 405)
            }
        }) { server in
            let client = CurlewClient()
            defer { Task { await client.shutdown() } }
            let s3 = try UploadS3ClientTests.s3Client(scripted: server, client: client)
            var options = S3ObjectOptions()
            options.skipExisting = true
            let uploader = S3Uploader(client: s3, options: options, journal: nil)
            #expect(try await Self.upload(uploader, path: path, key: "file.bin") == .uploaded)
            #expect(puts.load(ordering: .relaxed) == 1, "the file was sent")
        }
    }

    /// A layout of more parts than S3 allows is not a match even when it adds up: a store claiming 30,000 parts of
    /// one byte would otherwise have the uploader hash 30,000 ranges (billions, for a large file) to compare.
    @Test func aLayoutOfMorePartsThanS3AllowsIsNotAMatch() {
        #expect(S3Uploader.partsAddUp(count: 3, partSize: 10, size: 25))
        #expect(S3Uploader.partsAddUp(count: 10_000, partSize: 3, size: 30_000))
        #expect(!S3Uploader.partsAddUp(count: 30_000, partSize: 1, size: 30_000))
        #expect(!S3Uploader.partsAddUp(count: 3, partSize: 10, size: 31), "the last part would be longer")
        #expect(!S3Uploader.partsAddUp(count: 3, partSize: 10, size: 20), "the last part would be empty")
    }
}
