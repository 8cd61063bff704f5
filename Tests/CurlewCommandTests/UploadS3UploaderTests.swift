import Crypto
import CurlewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `curlew upload … s3://…` against moto's S3 server, verified by boto3 (`Tests/servers/s3_inspect.py`) and by
/// moto's own request log.
@Suite struct UploadS3UploaderTests {
    /// Names moto's signature checker gets right: it refuses valid signatures (boto3's too) for keys with
    /// non-ASCII letters, `%`, `+`, `&`, `=`, `'`, `(`, `!`, `,`, `;`, `@`, `$`, `*` or `[`. Those are tested on the
    /// unchecked server.
    static let asciiAwkwardNames = [
        "plain.txt", "with space.txt", "hash#tag.json", "index.html", "data.csv", "notes.md",
        "deep/er/still/file.png", "empty.bin", "UPPER.JPG", "tilde~dash-under_score.tar.gz",
    ]

    static func run(
        _ moto: MotoServer, _ arguments: [String], environment: [String: String] = [:],
        timeout: Duration = .seconds(120)
    ) async throws -> CommandOutput {
        // HOME elsewhere: the machine's own ~/.aws must not be read.
        try await CurlewBinary.run(
            ["upload"] + arguments + ["--endpoint", moto.endpoint, "--no-progress"],
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 }.merging(environment) {
                $1
            }, timeout: timeout)
    }

    /// Every object of the bucket, downloaded back and hashed by boto3 (off the cooperative pool: it takes a while).
    static func inventory(_ moto: MotoServer, _ bucket: String) async throws -> [String: [String: Any]] {
        let text = try await moto.inspect("inventory", bucket: bucket)
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String: Any]]) ?? [:]
    }

    static func openUploads(_ moto: MotoServer, _ bucket: String) async throws -> Int {
        let text = try await moto.inspect("uploads", bucket: bucket)
        return ((try JSONSerialization.jsonObject(with: Data(text.utf8))) as? [Any])?.count ?? -1
    }

    /// Hex SHA-256 of a file, read off the cooperative pool.
    static func hexSHA256(ofFile path: String) async throws -> String {
        try await offCooperativePool { try FileDigest.sha256(ofFile: path).map { String(format: "%02x", $0) }.joined() }
    }

    /// A file of random bytes (a repeated pattern would hide swapped parts), copied from /dev/urandom in 1 MiB blocks.
    static func writeRandomFile(_ path: String, size: Int) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let output = FileHandle(forWritingAtPath: path),
            let random = FileHandle(forReadingAtPath: "/dev/urandom")
        else { throw TestSupportError("cannot create \(path)") }
        defer {
            try? output.close()
            try? random.close()
        }
        var remaining = size
        while remaining > 0 {
            let block = try random.read(upToCount: min(remaining, 1 << 20)) ?? Data()
            guard !block.isEmpty else { throw TestSupportError("/dev/urandom gave nothing") }
            try output.write(contentsOf: block)
            remaining -= block.count
        }
    }

    /// Waits (up to an hour) for `running` to exit, reading its peak resident set (VmHWM) meanwhile, in KiB: what a
    /// constant-memory test compares with the bytes it sent.
    static func peakResidentKiB(untilExitOf running: RunningCommand) async throws -> Int {
        var peakKiB = 0
        try await waitUntil(timeout: .seconds(3600), pollInterval: .milliseconds(200), "curlew to finish") {
            let status = (try? String(contentsOfFile: "/proc/\(running.pid)/status", encoding: .utf8)) ?? ""
            if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                let kib = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) })
            {
                peakKiB = max(peakKiB, kib)
            }
            return !running.isRunning
        }
        return peakKiB
    }

    /// UploadPart requests moto answered with 2xx, per part number, for one bucket.
    static func acceptedParts(_ moto: MotoServer, bucket: String) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for request in moto.loggedRequests({ method, target in
            method == "PUT" && target.hasPrefix("/\(bucket)/") && target.contains("partNumber=")
        })
        where (200..<300).contains(request.status) {
            let query = request.target.split(separator: "?").last ?? ""
            for pair in query.split(separator: "&") where pair.hasPrefix("partNumber=") {
                counts[Int(pair.dropFirst("partNumber=".count)) ?? -1, default: 0] += 1
            }
        }
        return counts
    }

    @Test func uploadsAwkwardNamesAndALargeFileInPartsToSignatureCheckedMoto() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("tree")
        let tree = try SourceTree(prefix: "curlew-s3-tree")
        defer { tree.remove() }
        for name in Self.asciiAwkwardNames {
            try tree.write(name, name.hasPrefix("empty") ? [] : SourceTree.content(for: name, size: 4000))
        }
        let largeSize = (23 << 20) + 12345
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/big/random.bin", size: largeSize) }

        let output = try await Self.run(
            moto,
            [
                tree.root, "s3://\(bucket)/backup", "--part-size", "5MiB", "--concurrency", "4", "--json",
                "--metadata", "owner=curlew", "--metadata", "run=1", "--storage-class", "STANDARD_IA", "--journal",
                tree.root + ".journal",
            ])
        defer { try? FileManager.default.removeItem(atPath: tree.root + ".journal") }
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["uploaded"] as? Int == Self.asciiAwkwardNames.count + 1)
        #expect(json["failed"] as? Int == 0)

        let stored = try await Self.inventory(moto, bucket)
        #expect(stored.count == Self.asciiAwkwardNames.count + 1)
        for name in Self.asciiAwkwardNames + ["big/random.bin"] {
            let object = stored["backup/" + name]
            let sha256 = try await Self.hexSHA256(ofFile: tree.root + "/" + name)
            #expect(object?["sha256"] as? String == sha256, "\(name) differs or is missing")
            // The user's metadata, and the whole file's SHA-256 that a later --skip-existing compares.
            #expect(
                (object?["metadata"] as? [String: String]) == ["owner": "curlew", "run": "1", "curlew-sha256": sha256],
                "\(name)")
            #expect(object?["storage_class"] as? String == "STANDARD_IA", "\(name)")
        }
        #expect(stored["backup/hash#tag.json"]?["content_type"] as? String == "application/json")
        #expect(stored["backup/UPPER.JPG"]?["content_type"] as? String == "image/jpeg")
        #expect(stored["backup/empty.bin"]?["content_type"] as? String == "application/octet-stream")
        // 23 MiB + a bit in 5 MiB parts: 5 parts, each accepted exactly once.
        #expect((stored["backup/big/random.bin"]?["etag"] as? String)?.hasSuffix("-5\"") == true)
        #expect(Self.acceptedParts(moto, bucket: bucket) == [1: 1, 2: 1, 3: 1, 4: 1, 5: 1])
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }

    /// The issue's proof, scaled for CI: 2,000 awkwardly named files (non-ASCII, `%`, `?`, `#`, quotes, empty) and a
    /// large random file in parts, every object downloaded back by boto3 and compared. On the unchecked server,
    /// because moto's signature checker refuses valid signatures for such names.
    @Test func uploadsTwoThousandAwkwardNamesAndALargeFileExactly() async throws {
        let moto = try await MotoServer.shared(.unchecked)
        let bucket = try await moto.makeBucket("many")
        let tree = try SourceTree(prefix: "curlew-s3-many")
        defer { tree.remove() }
        let names = (0..<200).flatMap { set in UploadCommandTests.awkwardNames.map { "set \(set)/\($0)" } }
        try await offCooperativePool {
            for name in names {
                try tree.write(
                    name, name.contains("empty") ? [] : SourceTree.content(for: name, size: 500 + name.utf8.count * 7))
            }
            try Self.writeRandomFile(tree.root + "/large random.bin", size: (40 << 20) + 777)
        }
        let output = try await Self.run(
            moto, [tree.root, "s3://\(bucket)/", "--concurrency", "8", "--json"], timeout: .seconds(300))
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        #expect(try output.json()["uploaded"] as? Int == names.count + 1)

        let stored = try await Self.inventory(moto, bucket)
        #expect(Set(stored.keys) == Set(names + ["large random.bin"]))
        var mismatched: [String] = []
        for name in names + ["large random.bin"]
        where stored[name]?["sha256"] as? String != (try await Self.hexSHA256(ofFile: tree.root + "/" + name)) {
            mismatched.append(name)
        }
        #expect(mismatched.isEmpty, "differ: \(mismatched.prefix(10))")
        // 40 MiB in the default 16 MiB parts: 3 parts.
        #expect((stored["large random.bin"]?["etag"] as? String)?.hasSuffix("-3\"") == true)
    }

    /// Over S3's 5 GiB single-PUT limit (`make test-large`; CURLEW_LARGE_OBJECT_TEST_GIB=6).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CURLEW_LARGE_OBJECT_TEST_GIB"] != nil))
    func uploadsAnObjectOverFiveGiB() async throws {
        let gibibytes = Int(ProcessInfo.processInfo.environment["CURLEW_LARGE_OBJECT_TEST_GIB"] ?? "") ?? 6
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("huge")
        let tree = try SourceTree(prefix: "curlew-s3-huge")
        defer { tree.remove() }
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/huge.bin", size: gibibytes << 30) }
        let running = try CurlewBinary.start(
            [
                "upload", tree.root, "s3://\(bucket)/", "--part-size", "64MiB", "--json", "--no-progress", "--endpoint",
                moto.endpoint,
            ],
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 })
        // Constant memory: the process's peak resident set, read while it runs, stays far below the file's size.
        let peakKiB = try await Self.peakResidentKiB(untilExitOf: running)
        let output = try await running.finish()
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        #expect(peakKiB > 0 && peakKiB < 200 << 10, "peak RSS \(peakKiB) KiB")
        let stored = try await Self.inventory(moto, bucket)
        #expect(stored["huge.bin"]?["size"] as? Int == gibibytes << 30)
        #expect(stored["huge.bin"]?["sha256"] as? String == (try await Self.hexSHA256(ofFile: tree.root + "/huge.bin")))
    }

    /// A pipe of GiBs (`make test-large`; CURLEW_PIPE_TEST_GIB=2) in constant memory: curlew reads a FIFO (its own
    /// process, so its peak RSS is read), and boto3 reads the object back byte for byte.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CURLEW_PIPE_TEST_GIB"] != nil))
    func uploadsAPipeOfGibibytesInConstantMemory() async throws {
        let gibibytes = Int(ProcessInfo.processInfo.environment["CURLEW_PIPE_TEST_GIB"] ?? "") ?? 2
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("pipe-huge")
        let tree = try SourceTree(prefix: "curlew-s3-pipe-huge")
        defer { tree.remove() }
        let input = tree.root + "/input.bin", fifo = tree.root + "/fifo"
        try await offCooperativePool { try Self.writeRandomFile(input, size: gibibytes << 30) }
        guard mkfifo(fifo, 0o600) == 0 else { throw TestSupportError("mkfifo failed") }
        let running = try CurlewBinary.start(
            [
                "upload", "-", "s3://\(bucket)/stream.bin", "--concurrency", "4", "--json", "--no-progress",
                "--endpoint", moto.endpoint,
            ], wrapper: ["/bin/sh", "-c", "exec \"$0\" \"$@\" < '\(fifo)'"],
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 })
        async let writer = CurlewBinary.runProgram(
            ["/bin/sh", "-c", "cat '\(input)' > '\(fifo)'"], timeout: .seconds(3600))
        let peakKiB = try await Self.peakResidentKiB(untilExitOf: running)
        let output = try await running.finish()
        #expect(try await writer.status == 0)
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        FileHandle.standardError.write(
            Data(
                "UploadS3UploaderTests: pipe of \(gibibytes) GiB: peak RSS \(peakKiB / 1024) MiB; \(output.stdout)\n"
                    .utf8))
        #expect(peakKiB > 0 && peakKiB < 250 << 10, "peak RSS \(peakKiB) KiB")
        let digest = try await Self.hexSHA256(ofFile: input)
        #expect(try output.json()["sha256"] as? String == digest)
        let stored = try await Self.inventory(moto, bucket)
        #expect(stored["stream.bin"]?["size"] as? Int == gibibytes << 30)
        #expect(stored["stream.bin"]?["sha256"] as? String == digest)
    }

    /// Ctrl-C (or SIGTERM) while standard input streams to S3: the multipart upload is aborted, nothing is stored,
    /// and the exit status says interrupted. Before, the signal killed the process outright and the upload stayed in
    /// the store, its parts billed; and an input that ended early could have been completed as the object.
    @Test func anInterruptedStreamLeavesNoUploadAndNoObject() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("interrupt-stream")
        let tree = try SourceTree(prefix: "curlew-s3-interrupt-stream")
        defer { tree.remove() }
        let input = try tree.write("input.bin", SourceTree.content(for: "stream", size: 12 << 20))
        let fifo = tree.root + "/fifo", writerDone = tree.root + "/writer-done"
        guard mkfifo(fifo, 0o600) == 0 else { throw TestSupportError("mkfifo failed") }
        let running = try CurlewBinary.start(
            [
                "upload", "-", "s3://\(bucket)/stream.bin", "--part-size", "5MiB", "--json", "--no-progress",
                "--endpoint", moto.endpoint,
            ], wrapper: ["/bin/sh", "-c", "exec \"$0\" \"$@\" < '\(fifo)'"],
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 })
        // The producer writes 12 MiB and keeps the pipe open (no end of input) until the test is done, at most 60 s.
        async let writer = CurlewBinary.runProgram(
            [
                "/bin/sh", "-c",
                "exec 3>'\(fifo)'; cat '\(input)' >&3; i=0; "
                    + "while [ ! -e '\(writerDone)' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done",
            ], timeout: .seconds(120))
        try await waitUntil(timeout: .seconds(60), "two parts stored") {
            Self.acceptedParts(moto, bucket: bucket).count >= 2
        }
        running.signal(SIGINT)
        let output = try await running.finish(timeout: .seconds(60))
        #expect(FileManager.default.createFile(atPath: writerDone, contents: nil))
        _ = try await writer
        #expect(output.status == 130, "\(output.stdout)\n\(output.stderr)")
        #expect(try await Self.openUploads(moto, bucket) == 0, "the multipart upload was aborted")
        #expect(try await Self.inventory(moto, bucket)["stream.bin"] == nil, "no object was stored")
    }

    @Test func aWrongSecretIsNamedOnceAndFailsTheRun() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("badkey")
        let tree = try SourceTree(prefix: "curlew-s3-badkey")
        defer { tree.remove() }
        for index in 0..<20 { try tree.write("file\(index).txt", SourceTree.content(for: "f\(index)", size: 1000)) }
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/big.bin", size: 12 << 20) }

        let output = try await Self.run(
            moto, [tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--concurrency", "4"],
            environment: ["AWS_SECRET_ACCESS_KEY": "not-the-secret"])
        #expect(output.status == 1)
        #expect(output.stderr.components(separatedBy: "bad credentials").count - 1 == 1, "\(output.stderr)")
        #expect(!output.stdout.contains("not-the-secret") && !output.stderr.contains("not-the-secret"))
        #expect(!output.stdout.contains(moto.secretAccessKey) && !output.stderr.contains(moto.secretAccessKey))
        #expect(try await Self.inventory(moto, bucket).isEmpty)
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }

    @Test func credentialsComeFromANamedProfileAndAreNeverPrinted() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("profile")
        let tree = try SourceTree(prefix: "curlew-s3-profile")
        defer { tree.remove() }
        try tree.write("a.txt", Array("profile".utf8))
        let home = tree.root + "-home"
        defer { try? FileManager.default.removeItem(atPath: home) }
        try FileManager.default.createDirectory(atPath: home + "/.aws", withIntermediateDirectories: true)
        try Data(
            "[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = wrong\n[ci]\naws_access_key_id = \(moto.accessKeyID)\naws_secret_access_key = \(moto.secretAccessKey)\n"
                .utf8
        )
        .write(to: URL(fileURLWithPath: home + "/.aws/credentials"))
        try Data("[profile ci]\nregion = us-east-1\n".utf8).write(to: URL(fileURLWithPath: home + "/.aws/config"))

        let output = try await CurlewBinary.run(
            ["upload", tree.root, "s3://\(bucket)/", "--endpoint", moto.endpoint, "--no-progress"],
            environment: [
                "HOME": home, "AWS_PROFILE": "ci", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
                "AWS_REGION": "",
            ])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        #expect(output.stdout.contains("credentials from profile ci"))
        #expect(!output.stdout.contains(moto.secretAccessKey) && !output.stderr.contains(moto.secretAccessKey))
        #expect(
            try await Self.inventory(moto, bucket)["a.txt"]?["sha256"] as? String
                == (try await Self.hexSHA256(ofFile: tree.root + "/a.txt")))
    }

    @Test func aMissingBucketIsNamedOnceAndFailsTheRun() async throws {
        let moto = try await MotoServer.shared(.checked)
        let tree = try SourceTree(prefix: "curlew-s3-nobucket")
        defer { tree.remove() }
        for index in 0..<10 { try tree.write("file\(index).txt", SourceTree.content(for: "f\(index)", size: 1000)) }
        let output = try await Self.run(
            moto, [tree.root, "s3://no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())/x"])
        #expect(output.status == 1)
        #expect(output.stderr.components(separatedBy: "missing bucket").count - 1 == 1, "\(output.stderr)")
    }

    @Test func aPartCorruptedInTransitFailsThatFileAndLeavesNothingBehind() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("corrupt")
        let tree = try SourceTree(prefix: "curlew-s3-corrupt")
        defer { tree.remove() }
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/corrupt-in-transit.bin", size: 12 << 20) }
        try tree.write("fine.txt", SourceTree.content(for: "fine", size: 5000))

        let output = try await Self.run(moto, [tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--json"])
        #expect(output.status == 1)
        let json = try output.json()
        #expect(json["uploaded"] as? Int == 1)
        let failures = json["failures"] as? [[String: Any]] ?? []
        #expect(failures.count == 1)
        #expect(failures.first?["path"] as? String == "corrupt-in-transit.bin")
        #expect((failures.first?["error"] as? String)?.contains("SHA-256") == true, "\(failures)")
        let stored = try await Self.inventory(moto, bucket)
        #expect(Set(stored.keys) == ["fine.txt"])
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }

    @Test func aPartThatFailsForGoodIsRetriedAloneThenTheUploadIsAborted() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("partfail")
        let tree = try SourceTree(prefix: "curlew-s3-partfail")
        defer { tree.remove() }
        try await offCooperativePool {
            try Self.writeRandomFile(tree.root + "/part-two-always-fails.bin", size: (10 << 20) + 100)
        }
        let journal = tree.root + ".journal"
        defer { try? FileManager.default.removeItem(atPath: journal) }

        let output = try await Self.run(
            moto,
            [
                tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--concurrency", "1", "--retries", "2",
                "--journal", journal, "--json",
            ])
        #expect(output.status == 1)
        let failures = try output.json()["failures"] as? [[String: Any]] ?? []
        #expect((failures.first?["error"] as? String)?.contains("after 3 attempts") == true, "\(failures)")
        // Part 2 was tried three times; part 1 went once, and was not sent again for part 2's retries.
        let partTwo = moto.loggedRequests { method, target in
            method == "PUT" && target.hasPrefix("/\(bucket)/") && target.contains("partNumber=2&")
        }
        #expect(partTwo.count == 3)
        #expect(Self.acceptedParts(moto, bucket: bucket)[1] == 1)
        #expect(try await Self.openUploads(moto, bucket) == 0)
        let lines = try String(contentsOfFile: journal, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("upload\t") })
        #expect(lines.contains { $0.hasPrefix("abort\t") }, "the journal must not point at an aborted upload")
        #expect(try await Self.inventory(moto, bucket).isEmpty)
    }

    @Test func skipExistingSendsNothingTheBucketHoldsOnASecondRun() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("skip")
        let tree = try SourceTree(prefix: "curlew-s3-skip")
        defer { tree.remove() }
        for index in 0..<15 {
            try tree.write("dir/file\(index).txt", SourceTree.content(for: "f\(index)", size: 2000 + index))
        }
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/big.bin", size: 11 << 20) }
        let first = try await Self.run(
            moto, [tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--skip-existing", "--json"])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        let writesAfterFirst = moto.loggedRequests { method, target in
            (method == "PUT" || method == "POST") && target.hasPrefix("/\(bucket)/")
        }.count
        #expect(writesAfterFirst == 15 + 1 + 3 + 1)  // 15 PUTs; create, 3 parts, complete

        // One file changes: only it goes again.
        try tree.write("dir/file3.txt", SourceTree.content(for: "changed", size: 2500))
        let second = try await Self.run(
            moto, [tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--skip-existing", "--json"])
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        let json = try second.json()
        #expect(json["alreadyThere"] as? Int == 15)
        #expect(json["alreadyThereByRule"] as? [String: Int] == ["metadata-sha256": 15])
        #expect(json["uploaded"] as? Int == 1)
        let writes = moto.loggedRequests { method, target in
            (method == "PUT" || method == "POST") && target.hasPrefix("/\(bucket)/")
        }
        #expect(writes.count == writesAfterFirst + 1)
        #expect(writes.last?.target == "/\(bucket)/dir/file3.txt")
    }

    /// `--json-events`: every line on stdout is JSON; each file's events come in order (started, its parts, done),
    /// match what moto stored, and a second run names the journal as the rule for what it skipped.
    @Test func jsonEventsFollowEveryFileAndPartAsMotoStoresThem() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("events")
        let tree = try SourceTree(prefix: "curlew-s3-events")
        defer { tree.remove() }
        for index in 0..<3 { try tree.write("small\(index).txt", SourceTree.content(for: "s\(index)", size: 1000)) }
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/big.bin", size: 11 << 20) }
        try FileManager.default.createSymbolicLink(atPath: tree.root + "/broken", withDestinationPath: "/nonexistent")
        let journal = NSTemporaryDirectory() + "curlew-\(bucket).journal"
        defer { try? FileManager.default.removeItem(atPath: journal) }
        func events(_ output: CommandOutput) throws -> [[String: Any]] {
            try output.stdout.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            }
        }
        let arguments = [
            tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--journal", journal, "--json-events", "--json",
        ]
        let first = try await Self.run(moto, arguments)
        #expect(first.status == 1, "the broken link fails the run: \(first.stdout)\n\(first.stderr)")
        var lines = try events(first)
        let summary = lines.removeLast()
        #expect(summary["uploaded"] as? Int == 4 && summary["failed"] as? Int == 1, "\(summary)")
        func byPath(_ lines: [[String: Any]]) -> [String: [String]] {
            Dictionary(grouping: lines, by: { $0["path"] as? String ?? "" }).mapValues { events in
                events.map { event in
                    let kind = event["event"] as? String ?? "?"
                    if let part = event["part"] as? Int { return "\(kind) \(part)" }
                    if let rule = event["rule"] as? String { return "\(kind) \(rule)" }
                    return kind
                }
            }
        }
        let firstRun = byPath(lines)
        for index in 0..<3 { #expect(firstRun["small\(index).txt"] == ["started", "done"]) }
        let big = try #require(firstRun["big.bin"])
        #expect(big.first == "started" && big.last == "done")
        #expect(Set(big.dropFirst().dropLast()) == ["partDone 1", "partDone 2", "partDone 3"])
        #expect(firstRun["broken"] == ["failed"])
        #expect(
            (lines.first { $0["path"] as? String == "broken" }?["error"] as? String)?.contains("broken symbolic link")
                == true)
        #expect(lines.allSatisfy { ($0["time"] as? Double ?? 0) > 1_700_000_000 })
        #expect(Self.acceptedParts(moto, bucket: bucket) == [1: 1, 2: 1, 3: 1])

        try tree.write("small1.txt", SourceTree.content(for: "changed", size: 1200))
        let second = try await Self.run(moto, arguments)
        lines = try events(second)
        _ = lines.popLast()
        let secondRun = byPath(lines)
        #expect(secondRun["small0.txt"] == ["skipped journal"] && secondRun["small2.txt"] == ["skipped journal"])
        #expect(secondRun["big.bin"] == ["skipped journal"])
        #expect(secondRun["small1.txt"] == ["started", "done"])
        let puts = moto.loggedRequests { method, target in method == "PUT" && target == "/\(bucket)/small1.txt" }
        #expect(puts.filter { (200..<300).contains($0.status) }.count == 2)
    }

    /// `curlew upload - s3://bucket/key`: a pipe, cut into parts as it is read, stored byte for byte (boto3 reads it
    /// back), with the stream's SHA-256 kept in the object's metadata; a short stream goes as one PUT.
    @Test func aPipeGoesUpInPartsAndAShortOneInOnePut() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("pipe")
        let tree = try SourceTree(prefix: "curlew-s3-pipe")
        defer { tree.remove() }
        let long = tree.root + "/long.bin", short = tree.root + "/short.bin"
        try await offCooperativePool {
            try Self.writeRandomFile(long, size: 12 << 20)
            try Self.writeRandomFile(short, size: 1000)
        }
        // Through `cat`, so standard input is a pipe with no size to look at.
        func piped(_ path: String) -> [String] { ["/bin/sh", "-c", "cat '\(path)' | \"$0\" \"$@\""] }
        let output = try await CurlewBinary.run(
            [
                "upload", "-", "s3://\(bucket)/dumps/db.bin", "--part-size", "5MiB", "--endpoint", moto.endpoint,
                "--json",
            ],
            wrapper: piped(long),
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 }, timeout: .seconds(120))
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let summary = try output.json()
        let digest = try await Self.hexSHA256(ofFile: long)
        #expect(summary["bytes"] as? Int == 12 << 20)
        #expect(summary["parts"] as? Int == 3)
        #expect(summary["sha256"] as? String == digest)
        #expect(summary["sha256Stored"] as? Bool == true)
        #expect(Self.acceptedParts(moto, bucket: bucket) == [1: 1, 2: 1, 3: 1])

        let shortOutput = try await CurlewBinary.run(
            ["upload", "-", "s3://\(bucket)/small.bin", "--endpoint", moto.endpoint, "--json"], wrapper: piped(short),
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 })
        #expect(shortOutput.status == 0, "\(shortOutput.stdout)\n\(shortOutput.stderr)")
        #expect(try shortOutput.json()["parts"] as? Int == 0)

        let inventory = try await Self.inventory(moto, bucket)
        #expect(inventory["dumps/db.bin"]?["sha256"] as? String == digest)
        #expect((inventory["dumps/db.bin"]?["metadata"] as? [String: String])?["curlew-sha256"] == digest)
        #expect(inventory["small.bin"]?["sha256"] as? String == (try await Self.hexSHA256(ofFile: short)))
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }

    /// A key allowed to write objects but not to read them (a write-only backup key) cannot copy the object onto
    /// itself to record the stream's SHA-256: the stream is stored all the same, and the summary says the checksum
    /// is not kept. Before, the refused copy failed an upload whose object was already complete.
    @Test func aPipeWhoseChecksumCannotBeRecordedIsStoredAndSaysSo() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("pipe-no-copy")
        let piped = try await pipeTwoParts(to: "copy-refused.bin", bucket: bucket, moto: moto)
        #expect(piped.summary["parts"] as? Int == 2)
        #expect(piped.summary["sha256"] as? String == piped.digest)
        #expect(piped.summary["sha256Stored"] as? Bool == false)
        #expect(piped.summary["error"] as? String == nil)
        // The copy was tried, and refused by the store.
        #expect(piped.copies == [403])
        let inventory = try await Self.inventory(moto, bucket)
        #expect(inventory["copy-refused.bin"]?["sha256"] as? String == piped.digest)
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }

    /// Pipes 6 MiB of random bytes to `key` as a two-part stream; the summary, the input's digest and the statuses
    /// of the PUTs of the bare key (the copies) moto logged, in order.
    private func pipeTwoParts(
        to key: String, bucket: String, moto: MotoServer
    ) async throws -> (
        summary: [String: Any], digest: String, copies: [Int]
    ) {
        let tree = try SourceTree(prefix: "curlew-s3-pipe-copy")
        defer { tree.remove() }
        let input = tree.root + "/input.bin"
        try await offCooperativePool { try Self.writeRandomFile(input, size: 6 << 20) }
        let output = try await CurlewBinary.run(
            ["upload", "-", "s3://\(bucket)/\(key)", "--part-size", "5MiB", "--endpoint", moto.endpoint, "--json"],
            wrapper: ["/bin/sh", "-c", "cat '\(input)' | \"$0\" \"$@\""],
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 }, timeout: .seconds(120))
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        // The parts' PUTs carry a query; the copy is the only PUT of the bare key.
        func copies() -> [Int] {
            moto.loggedRequests { method, target in method == "PUT" && target == "/\(bucket)/\(key)" }.map(\.status)
        }
        try await waitUntil(timeout: .seconds(10), "moto to log the copy") { !copies().isEmpty }
        return (try output.json(), try await Self.hexSHA256(ofFile: input), copies())
    }

    /// A checksum copy that seems to fail is retried, or found made, and the summary says the checksum is stored:
    /// - S3's RequestTimeout comes as a 400, worth another attempt (before: `sha256Stored: false`);
    /// - S3 sends a copy's 200 before the copy is done, so a copy that fails inside comes as 200 with an error
    ///   document (an InternalError is worth another attempt, as S3 advises), or, from a store that fails after its
    ///   200, with no whole result (before: `sha256Stored: false` though a retry would have stored it, and
    ///   `sha256Stored: true` with nothing stored);
    /// - the copy is made but its reply is lost: the retry's precondition (the completion's ETag) no longer holds,
    ///   because the first attempt changed the object, and the store answers 412; moto logs the lost reply's 200 as
    ///   it starts to send it (before: `sha256Stored: false`).
    @Test(arguments: [
        ("copy-timeout-once.bin", [400, 200]), ("copy-200-error-once.bin", [200, 200]),
        ("copy-200-empty-once.bin", [200, 200]), ("copy-reply-lost-once.bin", [200, 412]),
    ])
    func aChecksumCopyThatSeemsToFailIsRetriedOrFoundMade(key: String, copies: [Int]) async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("pipe-" + key.prefix { $0 != "." })
        let piped = try await pipeTwoParts(to: key, bucket: bucket, moto: moto)
        #expect(piped.copies == copies)
        #expect(piped.summary["sha256Stored"] as? Bool == true)
        #expect(piped.summary["error"] as? String == nil)
        let stored = try await Self.inventory(moto, bucket)[key]
        #expect(stored?["sha256"] as? String == piped.digest)
        #expect((stored?["metadata"] as? [String: String])?["curlew-sha256"] == piped.digest)
    }

    @Test func aChecksumIsNotStampedOnAnObjectAnotherWriterPutFirst() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("pipe-replaced")
        let piped = try await pipeTwoParts(to: "replaced-before-copy.bin", bucket: bucket, moto: moto)
        #expect(piped.copies == [412])
        #expect(piped.summary["sha256"] as? String == piped.digest)
        #expect(piped.summary["sha256Stored"] as? Bool == false)
        #expect(piped.summary["error"] as? String == nil)
        // The other writer's object is left as they put it: their bytes, and no checksum of this stream on it.
        let stored = try await Self.inventory(moto, bucket)["replaced-before-copy.bin"]
        #expect(stored?["size"] as? Int == "another writer's bytes".utf8.count)
        #expect((stored?["metadata"] as? [String: String])?["curlew-sha256"] == nil)
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }

    /// CompleteMultipartUpload answered 200, then (after S3's keep-alive space) an InternalError: retried. Or done,
    /// its reply lost, and the retry finds the upload gone (404, once S3 no longer knows it): the object, the parts'
    /// by its size and checksum, is the upload's. Both for a stream and for a file. Before, a stream failed on
    /// either, and a file on the first.
    @Test(arguments: [("complete-200-error-once", [200, 200]), ("complete-reply-lost-then-gone", [200, 404])])
    func aCompletionAnsweredWith200AndAnErrorOrLostIsRetried(fault: String, statuses: [Int]) async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket(fault)
        let name = fault + ".bin"
        func completions(of key: String) -> [Int] {
            moto.loggedRequests { method, target in method == "POST" && target.hasPrefix("/\(bucket)/\(key)?uploadId=")
            }
            .map(\.status)
        }
        let piped = try await pipeTwoParts(to: "stream/" + name, bucket: bucket, moto: moto)
        #expect(piped.summary["error"] as? String == nil)
        #expect(piped.summary["sha256Stored"] as? Bool == true)
        #expect(completions(of: "stream/" + name) == statuses)

        let tree = try SourceTree(prefix: "curlew-s3-" + fault)
        defer { tree.remove() }
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/" + name, size: 6 << 20) }
        let output = try await Self.run(moto, [tree.root, "s3://\(bucket)/file/", "--part-size", "5MiB", "--json"])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        #expect(try output.json()["uploaded"] as? Int == 1)
        #expect(completions(of: "file/" + name) == statuses)

        let stored = try await Self.inventory(moto, bucket)
        #expect(stored["stream/" + name]?["sha256"] as? String == piped.digest)
        #expect((stored["stream/" + name]?["metadata"] as? [String: String])?["curlew-sha256"] == piped.digest)
        let fileDigest = try await Self.hexSHA256(ofFile: tree.root + "/" + name)
        #expect(stored["file/" + name]?["sha256"] as? String == fileDigest)
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }

    @Test func aPipeThatTheStoreRefusesLeavesNoPartsBehind() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("pipe-refused")
        let output = try await CurlewBinary.run(
            ["upload", "-", "s3://\(bucket)/x.bin", "--part-size", "5MiB", "--endpoint", moto.endpoint],
            wrapper: ["/bin/sh", "-c", "head -c 11534336 /dev/zero | \"$0\" \"$@\""],
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent", "AWS_SECRET_ACCESS_KEY": "wrong"])
            {
                $1
            })
        #expect(output.status == 1, "\(output.stdout)\n\(output.stderr)")
        #expect(output.stdout.contains("failed") && output.stdout.contains("bad credentials"), "\(output.stdout)")
        #expect(!output.stdout.contains("wrong") && !output.stderr.contains("wrong"), "the secret is never printed")
        #expect(try await Self.openUploads(moto, bucket) == 0)

        let misuse = try await CurlewBinary.run(["upload", "-", "s3://\(bucket)/x.bin", "--journal", "/tmp/j"])
        #expect(misuse.status == 64)
        #expect(misuse.stderr.contains("--journal is for files"), "\(misuse.stderr)")
        let noKey = try await CurlewBinary.run(
            ["upload", "-", "s3://\(bucket)/", "--endpoint", moto.endpoint],
            environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 })
        #expect(noKey.status != 0 && noKey.stderr.contains("needs the object's key"), "\(noKey.stderr)")
    }

    /// `curlew sync` to S3: a same-size change is found by the checksums, a failed file withholds every deletion, and
    /// the next run deletes; boto3 reads back what the bucket holds.
    @Test func syncFindsSameSizeChangesByChecksumAndDeletesOnlyAfterEveryUploadSucceeded() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("sync")
        let tree = try SourceTree(prefix: "curlew-s3-sync")
        defer { tree.remove() }
        for name in ["a.txt", "same.txt", "grows.txt", "goes.txt"] {
            try tree.write(name, SourceTree.content(for: name, size: 1000))
        }
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/big.bin", size: 6 << 20) }
        let arguments = [tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--json"]
        func sync(_ extra: [String] = []) async throws -> CommandOutput {
            try await CurlewBinary.run(
                ["sync"] + arguments + extra + ["--endpoint", moto.endpoint, "--no-progress"],
                environment: moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 }, timeout: .seconds(120)
            )
        }
        let first = try await sync()
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        #expect(try first.json()["toSendByReason"] as? [String: Int] == ["missing": 5])

        try tree.write("same.txt", SourceTree.content(for: "changed", size: 1000))
        try tree.write("grows.txt", SourceTree.content(for: "grows", size: 1500))
        try FileManager.default.removeItem(atPath: tree.root + "/goes.txt")
        try tree.write("new.txt", SourceTree.content(for: "new", size: 10))
        try FileManager.default.createSymbolicLink(atPath: tree.root + "/broken", withDestinationPath: "/nonexistent")
        let failing = try await sync(["--delete"])
        #expect(failing.status == 1, "\(failing.stdout)\n\(failing.stderr)")
        let withheld = try failing.json()
        #expect(
            withheld["toSendByReason"] as? [String: Int] == ["checksum": 3, "size": 1, "missing": 1], "\(withheld)")
        #expect(withheld["deleted"] as? Int == 0 && withheld["deletionsWithheld"] as? Int == 1)
        let upload = try #require(withheld["upload"] as? [String: Any])
        #expect(upload["uploaded"] as? Int == 3 && upload["failed"] as? Int == 1)
        #expect(upload["alreadyThereByRule"] as? [String: Int] == ["metadata-sha256": 2])
        #expect(try await Self.inventory(moto, bucket)["goes.txt"] != nil, "nothing is deleted while a file fails")

        try FileManager.default.removeItem(atPath: tree.root + "/broken")
        let writesBefore = moto.loggedRequests { method, target in
            (method == "PUT" || method == "POST") && target.hasPrefix("/\(bucket)/")
        }.count
        let clean = try await sync(["--delete"])
        #expect(clean.status == 0, "\(clean.stdout)\n\(clean.stderr)")
        #expect(try clean.json()["deleted"] as? Int == 1)
        let writesAfter = moto.loggedRequests { method, target in
            (method == "PUT" || method == "POST") && target.hasPrefix("/\(bucket)/")
        }.count
        #expect(writesAfter == writesBefore, "every file is already there: nothing is written")
        let deletes = moto.loggedRequests { method, target in method == "DELETE" && target.hasPrefix("/\(bucket)/") }
        #expect(deletes.map(\.target) == ["/\(bucket)/goes.txt"])
        let inventory = try await Self.inventory(moto, bucket)
        #expect(Set(inventory.keys) == ["a.txt", "same.txt", "grows.txt", "new.txt", "big.bin"])
        for name in inventory.keys {
            #expect(inventory[name]?["sha256"] as? String == (try await Self.hexSHA256(ofFile: tree.root + "/" + name)))
        }
    }

    /// With a key prefix (moto's signature check refuses ListObjectsV2 prefixes that end in `/`, boto3's too, so on
    /// the unchecked server): only keys under the prefix are compared and deleted.
    @Test func syncUnderAPrefixLeavesTheRestOfTheBucketAlone() async throws {
        let moto = try await MotoServer.shared(.unchecked)
        let bucket = try await moto.makeBucket("sync-prefix")
        let tree = try SourceTree(prefix: "curlew-s3-sync-prefix")
        defer { tree.remove() }
        try tree.write("kept.txt", SourceTree.content(for: "kept", size: 100))
        let environment = moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 }
        let other = try await CurlewBinary.run(
            ["upload", tree.root, "s3://\(bucket)/elsewhere/", "--endpoint", moto.endpoint], environment: environment)
        #expect(other.status == 0, "\(other.stderr)")
        try tree.write("gone.txt", SourceTree.content(for: "gone", size: 100))
        let first = try await CurlewBinary.run(
            ["sync", tree.root, "s3://\(bucket)/backup", "--endpoint", moto.endpoint, "--json"],
            environment: environment)
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        try FileManager.default.removeItem(atPath: tree.root + "/gone.txt")
        let second = try await CurlewBinary.run(
            ["sync", tree.root, "s3://\(bucket)/backup", "--endpoint", moto.endpoint, "--delete", "--json"],
            environment: environment)
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        let summary = try second.json()
        #expect(summary["toSendByReason"] as? [String: Int] == ["checksum": 1])
        #expect(summary["deleted"] as? Int == 1)
        #expect(Set(try await Self.inventory(moto, bucket).keys) == ["backup/kept.txt", "elsewhere/kept.txt"])
    }

    @Test func dryRunSendsNoRequestAndFiltersApply() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = "dry-run-\(UUID().uuidString.prefix(8).lowercased())"
        let tree = try SourceTree(prefix: "curlew-s3-dry")
        defer { tree.remove() }
        for name in ["a.jpg", "b.txt", "logs/c.log", "logs/d.jpg", "keep/e.jpg"] {
            try tree.write(name, Array(name.utf8))
        }
        let output = try await Self.run(
            moto,
            [
                tree.root, "s3://\(bucket)/p", "--dry-run", "--include", "*.jpg", "--include", "logs/*", "--exclude",
                "keep/*",
            ])
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").filter { $0.hasPrefix("would send ") }
        #expect(lines.count == 3, "\(output.stdout)")
        #expect(lines.contains { $0.contains("s3://\(bucket)/p/a.jpg") })
        #expect(lines.contains { $0.contains("s3://\(bucket)/p/logs/c.log") })
        #expect(lines.contains { $0.contains("s3://\(bucket)/p/logs/d.jpg") })
        #expect(moto.loggedRequests { _, target in target.contains(bucket) }.isEmpty)
    }

    /// The part number of a hold proxy's `stored PUT /bucket/key?partNumber=N&uploadId=…` line.
    static func partNumber(inStoredLine line: String) -> Int? {
        guard line.hasPrefix("stored "), let range = line.range(of: "partNumber=") else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isNumber })
    }

    @Test func resumesAMultipartUploadAfterKill9WithoutResendingAcceptedParts() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("resume")
        let tree = try SourceTree(prefix: "curlew-s3-resume")
        defer { tree.remove() }
        let size =
            Int(ProcessInfo.processInfo.environment["CURLEW_RESUME_TEST_MIB"] ?? "").map { $0 << 20 } ?? (60 << 20)
        let kills = Int(ProcessInfo.processInfo.environment["CURLEW_RESUME_TEST_KILLS"] ?? "") ?? 3
        try await offCooperativePool { try Self.writeRandomFile(tree.root + "/large.bin", size: size) }
        let partCount = (size + (5 << 20) - 1) / (5 << 20)
        let journal = tree.root + ".journal"
        defer { try? FileManager.default.removeItem(atPath: journal) }
        let arguments = [
            tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--concurrency", "2", "--journal", journal,
            "--no-progress",
        ]
        let environment = moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 }

        // One proxy for every round: the journal is bound to the address the upload goes to, so each resumed run
        // (and the last) goes through the same one. A round holds every later part the run sends, stored but never
        // answered, so the run cannot end before the kill however late this test is scheduled (a time-paced run did,
        // on a loaded CI machine): with two connections both stop at a held part. The parts it stored are the
        // resumed run's to find, not resend.
        func laterParts(after target: Int) -> String {
            let later = ((target + 1)...max(target + 1, partCount)).map(String.init).joined(separator: "|")
            return "^PUT /\(bucket)/large\\.bin\\?partNumber=(\(later))&"
        }
        let firstTarget = max(1, partCount / (kills + 1))
        let proxy = try await HoldingProxy.start(
            upstreamPort: moto.port, hold: laterParts(after: firstTarget), holdingEveryMatch: true)
        defer { proxy.stop() }
        var killedAt: [Int] = []
        for round in 1...kills {
            // Kill once the store holds the parts up to this one: spread over the upload.
            let target = max(1, partCount * round / (kills + 1))
            try proxy.hold(laterParts(after: target))
            // A part after this round's target, held in this round: the previous round's second connection may
            // write its `stored` line after that round's kill, but its part is at or before this round's target.
            let heldBefore = Set(proxy.markers())
            func heldThisRound() -> Bool {
                proxy.markers().contains { line in
                    guard !heldBefore.contains(line), let part = Self.partNumber(inStoredLine: line) else {
                        return false
                    }
                    return part > target
                }
            }
            let running = try CurlewBinary.start(
                ["upload"] + arguments + ["--endpoint", proxy.baseURL], environment: environment)
            defer { running.signal(SIGKILL) }
            try await waitUntil(timeout: .seconds(120), "the proxy to hold a part after part \(target)") {
                heldThisRound() || !running.isRunning
            }
            running.signal(SIGKILL)
            let result = try await running.finish()
            if result.status == 0 { break }
            #expect(result.status == 128 + SIGKILL, "\(result.stdout)\n\(result.stderr)")
            killedAt.append(target)
        }
        try proxy.stopHolding()
        let last = try await CurlewBinary.run(
            ["upload"] + arguments + ["--endpoint", proxy.baseURL, "--json"], environment: environment,
            timeout: .seconds(120))
        #expect(last.status == 0, "\(last.stdout)\n\(last.stderr)")
        #expect(killedAt.count == kills, "the upload finished before every kill: \(killedAt)")

        let stored = try await Self.inventory(moto, bucket)
        #expect(
            stored["large.bin"]?["sha256"] as? String == (try await Self.hexSHA256(ofFile: tree.root + "/large.bin")))
        let accepted = Self.acceptedParts(moto, bucket: bucket)
        #expect(accepted.keys.sorted() == Array(1...partCount))
        // Known gap (issue 26), not closable client-side: now and then the killed client had sent a part whole and
        // moto was still writing it when the resumed run's ListParts came, so the part is not listed and is sent
        // again ([4: 2] seen on libcurl 8.14). No wait bounds how long a store may take, and S3 keeps the last write
        // of a part number, so the object is right and only bytes are sent twice. A part the store had written
        // before the kill is kept (UploadS3CrashResumeTests, uploadPart); every other expectation here still fails.
        withKnownIssue("a part in flight at kill -9 is sometimes sent again on resume (issue 26)", isIntermittent: true)
        {
            #expect(
                accepted.values.allSatisfy { $0 == 1 }, "parts sent more than once: \(accepted.filter { $0.value > 1 })"
            )
        }
        #expect(try await Self.openUploads(moto, bucket) == 0)
    }
}

@Suite struct UploadBandwidthLimitTests {
    /// The embedded server takes bytes as fast as loopback allows, so the limit alone sets the pace.
    @Test func bwlimitHoldsTheRunsRateWithinTenPercent() async throws {
        let tree = try SourceTree(prefix: "curlew-bwlimit")
        defer { tree.remove() }
        // 24 files of 1 MB and one of 6 MB: 30 MB at 6 MB/s should take 5 s (start-up is ~0.2 s of that).
        try await offCooperativePool {
            for index in 0..<24 {
                try UploadS3UploaderTests.writeRandomFile(tree.root + "/small\(index).bin", size: 1_000_000)
            }
            try UploadS3UploaderTests.writeRandomFile(tree.root + "/large.bin", size: 6_000_000)
        }
        let started = ContinuousClock.now
        let output = try await CurlewBinary.run([
            "upload", tree.root, "--bwlimit", "6MB", "--concurrency", "4", "--json", "--no-progress",
        ])
        let elapsed = (ContinuousClock.now - started)
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        let bytes = json["bytes"] as? Int ?? 0
        #expect(bytes == 30_000_000)
        // The ceiling measured outside the command, start-up included, which can only make the rate look lower:
        // the run must not exceed the limit.
        let rate = Double(bytes) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        #expect(rate <= 6_000_000 * 1.1, "measured \(rate) B/s")
        // The floor over the run's own time: a process started on a busy machine (CI runs suites side by side) can
        // take long enough to start to pull the rate measured outside below it, the upload itself not slowed.
        let seconds = json["durationSeconds"] as? Double ?? .infinity
        let ownRate = Double(bytes) / seconds
        #expect(ownRate >= 6_000_000 * 0.9 && ownRate <= 6_000_000 * 1.1, "the run's own \(ownRate) B/s")
    }
}

/// Refusals moto cannot produce (it checks neither the clock nor the region), from a scripted S3 endpoint that
/// answers every request as S3 does in those cases.
@Suite struct UploadS3RunProblemTests {
    static func refuse(status: Int, code: String, extra: String = "") -> @Sendable (ScriptedRequest) -> ScriptedResponse
    {
        { _ in
            ScriptedResponse(
                status: status, headers: [("Content-Type", "application/xml")],
                body: Array(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>\(code)</Code><Message>refused</Message>\(extra)</Error>"
                        .utf8))
        }
    }

    @Test(arguments: [
        (403, "RequestTimeTooSkewed", "", "clock skew"),
        (
            400, "AuthorizationHeaderMalformed", "<Region>eu-central-1</Region>",
            "wrong region: the bucket is in eu-central-1; use --region eu-central-1"
        ),
        (403, "InvalidAccessKeyId", "", "bad credentials"),
    ])
    func aRunWideRefusalStopsTheRunAndIsNamedOnce(status: Int, code: String, extra: String, named: String) async throws
    {
        try await withScriptedServer(Self.refuse(status: status, code: code, extra: extra)) { server in
            let tree = try SourceTree(prefix: "curlew-s3-refused")
            defer { tree.remove() }
            for index in 0..<30 { try tree.write("f\(index).txt", Array("file \(index)".utf8)) }
            let output = try await CurlewBinary.run(
                [
                    "upload", tree.root, "s3://refused-bucket/", "--endpoint", server.baseURL, "--concurrency", "4",
                    "--json", "--no-progress",
                ],
                environment: [
                    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example-secret",
                    "HOME": "/nonexistent",
                ])
            #expect(output.status == 1)
            #expect(output.stderr.components(separatedBy: named).count - 1 == 1, "\(output.stderr)")
            let json = try output.json()
            #expect((json["error"] as? String)?.hasPrefix(named) == true)
            #expect(json["uploaded"] as? Int == 0)
            // Only the requests already in flight when the first refusal came in were sent.
            #expect(server.requestCount <= 4, "\(server.requestCount) requests")
        }
    }
}

extension UploadS3RunProblemTests {
    /// `--skip-existing` begins with a HEAD, and S3 answers a HEAD signed for another region with 400, no body, and
    /// the bucket's region in `x-amz-bucket-region`: the run stops and names the region once. Before, every file
    /// failed with a bare HTTP 400.
    @Test func aHeadToTheWrongRegionNamesTheBucketsRegion() async throws {
        let wrongRegion: @Sendable (ScriptedRequest) -> ScriptedResponse = { _ in
            ScriptedResponse(status: 400, headers: [("x-amz-bucket-region", "eu-west-3")], body: [])
        }
        try await withScriptedServer(wrongRegion) { server in
            let tree = try SourceTree(prefix: "curlew-s3-head-region")
            defer { tree.remove() }
            for index in 0..<30 { try tree.write("f\(index).txt", Array("file \(index)".utf8)) }
            let output = try await CurlewBinary.run(
                [
                    "upload", tree.root, "s3://regional-bucket/", "--endpoint", server.baseURL, "--skip-existing",
                    "--concurrency", "4", "--json", "--no-progress",
                ],
                environment: [
                    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example-secret",
                    "HOME": "/nonexistent",
                ])
            #expect(output.status == 1)
            let named = "wrong region: the bucket is in eu-west-3; use --region eu-west-3"
            #expect(output.stderr.components(separatedBy: named).count - 1 == 1, "\(output.stderr)")
            #expect(try output.json()["uploaded"] as? Int == 0)
            #expect(server.requestCount <= 4, "\(server.requestCount) requests")
        }
    }
}

@Suite struct UploadS3UsageTests {
    @Test(arguments: [
        (["http://127.0.0.1:9/", "--endpoint", "http://127.0.0.1:9"], "--endpoint needs an s3://BUCKET/PREFIX target"),
        (["s3://bucket-one/x", "-H", "X-Trace: 1"], "-H is for http(s) targets"),
        (["s3://bucket-one/x", "--part-size", "1MiB"], "--part-size must be between 5MiB and 5GiB"),
        (["s3://Bad_Bucket/x"], "is not a valid bucket name"),
        (["s3://bucket-one/x", "--metadata", "no-equals"], "is not key=value"),
        (["s3://bucket-one/x", "--mode", "multipart"], "s3:// targets take neither"),
    ])
    func misuseIsAUsageErrorBeforeAnythingIsSent(arguments: [String], message: String) async throws {
        let tree = try SourceTree(prefix: "curlew-s3-usage")
        defer { tree.remove() }
        let output = try await CurlewBinary.run(
            ["upload", tree.root] + arguments, environment: ["HOME": "/nonexistent"])
        #expect(output.status == 64)
        #expect(output.stderr.contains(message), "\(output.stderr)")
    }

    @Test func missingCredentialsAreNamedWithoutASingleRequest() async throws {
        let tree = try SourceTree(prefix: "curlew-s3-nocreds")
        defer { tree.remove() }
        try tree.write("a.txt", [1])
        let output = try await CurlewBinary.run(
            ["upload", tree.root, "s3://bucket-one/", "--endpoint", "http://127.0.0.1:9"],
            environment: [
                "HOME": "/nonexistent", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "",
            ])
        #expect(output.status == 1)
        #expect(output.stderr.contains("no AWS credentials"), "\(output.stderr)")
    }
}
