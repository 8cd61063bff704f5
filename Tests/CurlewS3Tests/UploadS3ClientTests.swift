import Crypto
import CurlewEngine
import CurlewTestSupport
import Foundation
import Synchronization
import Testing

@testable import CurlewS3

/// The S3 client on its own, against moto's S3 server.
@Suite struct UploadS3ClientTests {
    static func s3Client(_ moto: MotoServer, bucket: String, client: CurlewClient) throws -> S3Client {
        S3Client(
            endpoint: try S3Endpoint(endpoint: moto.endpoint, region: "us-east-1", bucket: bucket),
            credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey),
            client: client)
    }

    /// A client of bucket `bucket` at a scripted server, with example credentials (the server checks no signature).
    static func s3Client(scripted server: ScriptedServer, client: CurlewClient) throws -> S3Client {
        S3Client(
            endpoint: try S3Endpoint(endpoint: server.baseURL, region: "us-east-1", bucket: "bucket"),
            credentials: AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "secret"), client: client)
    }

    /// What a call cancelled after its first part leaves in the store: a multipart upload of `key` begun with
    /// `metadata`, and the file's first part.
    static func leaveUnfinishedUpload(
        _ s3: S3Client, key: String, path: String, partSize: Int64, metadata: [(name: String, value: String)] = []
    ) async throws {
        let created = try await s3.send(
            .post, key: key, query: [("uploads", "")], headers: [("x-amz-checksum-algorithm", "SHA256")] + metadata)
        let uploadID = try #require(S3XML.value("UploadId", in: created.text))
        let digest = try FileRangeDigest.sha256(path: path, offset: 0, length: partSize)
        _ = try await s3.send(
            .put, key: key, query: [("partNumber", "1"), ("uploadId", uploadID)],
            headers: [("x-amz-checksum-sha256", Data(digest).base64EncodedString())],
            body: .file(path: path, offset: 0, length: partSize, sha256: SHA256Hex(digest)))
    }

    /// moto's own record of the bucket's objects, by key: their SHA-256 (`sha256`), ETag, metadata.
    static func storedObjects(_ moto: MotoServer, bucket: String) async throws -> [String: [String: Any]] {
        let text = try await moto.inspect("inventory", bucket: bucket)
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String: Any]]) ?? [:]
    }

    static func hex(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() }

    @Test func anUnfinishedMultipartUploadIsResumedFromTheStoresPartsWithoutAJournal() async throws {
        // The unchecked server: moto's signature checker refuses the ListMultipartUploads request that a resumable
        // upload starts with when its `prefix=` value holds a `%2F` (a key without `/` passes).
        let moto = try await MotoServer.shared(.unchecked)
        let bucket = try await moto.makeBucket("resume")
        let tree = try SourceTree(prefix: "curlew-s3-resume")
        defer { tree.remove() }
        let bytes = SourceTree.content(for: "resumed", size: (12 << 20) + 3)
        let path = try tree.write("resumed.bin", bytes)
        let partSize: Int64 = 5 << 20
        let key = "resume/resumed.bin"

        let client = CurlewClient()
        let s3 = try Self.s3Client(moto, bucket: bucket, client: client)
        // What a call cancelled after its first part leaves in the store: the upload, and that part.
        try await Self.leaveUnfinishedUpload(s3, key: key, path: path, partSize: partSize)

        var options = S3ObjectOptions()
        options.partSize = partSize
        #expect(try await s3.uploadFile(at: path, key: key, options: options) == .uploaded)
        await client.shutdown()

        // Part 1 went once (by hand above); the call sent parts 2 and 3 into the same upload and completed it.
        let partPuts = moto.loggedRequests { method, target in
            method == "PUT" && target.hasPrefix("/\(bucket)/resume/resumed.bin?") && target.contains("partNumber=")
        }.filter { $0.status == 200 }
        #expect(partPuts.count == 3, "\(partPuts.map(\.target))")
        #expect(partPuts.filter { $0.target.contains("partNumber=1&") }.count == 1)
        let object = try #require(try await Self.storedObjects(moto, bucket: bucket)[key])
        #expect(object["sha256"] as? String == Self.hex(bytes))
        #expect((object["etag"] as? String)?.hasSuffix("-3\"") == true)
        #expect(
            try await moto.inspect("uploads", bucket: bucket).trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
    }

    /// An unfinished upload begun before the file last changed is not continued: its metadata (the whole file's
    /// SHA-256 among it) describes the earlier version, and completing it would label the new bytes with it. It is
    /// aborted and the file sent afresh.
    @Test func anUnfinishedUploadBegunBeforeTheFileChangedIsAbortedNotContinued() async throws {
        let moto = try await MotoServer.shared(.unchecked)
        let bucket = try await moto.makeBucket("stale")
        let tree = try SourceTree(prefix: "curlew-s3-stale")
        defer { tree.remove() }
        let size = (10 << 20) + 7
        let earlier = SourceTree.content(for: "earlier", size: size)
        let path = try tree.write("stale.bin", earlier)
        let partSize: Int64 = 5 << 20
        let key = "stale.bin"

        let client = CurlewClient()
        let s3 = try Self.s3Client(moto, bucket: bucket, client: client)
        // What a call for the earlier version, cancelled after its first part, leaves in the store.
        try await Self.leaveUnfinishedUpload(
            s3, key: key, path: path, partSize: partSize,
            metadata: [("x-amz-meta-\(S3Uploader.wholeFileSHA256MetadataName)", Self.hex(earlier))])
        // The file is rewritten at the same size, a second after the upload began.
        let current = SourceTree.content(for: "current", size: size)
        try Data(current).write(to: URL(fileURLWithPath: path))
        var times = [timeval(tv_sec: time(nil) + 1, tv_usec: 0), timeval(tv_sec: time(nil) + 1, tv_usec: 0)]
        #expect(utimes(path, &times) == 0)

        var options = S3ObjectOptions()
        options.partSize = partSize
        #expect(try await s3.uploadFile(at: path, key: key, options: options) == .uploaded)
        let head = try await s3.send(.head, key: key)
        await client.shutdown()

        #expect(head.header("x-amz-meta-\(S3Uploader.wholeFileSHA256MetadataName)") == Self.hex(current))
        let object = try #require(try await Self.storedObjects(moto, bucket: bucket)[key])
        #expect(object["sha256"] as? String == Self.hex(current))
        #expect(
            try await moto.inspect("uploads", bucket: bucket).trimmingCharacters(in: .whitespacesAndNewlines) == "[]",
            "the stale upload was aborted")
    }

    /// S3 sends CompleteMultipartUpload's and CopyObject's 200 before their outcome. After it: an error document
    /// (behind any amount of keep-alive whitespace) is a refusal, retried when its code is S3's advice to retry and
    /// never a problem of the whole run (the status line had accepted the credentials); a body that is not the whole
    /// expected result (empty, only the XML declaration) is retried too.
    @Test func aSuccessStatusFollowedByAnErrorOrNoResultIsAFailure() async throws {
        let attempts = Mutex<[String: Int]>([:])
        let keepAlive = String(repeating: " ", count: 20 << 10)
        let result =
            "<?xml version=\"1.0\"?><CompleteMultipartUploadResult><ETag>&quot;e-2&quot;</ETag>"
            + "</CompleteMultipartUploadResult>"
        try await withScriptedServer({ request in
            let attempt = attempts.withLock { counts -> Int in
                counts[request.path, default: 0] += 1
                return counts[request.path]!
            }
            let body: String
            switch (request.path, attempt) {
            case ("/bucket/internal-error", 1):
                body = keepAlive + "<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code></Error>"
            case ("/bucket/access-denied", _):
                body = "<Error><Code>AccessDenied</Code><Message>not this one</Message></Error>"
            case ("/bucket/declaration-only", 1): body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            case ("/bucket/cut", 1): body = keepAlive + "<CompleteMultipartUploadResult><ETag>"
            default: body = result
            }
            return ScriptedResponse(headers: [("Content-Type", "application/xml")], body: Array(body.utf8))
        }) { server in
            let client = CurlewClient()
            defer { Task { await client.shutdown() } }
            let s3 = try Self.s3Client(scripted: server, client: client)
            func complete(_ key: String) async throws(S3RequestFailure) -> S3Reply {
                try await s3.send(
                    .post, key: key, query: [("uploadId", "u")], expectsDocument: true)
            }
            for key in ["internal-error", "declaration-only", "cut"] {
                #expect(S3XML.value("ETag", in: try await complete(key).text) == "\"e-2\"", "\(key)")
                #expect(attempts.withLock { $0["/bucket/" + key] } == 2, "\(key): retried once")
            }
            do throws(S3RequestFailure) {
                _ = try await complete("access-denied")
                Issue.record("a 200 carrying AccessDenied was taken as a success")
            } catch .refused(let reply) {
                #expect(reply.code == "AccessDenied")
                #expect(reply.summary == "HTTP 200 with an error AccessDenied: not this one")
            } catch {
                Issue.record("expected the store's refusal, got \(error)")
            }
            #expect(attempts.withLock { $0["/bucket/access-denied"] } == 1, "AccessDenied is not retried")
            #expect(s3.runProblem == nil, "an error after a 200 is the operation's, not the run's")
        }
    }

    /// A file last modified in 2300 (past 64-bit nanoseconds since 1970) is stored like any other. Before, stating
    /// it trapped, and with it the whole process.
    @Test func aFileModifiedAfter2262IsUploaded() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("far-future")
        let tree = try SourceTree(prefix: "curlew-s3-far-future")
        defer { tree.remove() }
        let bytes = SourceTree.content(for: "future", size: 3000)
        let path = try tree.write("future.bin", bytes)
        UploadItemTests.setModified(path, seconds: UploadItemTests.year2300)
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }
        let s3 = try Self.s3Client(moto, bucket: bucket, client: client)
        #expect(try await s3.uploadFile(at: path, key: "future.bin") == .uploaded)
        let object = try #require(try await Self.storedObjects(moto, bucket: bucket)["future.bin"])
        #expect(object["sha256"] as? String == Self.hex(bytes))
    }

    /// A path that has become a FIFO with no writer between its listing and its read is refused at once, on the
    /// worker that reads it and by ``S3Client/uploadFile(at:key:options:)``, and nothing is sent. Before, `open`
    /// blocked until something wrote to the FIFO.
    @Test func aFIFOIsRefusedAtOnceNotWaitedOn() async throws {
        let tree = try SourceTree(prefix: "curlew-s3-fifo")
        defer { tree.remove() }
        let path = tree.root + "/fifo"
        #expect(mkfifo(path, 0o644) == 0)
        // Releases a reader the bug left blocked in open, so a failing run ends instead of hanging.
        defer {
            let writer = open(path, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
        }
        let digestFailure = try await withTimeout(.seconds(20), "hashing a FIFO") { () -> String? in
            do throws(S3RequestFailure) {
                _ = try FileRangeDigest.sha256(path: path, offset: 0, length: 1)
                return nil
            } catch {
                return error.reason
            }
        }
        #expect(digestFailure?.contains("not a regular file") == true, "\(digestFailure ?? "read")")
        try await withScriptedServer({ _ in ScriptedResponse() }) { server in
            let client = CurlewClient()
            defer { Task { await client.shutdown() } }
            let s3 = try Self.s3Client(scripted: server, client: client)
            let failure = try await withTimeout(.seconds(20), "uploading a FIFO") { () -> String? in
                do throws(S3Error) {
                    _ = try await s3.uploadFile(at: path, key: "fifo")
                    return nil
                } catch {
                    return "\(error)"
                }
            }
            #expect(failure?.contains("not a regular file") == true, "\(failure ?? "uploaded")")
            #expect(server.requestCount == 0)
        }
    }
}
