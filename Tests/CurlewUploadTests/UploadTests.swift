import Crypto
import CurlewEngine
import CurlewS3
import CurlewTestSupport
import CurlewUpload
import Foundation
import Synchronization
import Testing

/// The library's public API, as a service uses it (no `@testable`): a folder of awkwardly named files uploaded,
/// the upload cancelled midway, and a second upload with the same journal finishing the job, checked on the
/// server's side.
@Suite(.serialized) struct UploadTests {
    /// 300 files: spaces, `#`, `%`, non-ASCII letters, nested folders, an empty file.
    static let names: [String] = (0..<300).map { index in
        switch index % 6 {
        case 0: "plain \(index).txt"
        case 1: "hash#tag \(index).json"
        case 2: "per%25cent \(index).bin"
        case 3: "ünïcødé/日本語 \(index).txt"
        case 4: "deep/er/still \(index).md"
        default: index == 5 ? "empty.bin" : "café \(index).csv"
        }
    }

    static func content(of name: String) -> [UInt8] {
        name == "empty.bin" ? [] : SourceTree.content(for: name, size: 200 + name.utf8.count * 13)
    }

    static func writeTree() throws -> SourceTree {
        let tree = try SourceTree(prefix: "curlew-upload-library")
        for name in names { try tree.write(name, content(of: name)) }
        return tree
    }

    /// Uploads `tree` to `destination` twice with one journal, as a service restarted midway would: the first
    /// upload is cancelled as soon as its progress shows 20 files done, the second finishes the job and its summary
    /// is returned. Both are checked for what every destination promises; the caller checks the server.
    static func uploadCancelledThenResumed(
        _ tree: SourceTree, to destination: UploadDestination, journal: String
    ) async throws -> UploadSummary {
        var configuration = UploadConfiguration(source: .folder(tree.root), destination: destination)
        configuration.concurrency = concurrency
        configuration.journalPath = journal
        // Paced (30 s for the 300 files; the cancel comes after about 2), so it lands while most files are still
        // to send even on a machine that stalls this test for seconds (at 50 files/s a loaded machine once saw the
        // whole first run end before the cancel).
        configuration.filesPerSecond = 10
        let client = CurlewClient()

        let upload = try Upload(configuration, client: client)
        let progress = upload.progress
        let run = Task { try await upload.run() }
        for await step in progress where step.filesDone >= 20 {
            run.cancel()
            break
        }
        let first = try await run.value
        #expect(first.interrupted)
        #expect(first.uploaded >= 20 && first.uploaded < names.count)

        configuration.filesPerSecond = nil
        let second = try await Upload(configuration, client: client).run()
        await client.shutdown()
        #expect(!second.interrupted)
        #expect(second.failed == 0, "\(second.failures.prefix(5))")
        #expect(second.skipped == first.uploaded, "the journal's files are not sent again")
        return second
    }

    /// Files in flight at once; as many PUTs as this may be under way when the first upload is cancelled.
    static let concurrency = 8

    @Test func aFolderUploadToWebDAVCancelledMidwayResumesAndSendsEveryFileOnce() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try Self.writeTree()
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let second = try await Self.uploadCancelledThenResumed(
            tree, to: .put(baseURL: target.url), journal: journal)
        #expect(second.skipped + second.uploaded + second.alreadyThere == Self.names.count)

        try await waitUntil(timeout: .seconds(10), "nginx to log every PUT") {
            try target.acceptedPuts().count >= Self.names.count
        }
        let puts = try target.acceptedPuts()
        #expect(Set(puts.keys) == Set(Self.names))
        #expect(puts.filter { $0.value != 1 }.isEmpty, "sent more than once: \(puts.filter { $0.value != 1 })")
        for name in Self.names {
            let stored = FileManager.default.contents(atPath: target.storedPath(name)).map { Array($0) }
            #expect(stored == Self.content(of: name), "\(name) differs on the server")
        }
    }

    @Test func aFolderUploadToS3CancelledMidwayResumesAndStoresEveryFileExactly() async throws {
        // The unchecked server: moto's signature checker refuses valid signatures for non-ASCII and `%` keys.
        let moto = try await MotoServer.shared(.unchecked)
        let bucket = try await moto.makeBucket("library")
        let tree = try Self.writeTree()
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let credentials = AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey)
        let destination = try S3Destination("s3://\(bucket)/photos", endpoint: moto.endpoint, credentials: credentials)
        let second = try await Self.uploadCancelledThenResumed(tree, to: .s3(destination), journal: journal)
        // A PUT in flight when the first run was cancelled may have been stored without reaching the journal: the
        // second run finds that object already there (its checksum is the file's) instead of sending it again.
        #expect(second.skipped + second.uploaded + second.alreadyThere == Self.names.count)

        let text = try await moto.inspect("inventory", bucket: bucket)
        let stored = (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String: Any]]) ?? [:]
        #expect(Set(stored.keys) == Set(Self.names.map { "photos/" + $0 }))
        let mismatched = Self.names.filter { name in
            let expected = SHA256.hash(data: Self.content(of: name)).map { String(format: "%02x", $0) }.joined()
            return stored["photos/" + name]?["sha256"] as? String != expected
        }
        #expect(mismatched.isEmpty, "differ: \(mismatched.prefix(5))")
        // Only a PUT in flight when the first upload was cancelled can have reached the store twice.
        let puts = moto.loggedRequests { method, target in
            method == "PUT" && target.hasPrefix("/\(bucket)/photos/")
        }.filter { $0.status == 200 }
        #expect(puts.count >= Self.names.count && puts.count <= Self.names.count + Self.concurrency)
    }

    /// Multipart uploads a stopped run left: one for a file deleted since, which nothing would ever complete (S3
    /// bills its parts until it is aborted), and one for a file still there that this run's filter leaves out.
    /// The next run aborts the first (boto3 sees it gone; the journal records it) and keeps the second.
    @Test func theNextRunAbortsAnUnfinishedUploadOfAFileDeletedSince() async throws {
        let moto = try await MotoServer.shared()
        let bucket = try await moto.makeBucket("gone")
        let tree = try SourceTree(prefix: "curlew-upload-gone")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("kept.txt", [1, 2, 3])
        try tree.write("later.bin", [4, 5, 6])
        let credentials = AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey)
        let destination = try S3Destination("s3://\(bucket)/p", endpoint: moto.endpoint, credentials: credentials)
        var configuration = UploadConfiguration(source: .folder(tree.root), destination: .s3(destination))
        configuration.journalPath = journal
        configuration.excludes = ["later.bin"]
        let client = CurlewClient()
        #expect(try await Upload(configuration, client: client).run().uploaded == 1)

        func startUpload(_ key: String) async throws -> String {
            let reply = try await moto.inspect("create-upload", bucket: bucket, [key])
            let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: String]
            return try #require(object?["upload_id"], "\(reply)")
        }
        let goneID = try await startUpload("p/gone.bin")
        let laterID = try await startUpload("p/later.bin")
        let handle = try #require(FileHandle(forWritingAtPath: journal))
        try handle.seekToEnd()
        for (id, path) in [(goneID, "gone.bin"), (laterID, "later.bin")] {
            let line = "upload\t100\t5\t\(8 << 20)\t\(PercentEncoding.encodeComponent(id))\t\(path)\n"
            try handle.write(contentsOf: Data(line.utf8))
        }
        try handle.close()

        let second = try await Upload(configuration, client: client).run()
        await client.shutdown()
        #expect(second.failed == 0 && second.skipped == 1)
        let open = try await moto.inspect("uploads", bucket: bucket)
        let keys = ((try JSONSerialization.jsonObject(with: Data(open.utf8)) as? [[String: String]]) ?? []).map {
            $0["key"] ?? "?"
        }
        #expect(keys == ["p/later.bin"], "\(open)")
        func aborts() -> [Int] {
            moto.loggedRequests { method, target in
                method == "DELETE" && target.hasPrefix("/\(bucket)/") && target.contains("uploadId=")
            }.map(\.status)
        }
        try await waitUntil(timeout: .seconds(10), "moto to log the abort") { !aborts().isEmpty }
        #expect(aborts() == [204])
        let recorded = try String(contentsOfFile: journal, encoding: .utf8)
        #expect(recorded.contains("abort\t\(PercentEncoding.encodeComponent(goneID))\tgone.bin\n"))
    }

    @Test func theS3ClientUploadsOneLargeFileInPartsAndSeesItExist() async throws {
        // The unchecked server: moto's signature checker refuses the ListMultipartUploads request that a resumable
        // upload starts with when its `prefix=` value holds a `%2F` (a key without `/` passes).
        let moto = try await MotoServer.shared(.unchecked)
        let bucket = try await moto.makeBucket("single")
        let tree = try SourceTree(prefix: "curlew-s3-single")
        defer { tree.remove() }
        let bytes = SourceTree.content(for: "large", size: (11 << 20) + 5)
        let path = try tree.write("large.bin", bytes)

        let client = CurlewClient()
        let endpoint = try S3Endpoint(endpoint: moto.endpoint, region: "us-east-1", bucket: bucket)
        let s3 = S3Client(
            endpoint: endpoint,
            credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey),
            client: client)
        var options = S3ObjectOptions()
        options.partSize = 5 << 20
        options.metadata = ["origin": "library-test"]
        #expect(try await !s3.objectExists(key: "big/large.bin"))
        #expect(try await s3.uploadFile(at: path, key: "big/large.bin", options: options) == .uploaded)
        #expect(try await s3.objectExists(key: "big/large.bin"))
        options.skipExisting = true
        #expect(try await s3.uploadFile(at: path, key: "big/large.bin", options: options) == .alreadyThere)
        await client.shutdown()

        let text = try await moto.inspect("inventory", bucket: bucket)
        let stored = (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String: Any]]) ?? [:]
        let object = try #require(stored["big/large.bin"])
        #expect(object["sha256"] as? String == SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())
        // 11 MiB in 5 MiB parts: 3 parts.
        #expect((object["etag"] as? String)?.hasSuffix("-3\"") == true)
        #expect((object["metadata"] as? [String: String])?["origin"] == "library-test")
    }

    @Test func problemsAreTypedErrorsAndAnUploadRunsOnce() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-errors")
        defer { tree.remove() }
        let client = CurlewClient()
        let missing = UploadConfiguration(
            source: .folder(tree.root + "/missing"), destination: .put(baseURL: "http://127.0.0.1:9/"))
        #expect {
            try Upload(missing, client: client)
        } throws: { error in
            (error as? UploadError)?.kind == .unreadableSource
        }
        var noWorkers = UploadConfiguration(source: .folder(tree.root), destination: .put(baseURL: "http://x/"))
        noWorkers.concurrency = 0
        #expect {
            try Upload(noWorkers, client: client)
        } throws: { error in
            (error as? UploadError)?.kind == .invalidConfiguration
        }
        #expect(throws: S3ConfigurationError.self) {
            try S3Destination(
                "s3://Not_A_Bucket/x", credentials: AWSCredentials(accessKeyID: "a", secretAccessKey: "b"))
        }

        // An empty folder: nothing to send, nothing sent.
        let empty = try Upload(
            UploadConfiguration(source: .folder(tree.root), destination: .put(baseURL: "http://127.0.0.1:9/")),
            client: client)
        let summary = try await empty.run()
        #expect(summary.files == 0 && summary.uploaded == 0 && !summary.interrupted)
        await #expect {
            try await empty.run()
        } throws: { error in
            (error as? UploadError)?.kind == .invalidConfiguration
        }
        await client.shutdown()
    }
}

extension UploadTests {
    /// A form endpoint cannot be asked whether it took a file, so every request carries an `Idempotency-Key` that a
    /// server can deduplicate on: the same for a file in every run, different for every file.
    @Test func everyFileCarriesTheSameIdempotencyKeyInEveryRun() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-idempotency")
        defer { tree.remove() }
        let names = ["a.txt", "b.txt", "dir/c.txt", "empty.bin"]
        for name in names { try tree.write(name, name == "empty.bin" ? [] : Array(name.utf8)) }
        let keys = Mutex<[String: [String]]>([:])
        try await withScriptedServer({ request in
            // The form's first field is the file's path: `name="path"`, a blank line, the value.
            let body = String(decoding: request.body, as: UTF8.self)
            let value = body.range(of: "name=\"path\"\r\n\r\n").map { body[$0.upperBound...] }
            let path = value.map { String($0.prefix { $0 != "\r\n" }) } ?? "?"
            keys.withLock { $0[path, default: []].append(request.header("Idempotency-Key") ?? "") }
            return ScriptedResponse(status: 201)
        }) { server in
            let configuration = UploadConfiguration(
                source: .folder(tree.root), destination: .multipartForm(url: server.baseURL + "/form"))
            let client = CurlewClient()
            for _ in 0..<2 {
                let summary = try await Upload(configuration, client: client).run()
                #expect(summary.uploaded == names.count, "\(summary.failures)")
            }
            await client.shutdown()
        }
        let seen = keys.withLock { $0 }
        #expect(Set(seen.keys) == Set(names), "each request named its file first: \(seen.keys)")
        for (name, sent) in seen {
            #expect(sent.count == 2 && sent[0] == sent[1] && sent[0].count == 34, "\(name): \(sent)")
        }
        #expect(Set(seen.values.map { $0[0] }).count == names.count, "a key per file")
    }
}

/// What a journal is bound to: the destination's scheme, host, port and path (an S3 store's endpoint, bucket and
/// prefix), so that its records never leave files out of a run to another place.
extension UploadTests {
    /// One modification time for files that must look alike to the journal but for their names.
    static let sameModification = timespec(tv_sec: 1_700_000_000, tv_nsec: 123_456_789)
    static let sameModificationNanoseconds: Int64 = 1_700_000_000_123_456_789

    /// Writes `bytes` to `name` in `tree`, modified at ``sameModification``.
    static func writeAlike(_ name: String, _ bytes: [UInt8], in tree: SourceTree) throws {
        let path = try tree.write(name, bytes)
        let times = [sameModification, sameModification]
        #expect(utimensat(AT_FDCWD, path, times, 0) == 0, "cannot set the modification time of \(path)")
    }

    /// The bytes of the file at `path`, opened by the path's exact bytes (no Foundation path conversion).
    static func storedBytes(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { return count == 0 ? bytes : nil }
            bytes += buffer[..<count]
        }
    }

    /// An upload of `tree`'s folder with `journal`, built (which binds the journal) and not run.
    static func upload(
        _ tree: SourceTree, to destination: UploadDestination, journal: String, client: CurlewClient
    ) throws(UploadError) -> Upload {
        var configuration = UploadConfiguration(source: .folder(tree.root), destination: destination)
        configuration.journalPath = journal
        return try Upload(configuration, client: client)
    }

    /// `café` spelled with `é` (NFC) and with `e` and a combining accent (NFD) are two files on Linux. With the same
    /// size and modification time, the journal's record of one used to stand for the other (Swift's `String`
    /// compares them as equal), and the run after it skipped a file that was never sent.
    @Test func aFileNamedLikeAJournaledOneButForUnicodeNormalizationIsStillSent() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-twins")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let composed = "caf\u{E9}.txt"
        let decomposed = "cafe\u{301}.txt"
        try Self.writeAlike(composed, Array("NFC!".utf8), in: tree)
        var configuration = UploadConfiguration(source: .folder(tree.root), destination: .put(baseURL: target.url))
        configuration.journalPath = journal
        let client = CurlewClient()
        let first = try await Upload(configuration, client: client).run()
        #expect(first.uploaded == 1)

        try Self.writeAlike(decomposed, Array("NFD!".utf8), in: tree)
        let second = try await Upload(configuration, client: client).run()
        await client.shutdown()
        #expect(second.files == 2, "the folder holds two files")
        #expect(second.skipped == 1 && second.uploaded == 1, "skipped \(second.skipped), sent \(second.uploaded)")

        func accepted() -> [[UInt8]] {
            target.loggedRequests(method: "PUT").filter { (200..<300).contains($0.status) }.map { Array($0.path.utf8) }
        }
        try await waitUntil(timeout: .seconds(10), "nginx to log both PUTs") { accepted().count >= 2 }
        #expect(accepted() == [Array(composed.utf8), Array(decomposed.utf8)])
        #expect(Self.storedBytes(target.storedPath(decomposed)) == Array("NFD!".utf8))
        #expect(Self.storedBytes(target.storedPath(composed)) == Array("NFC!".utf8))
    }

    /// A journal used for staging and then for production with the same path would make production skip every file
    /// staging got. It is refused for another host, port or scheme, before anything is sent (the upload is not
    /// made); the same place written otherwise (host case, the scheme's default port, a password) is accepted, and
    /// the journal never holds the password.
    @Test func aJournalBoundToOneHostIsRefusedForAnotherWithTheSamePath() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-journal-host")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("a.txt", [1])
        let client = CurlewClient()
        func upload(to url: String) throws(UploadError) -> Upload {
            try Self.upload(tree, to: .put(baseURL: url), journal: journal, client: client)
        }
        _ = try upload(to: "https://user:hunter2@Staging.Example/files/")
        _ = try upload(to: "https://staging.example:443/files/")
        _ = try upload(to: "HTTPS://STAGING.EXAMPLE/files")

        let refusal = #expect(throws: UploadError.self) { try upload(to: "https://prod.example/files/") }
        #expect(refusal?.kind == .journal)
        #expect(
            refusal?.description.contains(
                "records uploads to https://staging.example:443/files/, not https://prod.example:443/files/")
                == true, "\(String(describing: refusal))")
        for elsewhere in ["https://staging.example:8443/files/", "http://staging.example/files/"] {
            let refused = #expect(throws: UploadError.self, "\(elsewhere)") { try upload(to: elsewhere) }
            #expect(refused?.kind == .journal)
        }
        await client.shutdown()
        let text = try String(contentsOfFile: journal, encoding: .utf8)
        #expect(!text.contains("hunter2") && !text.contains("user"), "\(text)")
    }

    /// An `http+unix` URL's host is a percent-encoded socket path, which the engine's origin parser cannot read: the
    /// journal named the path alone then, as a journal of an earlier version does, so one socket's journal passed
    /// for another socket's, and for any host's (taken as path-only and re-bound): production skipped what the
    /// socket's server got. The socket is now named by the URL's scheme and authority, without user-info.
    @Test func aJournalOfASocketIsBoundToThatSocket() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-journal-socket")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("a.txt", [1])
        let socket = "http+unix://%2Ftmp%2Fa.sock/files/"
        #expect(
            Upload.journalDestination(.put(baseURL: "HTTP+UNIX://user:hunter2@%2Ftmp%2Fa.sock/files/")).name == socket)
        let client = CurlewClient()
        func upload(to url: String) throws(UploadError) -> Upload {
            try Self.upload(tree, to: .put(baseURL: url), journal: journal, client: client)
        }
        _ = try upload(to: socket)
        _ = try upload(to: socket)
        for elsewhere in ["http+unix://%2Ftmp%2Fb.sock/files/", "https://prod.example/files/"] {
            let refusal = #expect(throws: UploadError.self, "\(elsewhere)") { try upload(to: elsewhere) }
            #expect(refusal?.kind == .journal)
            #expect(refusal?.description.contains("records uploads to \(socket), not ") == true)
        }
        await client.shutdown()
    }

    /// A form URL with a query is another destination than the URL alone, as a PUT folder with one is: the journal
    /// names it `path?`, and the query's value (it may be a credential) stays out.
    @Test func aFormJournalIsBoundToWhetherTheURLHasAQuery() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-journal-form-query")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("a.txt", [1])
        let client = CurlewClient()
        func upload(to url: String) throws(UploadError) -> Upload {
            try Self.upload(tree, to: .multipartForm(url: url), journal: journal, client: client)
        }
        _ = try upload(to: "https://forms.example/upload")
        let refusal = #expect(throws: UploadError.self) { try upload(to: "https://forms.example/upload?env=k3y") }
        #expect(refusal?.kind == .journal)
        #expect(
            refusal?.description.contains("not https://forms.example:443/upload?:") == true,
            "\(String(describing: refusal))")
        #expect(refusal?.description.contains("k3y") == false)
        await client.shutdown()
    }

    /// The same bucket and prefix on another store (another endpoint) is another place; the same store addressed
    /// another way (virtual-hosted or path-style) is the same.
    @Test func anS3JournalIsBoundToTheEndpointAsWellAsTheBucketAndPrefix() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-journal-s3")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("a.txt", [1])
        let credentials = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "secret")
        let client = CurlewClient()
        func upload(endpoint: String?, addressing: S3Addressing = .auto) throws -> Upload {
            let destination = try S3Destination(
                "s3://journal-bucket/p", endpoint: endpoint, addressing: addressing, credentials: credentials)
            return try Self.upload(tree, to: .s3(destination), journal: journal, client: client)
        }
        _ = try upload(endpoint: "http://127.0.0.1:9000")
        _ = try upload(endpoint: "http://127.0.0.1:9000/", addressing: .virtual)
        for elsewhere in ["http://127.0.0.1:9001", nil] {
            let refusal = #expect(throws: UploadError.self, "\(elsewhere ?? "AWS")") {
                try upload(endpoint: elsewhere)
            }
            #expect(refusal?.kind == .journal)
            #expect(refusal?.description.contains("s3://journal-bucket/p/ at http://127.0.0.1:9000") == true)
        }
        await client.shutdown()
    }

    /// A journal written before journals named the host records only the path. It resumes a run to that path, as
    /// the version that wrote it would have (a run interrupted before an upgrade finishes after it), and is then bound
    /// to the whole destination: from that run on, another host with the same path is refused.
    @Test func aJournalThatRecordsOnlyThePathResumesOnItAndIsThenBoundToTheHost() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-journal-legacy")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try Self.writeAlike("a.txt", [1], in: tree)
        try Self.writeAlike("b.txt", [2], in: tree)
        let legacy =
            "# curlew upload journal v1\ntarget\t\(PercentEncoding.encodeComponent(target.pathPrefix))\n"
            + "done\t1\t\(Self.sameModificationNanoseconds)\ta.txt\n"
        try Data(legacy.utf8).write(to: URL(fileURLWithPath: journal))

        var configuration = UploadConfiguration(source: .folder(tree.root), destination: .put(baseURL: target.url))
        configuration.journalPath = journal
        let client = CurlewClient()
        let resumed = try await Upload(configuration, client: client).run()
        #expect(resumed.skipped == 1 && resumed.uploaded == 1, "\(resumed.failures)")
        let text = try String(contentsOfFile: journal, encoding: .utf8)
        #expect(text.contains("target\t\(PercentEncoding.encodeComponent(target.url))\n"), "\(text)")

        let byAnotherName = target.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let refusal = #expect(throws: UploadError.self) {
            try Self.upload(tree, to: .put(baseURL: byAnotherName), journal: journal, client: client)
        }
        #expect(refusal?.kind == .journal)
        await client.shutdown()
        try await waitUntil(timeout: .seconds(10), "nginx to log the PUT") {
            !target.loggedRequests(method: "PUT").isEmpty
        }
        #expect(target.loggedRequests(method: "PUT").map(\.path) == ["b.txt"])
    }
}
