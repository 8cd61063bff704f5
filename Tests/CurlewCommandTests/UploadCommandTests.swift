import Crypto
import CurlewLoopbackServer
import CurlewSharding
import CurlewTestSupport
import Foundation
import Testing

@testable import curlew

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite struct UploadCommandTests {
    static let awkwardNames = [
        "plain.txt",
        "with space.txt",
        "hash#tag.txt",
        "percent%41sign.txt",
        "question?mark.txt",
        "quotes \"double\" and 'single'.txt",
        "ünïcødé/日本語 ファイル.txt",
        "deep/er/still/plus+and&amp;=.txt",
        "empty.bin",
        "deep/empty too",
    ]

    /// Every part of one file goes out from its worker's event loop, and each loop gets an equal share of the
    /// per-host connection limit: each share must hold every request in flight, or some parts would wait in libcurl's
    /// queue (and fail as `timeout.waitingForConnection` on a slow link) while another loop's share stood idle.
    @Test(arguments: [1, 4, 8, 100])
    func eachLoopMayOpenAConnectionForEveryRequestInFlight(concurrency: Int) {
        let configuration = UploadCommand.clientConfiguration(concurrency: concurrency)
        #expect(configuration.maxConnectionsPerHostPerLoop == concurrency)
    }

    @Test func putsAwkwardNamesAndEmptyFilesToWebDAVIntact() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree()
        defer {
            tree.remove()
            target.remove()
        }
        for name in Self.awkwardNames {
            try tree.write(name, name.contains("empty") ? [] : SourceTree.content(for: name, size: 3000))
        }

        let output = try await CurlewBinary.run(["upload", tree.root, target.url, "--concurrency", "4", "--json"])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["uploaded"] as? Int == Self.awkwardNames.count)
        #expect(json["failed"] as? Int == 0)
        #expect(json["files"] as? Int == Self.awkwardNames.count)

        for name in Self.awkwardNames {
            let stored = target.storedPath(name)
            #expect(FileManager.default.fileExists(atPath: stored), "\(name) is not on the server")
            #expect(
                try FileDigest.sha256(ofFile: stored) == FileDigest.sha256(ofFile: tree.root + "/" + name),
                "\(name) differs")
        }
        try await waitUntil(timeout: .seconds(10), "nginx to log every PUT") {
            try target.acceptedPuts().values.reduce(0, +) >= Self.awkwardNames.count
        }
        let puts = try target.acceptedPuts()
        #expect(Set(puts.keys) == Set(Self.awkwardNames))
        #expect(puts.values.allSatisfy { $0 == 1 })
    }

    @Test func uploadsA300MiBFileByteForByte() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-large")
        defer {
            tree.remove()
            target.remove()
        }
        // A 1 MiB block whose first bytes carry its index: cheap to write, and a lost, repeated or reordered block
        // changes the digest.
        let blockSize = 1 << 20
        let blocks = 300
        let path = tree.root + "/large.bin"
        // 300 MiB written and hashed off the cooperative pool, which the rest of the suite needs meanwhile.
        let sourceDigest = try await offCooperativePool {
            guard FileManager.default.createFile(atPath: path, contents: nil),
                let handle = FileHandle(forWritingAtPath: path)
            else { throw TestSupportError("cannot create \(path)") }
            var block = [UInt8](SourceTree.content(for: "large", size: blockSize))
            var hasher = SHA256()
            for index in 0..<blocks {
                withUnsafeBytes(of: UInt64(index).littleEndian) { block.replaceSubrange(0..<8, with: $0) }
                try handle.write(contentsOf: block)
                hasher.update(data: block)
            }
            try handle.close()
            return Array(hasher.finalize())
        }

        // GNU time, where installed, reports the command's peak resident memory.
        let hasTime = FileManager.default.isExecutableFile(atPath: "/usr/bin/time")
        let output = try await CurlewBinary.run(
            ["upload", tree.root, target.url, "--json"],
            wrapper: hasTime ? ["/usr/bin/time", "-f", "peak-rss-kb=%M"] : [],
            timeout: .seconds(180))
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["bytes"] as? Int == blockSize * blocks)
        if hasTime {
            let peak = output.stderr.split(separator: "\n").first { $0.hasPrefix("peak-rss-kb=") }.flatMap {
                Int($0.dropFirst(12))
            }
            // Streamed: the peak stays far below the file's 300 MiB.
            #expect(try #require(peak) < 100 * 1024, "peak RSS \(peak ?? -1) KiB")
        }
        let stored = target.storedPath("large.bin")
        let attributes = try FileManager.default.attributesOfItem(atPath: stored)
        #expect((attributes[.size] as? NSNumber)?.intValue == blockSize * blocks)
        #expect(try await offCooperativePool { Array(try FileDigest.sha256(ofFile: stored)) } == sourceDigest)
    }

    @Test func resumesAfterKillWithoutResendingCompletedFiles() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-resume")
        let journal = tree.root + ".journal"
        // The last file in the run's order ("batch 06/file #195.dat") is stored and its reply held, so the run is
        // still going at the kill however late this test is scheduled (a run paced to last 10 s was not, on a
        // loaded CI machine), and the files before it are journaled by then.
        let proxy = try await HoldingProxy.start(upstreamPort: nginx.httpPort, hold: "^PUT .*195\\.dat$")
        defer {
            proxy.stop()
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let names = (0..<200).map { String(format: "batch %02d/file #%03d.dat", $0 % 7, $0) }
        for name in names { try tree.write(name, SourceTree.content(for: name, size: 4096)) }

        let proxied = target.url.replacingOccurrences(of: nginx.httpBaseURL, with: proxy.baseURL)
        let first = try CurlewBinary.start([
            "upload", tree.root, proxied, "--journal", journal, "--concurrency", "4", "--no-progress",
        ])
        defer { first.signal(SIGKILL) }
        try await waitUntil(timeout: .seconds(30), "the proxy to hold the last file's write") {
            proxy.markers().contains { $0.hasPrefix("stored ") } || !first.isRunning
        }
        #expect(first.isRunning)
        first.signal(SIGKILL)
        let killed = try await first.finish()
        #expect(killed.status == 128 + SIGKILL)

        let completedBeforeKill = try journaledPaths(journal)
        #expect(completedBeforeKill.count >= 30 && completedBeforeKill.count < names.count)
        // What a write cut short by a crash would leave: a line without its newline.
        let torn = try #require(FileHandle(forWritingAtPath: journal))
        try torn.seekToEnd()
        try torn.write(contentsOf: Data("done\t4096\t17".utf8))
        try torn.close()

        // Resumed through the same proxy: a journal belongs to one host and port. The proxy holds only the first
        // matching write; later ones pass.
        let second = try await CurlewBinary.run([
            "upload", tree.root, proxied, "--journal", journal, "--concurrency", "4", "--json",
        ])
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        let json = try second.json()
        #expect(json["skipped"] as? Int == completedBeforeKill.count)
        // Files in flight at the kill that the server holds whole are found with HEAD, not sent again.
        let uploaded = try #require(json["uploaded"] as? Int), alreadyThere = try #require(json["alreadyThere"] as? Int)
        #expect(uploaded + alreadyThere == names.count - completedBeforeKill.count)

        for name in names {
            let stored = target.storedPath(name)
            #expect(
                FileManager.default.contents(atPath: stored).map(Array.init)
                    == SourceTree.content(for: name, size: 4096), "\(name)")
        }
        try await waitUntil(timeout: .seconds(10), "nginx to log a PUT of every file") {
            try target.acceptedPuts().count == names.count
        }
        let puts = try target.acceptedPuts()
        for name in completedBeforeKill {
            #expect(puts[name] == 1, "\(name) was journaled before the kill but sent \(puts[name] ?? 0) times")
        }
        // Not even the transfers in flight at the kill reached the server twice.
        #expect(puts.values.allSatisfy { $0 == 1 }, "\(puts.filter { $0.value != 1 })")
        #expect(try Set(journaledPaths(journal)) == Set(names))
    }

    /// A file the journal says was in flight when a run died is looked up with HEAD first: the server that holds
    /// it whole does not get it again; one that does not hold it (or holds another length) does.
    @Test func filesInFlightAtACrashAreCheckedWithHeadBeforeTheyAreSentAgain() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-in-flight")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        var lines = "# curlew upload journal v1\n"
        for name in ["stored whole.bin", "never arrived.bin", "stored cut short.bin"] {
            let path = try tree.write(name, SourceTree.content(for: name, size: 5000))
            var status = stat()
            stat(path, &status)
            let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
            lines += "sending\t5000\t\(modified)\t\(name.replacingOccurrences(of: " ", with: "%20"))\n"
        }
        try lines.write(toFile: journal, atomically: true, encoding: .utf8)
        // What the crashed run got to the server, written past curlew.
        for (name, size) in [("stored whole.bin", 5000), ("stored cut short.bin", 4000)] {
            let stored = target.storedPath(name)
            try FileManager.default.createDirectory(
                atPath: (stored as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(SourceTree.content(for: name, size: 5000).prefix(size)).write(to: URL(fileURLWithPath: stored))
        }

        let output = try await CurlewBinary.run(["upload", tree.root, target.url, "--journal", journal, "--json"])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["alreadyThere"] as? Int == 1)
        #expect(json["alreadyThereByRule"] as? [String: Int] == ["in-flight-size": 1])
        #expect(json["uploaded"] as? Int == 2)
        try await waitUntil(timeout: .seconds(10), "nginx to log the two PUTs") { try target.acceptedPuts().count >= 2 }
        #expect(try target.acceptedPuts() == ["never arrived.bin": 1, "stored cut short.bin": 1])
        #expect(FileManager.default.contents(atPath: target.storedPath("stored cut short.bin"))?.count == 5000)
        #expect(try Set(journaledPaths(journal)) == ["stored whole.bin", "never arrived.bin", "stored cut short.bin"])
    }

    /// A journal belongs to one destination: reused for another path, or the same path on another host (staging,
    /// then production), its `done` lines would leave out every file that destination never got, and the run would
    /// report success. It is refused; the same place without the password is accepted, and the journal holds no
    /// password.
    @Test func aJournalIsRefusedForAnotherDestination() async throws {
        let nginx = try await NginxServer.shared()
        let first = DavTarget(nginx: nginx)
        let second = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-journal-target")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            first.remove()
            second.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("a.txt", Array("a".utf8))
        let withPassword = first.url.replacingOccurrences(of: "http://", with: "http://user:hunter2@")
        let sent = try await CurlewBinary.run(["upload", tree.root, withPassword, "--journal", journal, "--json"])
        #expect(sent.status == 0, "\(sent.stdout)\n\(sent.stderr)")
        let text = try String(contentsOfFile: journal, encoding: .utf8)
        #expect(!text.contains("hunter2"), "\(text)")
        #expect(text.contains("target\t"), "\(text)")

        let again = try await CurlewBinary.run(["upload", tree.root, first.url, "--journal", journal, "--json"])
        #expect(again.status == 0, "the same place without a password: \(again.stderr)")
        #expect(try again.json()["skipped"] as? Int == 1)

        let byName = first.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let anotherHost = try await CurlewBinary.run(["upload", tree.root, byName, "--journal", journal, "--json"])
        #expect(anotherHost.status != 0)
        #expect(anotherHost.stderr.contains("records uploads to \(first.url), not \(byName)"), "\(anotherHost.stderr)")
        try await waitUntil(timeout: .seconds(10), "nginx to log the first run's PUT") {
            !first.loggedRequests(method: "PUT").isEmpty
        }
        #expect(first.loggedRequests(method: "PUT").count == 1, "only the first run sent a.txt")

        let elsewhere = try await CurlewBinary.run(["upload", tree.root, second.url, "--journal", journal, "--json"])
        #expect(elsewhere.status != 0)
        #expect(elsewhere.stderr.contains("records uploads to"), "\(elsewhere.stderr)")
        #expect(second.loggedRequests(method: "PUT").isEmpty)

        // The folder with a query is another destination: before the query followed each file's path, files went to
        // `…/?token=…/a.txt`, and a journal of that time must not pass for one of the folder. Its value stays out.
        let withQuery = try await CurlewBinary.run([
            "upload", tree.root, first.url + "?token=k3y-q", "--journal", journal, "--json",
        ])
        #expect(withQuery.status != 0)
        #expect(withQuery.stderr.contains("records uploads to"), "\(withQuery.stderr)")
        #expect(!withQuery.stderr.contains("k3y-q"), "\(withQuery.stderr)")
    }

    /// `--dry-run` with another destination's journal listed that destination's files as already sent, while the
    /// real run was refused. It is refused the same way (same message, same exit status) and writes nothing.
    @Test func aDryRunIsRefusedAJournalOfAnotherDestinationAsTheRunIs() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-dry-journal")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("a.txt", Array("a".utf8))
        let staging =
            "# curlew upload journal v1\ntarget\thttps%3A%2F%2Fstaging.invalid%3A443%2Ffiles%2F\ndone\t1\t2\ta.txt\n"
        try Data(staging.utf8).write(to: URL(fileURLWithPath: journal))
        let production = "https://prod.invalid/files/"

        let dryRun = try await CurlewBinary.run(["upload", tree.root, production, "--journal", journal, "--dry-run"])
        let run = try await CurlewBinary.run(["upload", tree.root, production, "--journal", journal])
        #expect(run.status != 0 && dryRun.status == run.status, "\(dryRun.stdout)\n\(dryRun.stderr)")
        #expect(run.stderr.contains("records uploads to https://staging.invalid:443/files/"), "\(run.stderr)")
        #expect(dryRun.stderr == run.stderr)
        #expect(try String(contentsOfFile: journal, encoding: .utf8) == staging)
    }

    /// A file rewritten in place at the same length after a run stored it, then killed while sending it again: the
    /// server's copy is the earlier version (stored before the file last changed), so the file is sent again rather
    /// than counted as held by its length alone.
    @Test func aFileInFlightIsSentAgainWhenTheServersCopyIsOlderThanTheFile() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-in-flight-older")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let name = "report.bin"
        let current = Array(repeating: UInt8(ascii: "2"), count: 5000)
        let path = try tree.write(name, current)
        var status = stat()
        stat(path, &status)
        let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        try "# curlew upload journal v1\nsending\t5000\t\(modified)\t\(name)\n".write(
            toFile: journal, atomically: true, encoding: .utf8)
        // The copy an earlier run stored an hour before the file was rewritten, at the same length.
        let stored = target.storedPath(name)
        try FileManager.default.createDirectory(
            atPath: (stored as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(repeating: UInt8(ascii: "1"), count: 5000).write(to: URL(fileURLWithPath: stored))
        var times = [
            timeval(tv_sec: status.st_mtim.tv_sec - 3600, tv_usec: 0),
            timeval(tv_sec: status.st_mtim.tv_sec - 3600, tv_usec: 0),
        ]
        #expect(utimes(stored, &times) == 0)

        let output = try await CurlewBinary.run(["upload", tree.root, target.url, "--journal", journal, "--json"])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["uploaded"] as? Int == 1, "\(json)")
        #expect(json["alreadyThere"] as? Int == 0)
        try await waitUntil(timeout: .seconds(10), "nginx to log the PUT") { try target.acceptedPuts().count >= 1 }
        #expect(try target.acceptedPuts() == [name: 1])
        #expect(FileManager.default.contents(atPath: stored) == Data(current))
    }

    /// With `--gzip` the server holds the compressed bytes: a file in flight at a crash is matched by its compressed
    /// length (the file compressed again), so a run killed after the server stored every file sends none again.
    @Test func gzipFilesInFlightAtACrashAreMatchedByTheirCompressedLength() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-gzip-in-flight")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let names = (0..<12).map { "text \($0).json" }
        for name in names {
            try tree.write(name, Array(String(repeating: "{\"name\": \"\(name)\"}\n", count: 400 + name.count).utf8))
        }
        let first = try await CurlewBinary.run([
            "upload", tree.root, target.url, "--gzip", "--journal", journal, "--json",
        ])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        // What a run killed after the server stored each file, before its `done` line, leaves behind.
        let killed = try String(contentsOfFile: journal, encoding: .utf8).replacingOccurrences(
            of: "done\t", with: "sending\t")
        try killed.write(toFile: journal, atomically: true, encoding: .utf8)

        let resumed = try await CurlewBinary.run([
            "upload", tree.root, target.url, "--gzip", "--journal", journal, "--json",
        ])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        let json = try resumed.json()
        #expect(json["uploaded"] as? Int == 0)
        #expect(json["alreadyThereByRule"] as? [String: Int] == ["in-flight-size": names.count])
        try await waitUntil(timeout: .seconds(10), "nginx to log the first run's PUTs") {
            try target.acceptedPuts().count >= names.count
        }
        #expect(try target.acceptedPuts() == Dictionary(uniqueKeysWithValues: names.map { ($0, 1) }))
        // The stored bytes are the gzip stream, smaller than the file: the match was on the compressed length.
        let stored = try #require(FileManager.default.contents(atPath: target.storedPath(names[0])))
        #expect(stored.prefix(2) == Data([0x1f, 0x8b]) && stored.count < 1000)
    }

    @Test func interruptStopsStartingFilesAndLeavesAConsistentJournal() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-interrupt")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let names = (0..<100).map { "file-\($0).txt" }
        for name in names { try tree.write(name, SourceTree.content(for: name, size: 512)) }

        // 5 files/s: 20 s for all, so Ctrl-C after 3 comes well before the end even when a loaded machine leaves
        // this test process unscheduled for seconds (at 25 files/s, CI once saw the run end first).
        let first = try CurlewBinary.start([
            "upload", tree.root, "--journal", journal, "--rate", "5", "--concurrency", "2", "--json", "--no-progress",
        ])
        try await waitUntil(timeout: .seconds(30), "the journal to record 3 files") {
            ((try? journaledPaths(journal).count) ?? 0) >= 3
        }
        first.signal(SIGINT)
        let interrupted = try await first.finish()
        #expect(interrupted.status == 130, "\(interrupted.stderr)")
        let json = try interrupted.json()
        #expect(json["interrupted"] as? Bool == true)
        #expect(try #require(json["notStarted"] as? Int) > 0)
        let recorded = try journaledPaths(journal)
        #expect(recorded.count == json["uploaded"] as? Int)
        #expect(try String(contentsOfFile: journal, encoding: .utf8).hasSuffix("\n"))

        let second = try await CurlewBinary.run(["upload", tree.root, "--journal", journal, "--json"])
        #expect(second.status == 0)
        let resumed = try second.json()
        #expect(resumed["skipped"] as? Int == recorded.count)
        #expect(resumed["uploaded"] as? Int == names.count - recorded.count)
    }

    @Test func unreadableFilesFailButTheRunGoesOn() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-unreadable")
        defer { tree.remove() }
        for name in ["a.txt", "b.txt", "c/d.txt"] { try tree.write(name, SourceTree.content(for: name, size: 100)) }
        let locked = try tree.write("locked.txt", SourceTree.content(for: "locked", size: 100))
        chmod(locked, 0)
        try FileManager.default.createSymbolicLink(
            atPath: tree.root + "/dangling", withDestinationPath: tree.root + "/nowhere")
        // root reads any file, so as root the command runs as nobody to meet a permission it lacks.
        let wrapper =
            geteuid() == 0 ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"] : []

        let output = try await CurlewBinary.run(["upload", tree.root, "--json"], wrapper: wrapper)
        #expect(output.status == 1, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["uploaded"] as? Int == 3)
        #expect(json["failed"] as? Int == 2)
        let failures = try #require(json["failures"] as? [[String: String]])
        #expect(failures.map { $0["path"] } == ["dangling", "locked.txt"])
        #expect(failures.last?["error"]?.contains("requestBodyFailed") == true, "\(failures)")

        let text = try await CurlewBinary.run(["upload", tree.root, "--no-progress"], wrapper: wrapper)
        #expect(text.status == 1)
        #expect(text.stdout.contains("failed files:"))
        #expect(text.stdout.contains("locked.txt"))
    }

    @Test func manifestListsFilesAndReportsMissingOnes() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-manifest")
        defer { tree.remove() }
        try tree.write("one.txt", Array("one".utf8))
        try tree.write("sub/two.txt", Array("two!".utf8))
        let manifest = try tree.write("list.txt", Array("one.txt\n\nsub/two.txt\nmissing.txt\n".utf8))

        let output = try await CurlewBinary.run(["upload", manifest, "--json"])
        #expect(output.status == 1)
        let json = try output.json()
        #expect(json["uploaded"] as? Int == 2)
        #expect(json["bytes"] as? Int == 7)
        #expect((json["failures"] as? [[String: String]])?.map { $0["path"] } == ["missing.txt"])
        #expect((json["embeddedServer"] as? [String: Int])?["bytes"] == 7)
    }

    /// Manifest lines name files on the server by their path: `..` resolves against the segment before it, the same
    /// file listed twice goes once, and another file that would take a name already given is reported, not sent in
    /// its place or dropped unsaid.
    @Test func manifestNamesThatCollideAreReportedAndDotDotResolves() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-manifest-names")
        defer {
            tree.remove()
            target.remove()
        }
        try tree.write("list/up/f.txt", Array("inside".utf8))
        try tree.write("up/f.txt", Array("outside, another file".utf8))
        try tree.write("list/g.txt", Array("gee".utf8))
        try FileManager.default.createDirectory(atPath: tree.root + "/list/a", withIntermediateDirectories: true)
        let manifest = try tree.write(
            "list/manifest.txt", Array("up/f.txt\n../up/f.txt\nup/./f.txt\na/../g.txt\n".utf8))

        let output = try await CurlewBinary.run(["upload", manifest, target.url, "--json"])
        #expect(output.status == 1, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["uploaded"] as? Int == 2, "\(json)")
        let failures = try #require(json["failures"] as? [[String: String]])
        #expect(failures.map { $0["path"] } == ["up/f.txt"])
        #expect(failures.first?["error"]?.contains("../up/f.txt") == true, "\(failures)")
        try await waitUntil(timeout: .seconds(10), "nginx to log 2 PUTs") { try target.acceptedPuts().count >= 2 }
        #expect(try target.acceptedPuts() == ["up/f.txt": 1, "g.txt": 1])
        #expect(FileManager.default.contents(atPath: target.storedPath("up/f.txt")) == Data("inside".utf8))
    }

    @Test func progressIsPlainLinesWhenNotOnATerminal() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-progress")
        defer { tree.remove() }
        for index in 0..<30 { try tree.write("f\(index)", [UInt8](repeating: 1, count: 1000)) }
        let output = try await CurlewBinary.run(["upload", tree.root, "--rate", "50", "--progress-interval", "100ms"])
        #expect(output.status == 0)
        let lines = output.stderr.split(separator: "\n").filter { $0.hasPrefix("progress: ") }
        #expect(lines.count >= 3, "\(output.stderr)")
        #expect(lines.allSatisfy { $0.contains("files") && $0.contains("MB/s") && $0.contains("ETA") })
        #expect(!output.stderr.contains("\r") && !output.stderr.contains("\u{1B}"))
        #expect(output.stdout.contains("30: 30 uploaded"))
    }

    @Test(arguments: [
        (["upload"], "<source>"),
        (["upload", "/nonexistent/source/dir", "http://127.0.0.1:1/"], "/nonexistent/source/dir"),
        (["upload", "/tmp", "--concurrency", "0"], "--concurrency"),
        (["upload", "/tmp", "--mode", "carrier-pigeon"], "carrier-pigeon"),
        (["upload", "/tmp", "--field", "a=b"], "--mode multipart"),
        (["upload", "/tmp", "--retries", "99"], "--retries"),
        (["upload", "/tmp", "ftp://127.0.0.1/x/"], "ftp://"),
        (["upload", "/tmp", "-H", "broken"], "Name: value"),
        (["upload", "/tmp", "-c", "9223372036854775807"], "--concurrency"),
        (["upload", "/tmp", "--rate", "1e-12"], "--rate"),
    ])
    func badArgumentsExplainThemselves(arguments: [String], mention: String) async throws {
        let output = try await CurlewBinary.run(arguments)
        // ArgumentParser's usage-error status (EX_USAGE).
        #expect(output.status == 64)
        #expect(output.stderr.contains(mention), "stderr: \(output.stderr)")
    }
}

@Suite struct UploadBodyModeTests {
    @Test func multipartSendsTheFileAndItsPathAndFields() async throws {
        let server = try await RecordingServer.start()
        let tree = try SourceTree(prefix: "curlew-upload-multipart")
        defer { tree.remove() }
        let names = ["a.txt", "dir/b c.bin", "dir/é\"q\".txt", "empty"]
        for name in names { try tree.write(name, name == "empty" ? [] : SourceTree.content(for: name, size: 700)) }

        let output = try await CurlewBinary.run([
            "upload", tree.root, server.baseURL + "/forms", "--mode", "multipart", "--field", "album=holiday",
            "--field", "owner=ada=lovelace", "--json",
        ])
        try await server.shutdown()
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        #expect(try output.json()["uploaded"] as? Int == names.count)

        let requests = server.requests
        #expect(requests.count == names.count)
        var seen: Set<String> = []
        for request in requests {
            #expect(request.method == "POST")
            #expect(request.uri == "/forms")
            let contentType = try #require(request.header("content-type"))
            #expect(contentType.hasPrefix("multipart/form-data"))
            let parts = try #require(MultipartParts.parse(body: request.body, contentType: contentType))
            #expect(parts.map { $0.disposition("name") } == ["path", "album", "owner", "file"])
            let path = String(decoding: parts[0].content, as: UTF8.self)
            seen.insert(path)
            #expect(parts[1].content.elementsEqual("holiday".utf8))
            #expect(parts[2].content.elementsEqual("ada=lovelace".utf8))
            #expect(parts[3].content == SourceTree.content(for: path, size: path == "empty" ? 0 : 700), "\(path)")
            #expect(parts[3].disposition("filename") != nil)
        }
        #expect(seen == Set(names))
    }

    @Test func gzipCompressesEachFileOnTheWay() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-gzip")
        defer {
            tree.remove()
            target.remove()
        }
        // Compressible: a repeated line.
        let text = Array(String(repeating: "curlew compresses this line on the fly\n", count: 2000).utf8)
        try tree.write("logs/app.log", text)

        let output = try await CurlewBinary.run(["upload", tree.root, target.url, "--gzip", "--json"])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let stored = try #require(FileManager.default.contents(atPath: target.storedPath("logs/app.log")))
        #expect(stored.starts(with: [0x1f, 0x8b]))
        #expect(stored.count < text.count / 10)
        // gzip(1) is the independent decoder.
        let decoded = target.storedPath("logs/app.log.decoded")
        let gunzip = try await CurlewBinary.runProgram([
            "/bin/sh", "-c", "gzip -dc < \"$0\" > \"$1\"", target.storedPath("logs/app.log"), decoded,
        ])
        #expect(gunzip.status == 0, "\(gunzip.stderr)")
        #expect(FileManager.default.contents(atPath: decoded).map(Array.init) == text)
    }

    @Test func retriesOnlyWhatIsSafeToRetry() async throws {
        let server = try await RecordingServer.start()
        let tree = try SourceTree(prefix: "curlew-upload-retry")
        defer { tree.remove() }
        try tree.write("one.txt", Array("one".utf8))

        // Two 503s, then success: two retries.
        server.answerNext([503, 503])
        let retried = try await CurlewBinary.run([
            "upload", tree.root, server.baseURL + "/put/", "--retries", "2", "--json",
        ])
        #expect(retried.status == 0, "\(retried.stdout)")
        let retriedJSON = try retried.json()
        #expect(retriedJSON["retries"] as? Int == 2)
        #expect(retriedJSON["uploaded"] as? Int == 1)
        #expect(server.requests.count == 3)

        // More 503s than retries allowed: the file fails after 1 + 1 attempts.
        server.answerNext([503, 503])
        let exhausted = try await CurlewBinary.run([
            "upload", tree.root, server.baseURL + "/put/", "--retries", "1", "--json",
        ])
        #expect(exhausted.status == 1)
        #expect(server.requests.count == 5)
        let failure = try #require((try exhausted.json()["failures"] as? [[String: String]])?.first?["error"])
        #expect(failure.contains("HTTP 503") && failure.contains("after 2 attempts"), "\(failure)")

        // A refusal is not retried.
        server.answerNext([403])
        let refused = try await CurlewBinary.run([
            "upload", tree.root, server.baseURL + "/put/", "--retries", "2", "--json",
        ])
        #expect(refused.status == 1)
        #expect(try refused.json()["retries"] as? Int == 0)
        #expect(server.requests.count == 6)
        try await server.shutdown()
    }
}

@Suite struct UploadChecksumHeaderTests {
    @Test(arguments: ["md5", "sha256"])
    func putCarriesTheFilesDigestWhenAsked(kind: String) async throws {
        let server = try await RecordingServer.start()
        defer { Task { try? await server.shutdown() } }
        let tree = try SourceTree()
        defer { tree.remove() }
        let bytes = SourceTree.content(for: "digest", size: 100_000)
        try tree.write("a.bin", bytes)
        let output = try await CurlewBinary.run([
            "upload", tree.root, server.baseURL + "/up/", "--checksum-header", kind, "--no-progress",
        ])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let request = try #require(server.requests.first { $0.method == "PUT" })
        #expect(request.body == bytes)
        if kind == "md5" {
            #expect(request.header("Content-MD5") == Data(Insecure.MD5.hash(data: bytes)).base64EncodedString())
        } else {
            let digest = Data(SHA256.hash(data: bytes)).base64EncodedString()
            #expect(request.header("Digest") == "SHA-256=\(digest)")
            #expect(request.header("Content-Digest") == "sha-256=:\(digest):")
        }
    }

    @Test func checksumHeadersAreRefusedWhereTheyWouldBeWrong() async throws {
        let output = try await CurlewBinary.run([
            "upload", "/tmp", "http://127.0.0.1:9/", "--checksum-header", "md5", "--gzip",
        ])
        #expect(output.status == 64)
        #expect(output.stderr.contains("--checksum-header"))
    }
}

/// `--min-size`, `--max-size`, `--min-age`, `--max-age`: only the files inside every bound reach the server.
@Suite struct UploadSizeAndAgeFilterTests {
    @Test func onlyFilesInsideTheSizeAndAgeBoundsArePut() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree()
        defer {
            tree.remove()
            target.remove()
        }
        let sizes = ["tiny.txt": 10, "small.txt": 1_000, "medium.txt": 5_000, "large.txt": 50_000]
        for (name, size) in sizes { try tree.write(name, SourceTree.content(for: name, size: size)) }
        try tree.write("old/medium.txt", SourceTree.content(for: "old", size: 5_000))
        try tree.write("fresh/medium.txt", SourceTree.content(for: "fresh", size: 5_000))
        // Two days old, and a minute old: the rest are seconds old.
        let now = Date()
        try FileManager.default.setAttributes(
            [.modificationDate: now.addingTimeInterval(-2 * 86_400)], ofItemAtPath: tree.root + "/old/medium.txt")
        for name in sizes.keys {
            try FileManager.default.setAttributes(
                [.modificationDate: now.addingTimeInterval(-3_600)], ofItemAtPath: tree.root + "/" + name)
        }

        // 1 KiB to 10 KiB, modified in the last day and not in the last 10 minutes: small, medium.
        let output = try await CurlewBinary.run([
            "upload", tree.root, target.url, "--min-size", "1000", "--max-size", "10KiB", "--max-age", "24h",
            "--min-age", "10m", "--json",
        ])
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let json = try output.json()
        #expect(json["uploaded"] as? Int == 2)
        #expect(json["excluded"] as? Int == 4, "\(json)")
        try await waitUntil(timeout: .seconds(10), "nginx to log the PUTs") {
            try target.acceptedPuts().values.reduce(0, +) >= 2
        }
        #expect(try target.acceptedPuts() == ["small.txt": 1, "medium.txt": 1])

        let contradictory = try await CurlewBinary.run([
            "upload", tree.root, target.url, "--min-size", "2KiB", "--max-size", "1KiB",
        ])
        #expect(contradictory.status == 64)
        #expect(contradictory.stderr.contains("--min-size is above --max-size"), "\(contradictory.stderr)")
    }
}

/// `curlew upload - URL` to nginx's WebDAV: one chunked PUT of a pipe, stored byte for byte.
@Suite struct UploadStandardInputTests {
    /// `curlew upload - URL --json` reading `input` from a pipe.
    static func pipe(_ input: String, to url: String) async throws -> CommandOutput {
        try await CurlewBinary.run(
            ["upload", "-", url, "--json"], wrapper: ["/bin/sh", "-c", "cat '\(input)' | \"$0\" \"$@\""])
    }

    @Test func aPipeIsPutAsOneFileByteForByte() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree()
        defer {
            tree.remove()
            target.remove()
        }
        let input = tree.root + "/dump.sql"
        try tree.write("dump.sql", SourceTree.content(for: "dump", size: 3 << 20))
        let output = try await Self.pipe(input, to: target.url + "backup/dump.sql")
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let summary = try output.json()
        #expect(summary["bytes"] as? Int == 3 << 20)
        let digest = try FileDigest.sha256(ofFile: input).map { String(format: "%02x", $0) }.joined()
        #expect(summary["sha256"] as? String == digest)
        let stored = target.storedPath("backup/dump.sql")
        #expect(try FileDigest.sha256(ofFile: stored) == FileDigest.sha256(ofFile: input))
        try await waitUntil(timeout: .seconds(10), "nginx to log the PUT") {
            try target.acceptedPuts().values.reduce(0, +) >= 1
        }
        #expect(try target.acceptedPuts() == ["backup/dump.sql": 1])
    }

    /// A server that does not make folders (RFC 4918's 409) gets them by MKCOL before the pipe's PUT, which a 409
    /// would have lost: the PUT is sent once and stored.
    @Test func aPipeIntoFoldersTheServerDoesNotMakeIsStoredOnFirstTry() async throws {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: .strict)
        let tree = try SourceTree()
        defer {
            tree.remove()
            target.remove()
        }
        let input = tree.root + "/dump.sql"
        try tree.write("dump.sql", SourceTree.content(for: "dump", size: 1 << 20))
        let output = try await Self.pipe(input, to: target.url + "backup/2026/dump.sql")
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let stored = target.storedPath("backup/2026/dump.sql")
        #expect(try FileDigest.sha256(ofFile: stored) == FileDigest.sha256(ofFile: input))
        try await waitUntil(timeout: .seconds(10), "the server to log the PUT") {
            !target.loggedRequests(method: "PUT").isEmpty
        }
        #expect(target.loggedRequests(method: "PUT").map(\.status) == [201])
        let folders = target.loggedRequests(method: "MKCOL")
        #expect(folders.map(\.status) == [409, 409, 201, 201, 201])
        #expect(folders.map(\.path) == ["backup/2026/", "backup/", "", "backup/", "backup/2026/"])

        // Into the same folder again: one MKCOL, answered 405, and the PUT.
        let again = try await Self.pipe(input, to: target.url + "backup/2026/again.sql?token=k3y")
        #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
        try await waitUntil(timeout: .seconds(10), "the server to log the second PUT") {
            target.loggedRequests(method: "PUT").count >= 2
        }
        #expect(target.loggedRequests(method: "PUT").map(\.status) == [201, 201])
        #expect(target.loggedRequests(method: "MKCOL").dropFirst(5).map(\.status) == [405])
        #expect(!again.stdout.contains("k3y"), "\(again.stdout)")
    }

    /// A URL that names a folder (a trailing `/`) has its parent made, not itself.
    @Test func aPipeToAFolderURLMakesOnlyItsParent() async throws {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: .strict)
        let tree = try SourceTree()
        defer {
            tree.remove()
            target.remove()
        }
        try tree.write("dump.sql", Array("streamed\n".utf8))
        _ = try await Self.pipe(tree.root + "/dump.sql", to: target.url + "dir/")
        try await waitUntil(timeout: .seconds(10), "the server to log the PUT") {
            !target.loggedRequests(method: "PUT").isEmpty
        }
        #expect(target.loggedRequests(method: "MKCOL").map(\.path) == [""])
    }

    /// A folder the server will not make: the pipe's PUT fails with its 409 and the MKCOL's refusal.
    @Test func aPipeIntoAFolderTheServerWillNotMakeFailsWithBothAnswers() async throws {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: .strictWithoutMKCOL)
        let tree = try SourceTree()
        defer {
            tree.remove()
            target.remove()
        }
        try tree.write("dump.sql", Array("streamed\n".utf8))
        let output = try await Self.pipe(tree.root + "/dump.sql", to: target.url + "x/dump.sql")
        #expect(output.status != 0)
        let error = try output.json()["error"] as? String ?? ""
        #expect(error.hasPrefix("HTTP 409 (its folder could not be made: MKCOL /dav-no-mkcol/"), "\(error)")
        #expect(error.hasSuffix("/x/ answered 403)"), "\(error)")
    }
}

/// `curlew sync` to nginx's WebDAV folder: what changed goes, what did not stays, what the source lost is deleted,
/// counted in nginx's own log.
@Suite struct SyncWebDAVCommandTests {
    /// With a journal, the destination's listing still decides: a file the journal records as sent but that was
    /// deleted on the server since is sent again, not skipped on the journal's word.
    @Test func aSyncWithAJournalSendsAgainWhatTheDestinationLostSince() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-sync-journal")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        for name in ["kept.txt", "lost.txt"] { try tree.write(name, SourceTree.content(for: name, size: 2000)) }
        let first = try await CurlewBinary.run(["sync", tree.root, target.url, "--journal", journal, "--json"])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        try await waitUntil(timeout: .seconds(10), "nginx to log 2 PUTs") {
            try target.acceptedPuts().values.reduce(0, +) >= 2
        }
        try FileManager.default.removeItem(atPath: target.storedPath("lost.txt"))

        let second = try await CurlewBinary.run(["sync", tree.root, target.url, "--journal", journal, "--json"])
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        let summary = try second.json()
        #expect(summary["toSendByReason"] as? [String: Int] == ["missing": 1], "\(summary)")
        #expect((summary["upload"] as? [String: Any])?["uploaded"] as? Int == 1, "\(summary)")
        try await waitUntil(timeout: .seconds(10), "nginx to log the third PUT") {
            try target.acceptedPuts().values.reduce(0, +) >= 3
        }
        #expect(try target.acceptedPuts() == ["kept.txt": 1, "lost.txt": 2])
        #expect(
            try FileDigest.sha256(ofFile: target.storedPath("lost.txt"))
                == FileDigest.sha256(ofFile: tree.root + "/lost.txt"))
    }

    /// `curlew sync --dry-run` with another destination's journal previewed a run that is then refused; it is
    /// refused the same way (same message, same exit status) and writes nothing.
    @Test func aDryRunIsRefusedAJournalOfAnotherDestinationAsTheSyncIs() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-sync-dry-journal")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try tree.write("a.txt", Array("a".utf8))
        let staging =
            "# curlew upload journal v1\ntarget\thttps%3A%2F%2Fstaging.invalid%3A443%2Ffiles%2F\ndone\t1\t2\ta.txt\n"
        try Data(staging.utf8).write(to: URL(fileURLWithPath: journal))

        let dryRun = try await CurlewBinary.run(["sync", tree.root, target.url, "--journal", journal, "--dry-run"])
        let run = try await CurlewBinary.run(["sync", tree.root, target.url, "--journal", journal])
        #expect(run.status != 0 && dryRun.status == run.status, "\(dryRun.stdout)\n\(dryRun.stderr)")
        #expect(run.stderr.contains("records uploads to https://staging.invalid:443/files/"), "\(run.stderr)")
        #expect(dryRun.stderr == run.stderr)
        #expect(target.loggedRequests(method: "PUT").isEmpty)
        #expect(try String(contentsOfFile: journal, encoding: .utf8) == staging)
    }

    /// A folder typed with non-ASCII and a query: the listing's hrefs come back percent-encoded and without the
    /// query, and still read as the folder's files, so a second sync sends nothing.
    @Test func aFolderTypedWithNonASCIIAndAQueryListsAsTheFilesSentThere() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-sync-encoded")
        defer {
            tree.remove()
            target.remove()
        }
        for name in ["a.txt", "sub/b.txt"] { try tree.write(name, SourceTree.content(for: name, size: 500)) }
        let folder = target.url + "café/?token=t"
        let first = try await CurlewBinary.run(["sync", tree.root, folder, "--json"])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        #expect((try first.json()["upload"] as? [String: Any])?["uploaded"] as? Int == 2)
        // On nginx's disk, under the folder's own name; the query went to no path.
        for name in ["a.txt", "sub/b.txt"] {
            #expect(
                try FileDigest.sha256(ofFile: target.storedPath("café/" + name))
                    == FileDigest.sha256(ofFile: tree.root + "/" + name), "\(name)")
        }

        let second = try await CurlewBinary.run(["sync", tree.root, folder, "--json"])
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        let summary = try second.json()
        #expect(summary["toSendByReason"] as? [String: Int] ?? [:] == [:], "\(summary)")
        #expect((summary["upload"] as? [String: Any])?["uploaded"] as? Int == 0, "\(summary)")
    }

    /// `readdir` ends a folder and fails (EIO, ESTALE on a network file system) with the same NULL. A folder whose
    /// listing failed was taken as empty: its files were neither sent nor reported, and `sync --delete` deleted
    /// their copies. It is a problem now, and no shard deletes anything after one, even a shard that does not own
    /// the folder (each dropped the others' problems, and deleted what the folder held). The failure is injected by
    /// a preloaded shim, since the file systems that fail this way are not on this machine.
    @Test func aFolderWhoseListingFailsIsAProblemAndNoShardDeletes() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-sync-readdir")
        defer {
            tree.remove()
            target.remove()
        }
        let flakyFiles = (0..<6).map { "flaky/file \($0).txt" }
        for name in ["keep.txt"] + flakyFiles { try tree.write(name, SourceTree.content(for: name, size: 300)) }
        let first = try await CurlewBinary.run(["sync", tree.root, target.url, "--json"])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        // A file the source never had, owned by the shard that does not own the folder: a deletion to make.
        let shards = 2
        let folderOwner = (0..<shards).first { ShardAssignment(index: $0, count: shards).owns(relativePath: "flaky") }!
        let otherShard = ShardAssignment(index: 1 - folderOwner, count: shards)
        let stray = try #require((0..<100).map { "stray \($0).txt" }.first { otherShard.owns(relativePath: $0) })
        try Data("stray".utf8).write(to: URL(fileURLWithPath: target.storedPath(stray)))

        let shim = try await Self.buildReaddirFailingShim(in: tree.root + ".shim")
        defer { try? FileManager.default.removeItem(atPath: tree.root + ".shim") }
        let failing = ["LD_PRELOAD": shim]
        let whole = try await CurlewBinary.run(
            ["sync", tree.root, target.url, "--delete", "--json"], environment: failing)
        #expect(whole.status == 1, "\(whole.stdout)\n\(whole.stderr)")
        let summary = try whole.json()
        #expect(summary["deletionsWithheld"] as? Int == 1, "\(summary)")
        let failures = (summary["upload"] as? [String: Any])?["failures"] as? [[String: Any]] ?? []
        #expect(
            failures.contains {
                $0["path"] as? String == "flaky"
                    && ($0["error"] as? String)?.contains("cannot read the whole directory") == true
            }, "\(summary)")
        for index in 0..<shards {
            let shard = try await CurlewBinary.run(
                ["sync", tree.root, target.url, "--delete", "--shard", "\(index)/\(shards)", "--json"],
                environment: failing)
            let shardSummary = try shard.json()
            // The folder's owner fails on it; the other shard has nothing of its own failing, and still deletes
            // nothing, since the source was not listed whole.
            #expect(shard.status == (index == folderOwner ? 1 : 0), "\(shard.stdout)\n\(shard.stderr)")
            #expect(shardSummary["deleted"] as? Int == 0, "\(shardSummary)")
            #expect(shardSummary["deletionsWithheld"] as? Int == (index == folderOwner ? 0 : 1), "\(shardSummary)")
            // Each says why, the shard whose own files all went too.
            #expect(shardSummary["sourcePathsNotListed"] as? Int == 1, "\(shardSummary)")
        }
        // Server-side: no DELETE, and the folder's copies are all there.
        #expect(target.loggedRequests(method: "DELETE").isEmpty)
        for name in flakyFiles + [stray] {
            #expect(FileManager.default.fileExists(atPath: target.storedPath(name)), "\(name)")
        }
    }

    /// A shared object that makes `readdir` fail with EIO in every folder named `flaky` (found by `opendir`).
    static func buildReaddirFailingShim(in directory: String) async throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let source = directory + "/readdir_fails.c"
        let library = directory + "/readdir_fails.so"
        try """
        #define _GNU_SOURCE
        #include <dirent.h>
        #include <dlfcn.h>
        #include <errno.h>
        #include <string.h>

        static DIR *flaky[64];

        static int is_flaky(DIR *handle) {
            for (int i = 0; i < 64; i++) if (handle && flaky[i] == handle) return 1;
            return 0;
        }

        DIR *opendir(const char *name) {
            DIR *(*real)(const char *) = dlsym(RTLD_NEXT, "opendir");
            DIR *handle = real(name);
            size_t length = strlen(name);
            if (handle && length >= 6 && strcmp(name + length - 6, "/flaky") == 0) {
                for (int i = 0; i < 64; i++) if (!flaky[i]) { flaky[i] = handle; break; }
            }
            return handle;
        }

        int closedir(DIR *handle) {
            int (*real)(DIR *) = dlsym(RTLD_NEXT, "closedir");
            for (int i = 0; i < 64; i++) if (flaky[i] == handle) flaky[i] = 0;
            return real(handle);
        }

        struct dirent *readdir(DIR *handle) {
            struct dirent *(*real)(DIR *) = dlsym(RTLD_NEXT, "readdir");
            if (is_flaky(handle)) { errno = EIO; return 0; }
            return real(handle);
        }

        struct dirent64 *readdir64(DIR *handle) {
            struct dirent64 *(*real)(DIR *) = dlsym(RTLD_NEXT, "readdir64");
            if (is_flaky(handle)) { errno = EIO; return 0; }
            return real(handle);
        }

        """.write(toFile: source, atomically: true, encoding: .utf8)
        // The C compiler Swift itself links with.
        let output = try await CurlewBinary.runProgram([
            "/usr/bin/cc", "-shared", "-fPIC", "-O1", "-o", library, source, "-ldl",
        ])
        guard output.status == 0 else { throw TestSupportError("cannot build the readdir shim: \(output.stderr)") }
        return library
    }

    @Test func aSecondSyncSendsOnlyChangesAndDeletesOnlyWhatTheSourceLost() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree()
        defer {
            tree.remove()
            target.remove()
        }
        for name in ["keep.txt", "same-size.txt", "grows.txt", "goes.txt", "deep/er/keep.txt", "skip.tmp"] {
            try tree.write(name, SourceTree.content(for: name, size: 2000))
        }
        let first = try await CurlewBinary.run(["sync", tree.root, target.url, "--exclude", "*.tmp", "--json"])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        #expect(try first.json()["toSendByReason"] as? [String: Int] == ["missing": 5])
        try await waitUntil(timeout: .seconds(10), "nginx to log 5 PUTs") {
            try target.acceptedPuts().values.reduce(0, +) >= 5
        }
        // A file the source never had, and one its patterns exclude: --delete removes the first only.
        try Data("stray".utf8).write(to: URL(fileURLWithPath: target.storedPath("stray.txt")))
        try Data("left".utf8).write(to: URL(fileURLWithPath: target.storedPath("left.tmp")))

        // Same size, new bytes, and newer than the server's copy; another grows; one goes; one is new.
        try tree.write("same-size.txt", SourceTree.content(for: "changed", size: 2000))
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(3_600)], ofItemAtPath: tree.root + "/same-size.txt")
        try tree.write("grows.txt", SourceTree.content(for: "grows", size: 3000))
        try FileManager.default.removeItem(atPath: tree.root + "/goes.txt")
        try tree.write("new.txt", SourceTree.content(for: "new", size: 10))

        let dryRun = try await CurlewBinary.run([
            "sync", tree.root, target.url, "--exclude", "*.tmp", "--delete", "--dry-run",
        ])
        #expect(dryRun.status == 0, "\(dryRun.stderr)")
        #expect(dryRun.stdout.contains("would delete goes.txt") && dryRun.stdout.contains("would delete stray.txt"))
        #expect(!dryRun.stdout.contains("left.tmp"))
        #expect(target.loggedRequests(method: "DELETE").isEmpty, "a dry run deletes nothing")

        let second = try await CurlewBinary.run([
            "sync", tree.root, target.url, "--exclude", "*.tmp", "--delete", "--json-events", "--json",
        ])
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        var lines = second.stdout.split(separator: "\n").map(String.init)
        let summary = try #require(
            try JSONSerialization.jsonObject(with: Data(lines.removeLast().utf8)) as? [String: Any])
        #expect(summary["toSendByReason"] as? [String: Int] == ["missing": 1, "newer": 1, "size": 1], "\(summary)")
        #expect(summary["unchangedByRule"] as? [String: Int] == ["size-and-time": 2])
        #expect(summary["deleted"] as? Int == 2)
        let events = try lines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let deleted = events.filter { $0["event"] as? String == "deleted" }.compactMap { $0["path"] as? String }
        #expect(Set(deleted) == ["goes.txt", "stray.txt"])
        let started = events.filter { $0["event"] as? String == "started" }.map {
            "\($0["path"] as? String ?? "") \($0["rule"] as? String ?? "")"
        }
        #expect(Set(started) == ["new.txt missing", "grows.txt size", "same-size.txt newer"])

        try await waitUntil(timeout: .seconds(10), "nginx to log 8 PUTs and 2 DELETEs") {
            try target.acceptedPuts().values.reduce(0, +) >= 8 && target.loggedRequests(method: "DELETE").count >= 2
        }
        let puts = try target.acceptedPuts()
        #expect(puts["keep.txt"] == 1 && puts["deep/er/keep.txt"] == 1, "unchanged files are not sent again: \(puts)")
        #expect(puts["same-size.txt"] == 2 && puts["grows.txt"] == 2 && puts["new.txt"] == 1)
        #expect(Set(target.loggedRequests(method: "DELETE").map(\.path)) == ["goes.txt", "stray.txt"])
        #expect(FileManager.default.fileExists(atPath: target.storedPath("left.tmp")))
        for name in ["same-size.txt", "grows.txt", "new.txt", "keep.txt"] {
            #expect(
                try FileDigest.sha256(ofFile: target.storedPath(name))
                    == FileDigest.sha256(ofFile: tree.root + "/" + name))
        }
    }
}

@Suite struct UploadOutputRedactionTests {
    /// The destination line, the summaries (printed and written) and the journal name the destination without the
    /// password or key typed into its URL; the server gets both.
    @Test func theOutputNamesTheDestinationWithoutItsPasswordOrKey() async throws {
        let server = try await RecordingServer.start()
        let base = server.baseURL.replacingOccurrences(of: "http://", with: "http://ada:s3cr3t-pw@")
        let tree = try SourceTree(prefix: "curlew-upload-redaction")
        defer { tree.remove() }
        try tree.write("a.txt", SourceTree.content(for: "a.txt", size: 300))
        try tree.write("dir/b.txt", SourceTree.content(for: "b.txt", size: 300))
        let records = NSTemporaryDirectory() + "curlew-upload-redaction-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: records, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: records) }

        let folder = try await CurlewBinary.run([
            "upload", tree.root, base + "/files/?api_key=k3y-one", "--journal", records + "/journal",
            "--output-dir", records + "/shards", "--no-progress",
        ])
        let stream = try await CurlewBinary.run(
            ["upload", "-", base + "/stream.bin?token=k3y-two"],
            wrapper: ["/bin/sh", "-c", "echo streamed | \"$0\" \"$@\""])
        let streamJSON = try await CurlewBinary.run(
            ["upload", "-", base + "/stream.bin?token=k3y-two", "--json"],
            wrapper: ["/bin/sh", "-c", "echo streamed | \"$0\" \"$@\""])
        try await server.shutdown()
        for output in [folder, stream, streamJSON] { #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)") }

        let requests = server.requests
        let basic = "Basic " + Data("ada:s3cr3t-pw".utf8).base64EncodedString()
        #expect(requests.count == 4)
        #expect(requests.allSatisfy { $0.method == "PUT" && $0.header("Authorization") == basic })
        // The folder's query follows each file's path.
        #expect(
            Set(requests.map(\.uri).filter { $0.hasPrefix("/files/") })
                == ["/files/a.txt?api_key=k3y-one", "/files/dir/b.txt?api_key=k3y-one"], "\(requests.map(\.uri))")
        #expect(requests.filter { $0.uri == "/stream.bin?token=k3y-two" }.count == 2)

        let shown = "http://ada:<redacted>@127.0.0.1:\(server.port)"
        #expect(folder.stdout.contains("→ \(shown)/files/?api_key=<redacted>"), "\(folder.stdout)")
        #expect(stream.stdout.contains("curlew upload - → \(shown)/stream.bin?token=<redacted>:"), "\(stream.stdout)")
        #expect(try streamJSON.json()["url"] as? String == "\(shown)/stream.bin?token=<redacted>")
        var written = [folder, stream, streamJSON].flatMap { [$0.stdout, $0.stderr] }
        let files = try FileManager.default.subpathsOfDirectory(atPath: records).filter {
            FileManager.default.contents(atPath: records + "/" + $0) != nil
        }
        #expect(files.contains("journal") && files.contains { $0.hasPrefix("shards/") }, "\(files)")
        for file in files { written.append(try String(contentsOfFile: records + "/" + file, encoding: .isoLatin1)) }
        for (index, text) in written.enumerated() {
            for secret in ["s3cr3t-pw", "k3y-one", "k3y-two"] {
                #expect(!text.contains(secret), "output \(index) repeats \(secret)")
            }
        }
    }
}

@Suite struct UploadOutputControlCharacterTests {
    /// A server's error text and a file's name reach the terminal with their control characters shown, not sent:
    /// no reply can retitle the window, erase a line or colour the output. `--json` keeps the text exact.
    @Test func aServersRepliesAndFileNamesCannotSteerTheTerminal() async throws {
        let hostile = "\u{1B}]0;owned\u{07}\u{1B}[2Kno\u{8}\u{9B}31mdenied"
        let tree = try SourceTree(prefix: "curlew-upload-control")
        defer { tree.remove() }
        let name = "file\u{1B}[31m.txt"
        try tree.write(name, Array("content".utf8))
        try await withScriptedServer({ _ in ScriptedResponse(status: 403, body: Array(hostile.utf8)) }) { server in
            let shown = try await CurlewBinary.run(["upload", tree.root, server.baseURL + "/up/", "--no-progress"])
            let json = try await CurlewBinary.run(["upload", tree.root, server.baseURL + "/up/", "--json"])
            #expect(shown.status == 1 && json.status == 1, "\(shown.stdout)\n\(shown.stderr)")
            let text = shown.stdout + shown.stderr
            let controls = text.unicodeScalars.filter {
                $0 != "\n" && $0 != "\t" && ($0.value < 0x20 || (0x7F...0x9F).contains($0.value))
            }
            #expect(controls.isEmpty, "\(controls.map { String($0.value, radix: 16) })")
            #expect(text.contains("\\x1b]0;owned\\x07\\x1b[2Kno\\x08\\x9b31mdenied"), "\(text)")
            #expect(text.contains("file\\x1b[31m.txt"), "\(text)")
            let failures = try json.json()["failures"] as? [[String: Any]]
            #expect(failures?.first?["path"] as? String == name)
            #expect((failures?.first?["error"] as? String)?.contains(hostile) == true, "\(failures ?? [])")
        }
    }
}
