import CurlewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `curlew upload` split into shards: each file sent by exactly one shard, once, even when a shard is killed and
/// run again.
extension UploadCommandTests {
    @Test func threeShardsSendEveryFileOnceAndAKilledShardResumes() async throws {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-upload-shards")
        let results = tree.root + ".results"
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: results)
            for index in 0..<3 { try? FileManager.default.removeItem(atPath: journal + ".shard-\(index)-of-3") }
        }
        let names = (0..<300).map { String(format: "part %d/file #%03d.bin", $0 % 5, $0) }
        for name in names { try tree.write(name, SourceTree.content(for: name, size: 2048 + extraSize(name))) }
        func shard(_ index: Int, rate: String? = nil) throws -> RunningCommand {
            try CurlewBinary.start(
                [
                    "upload", tree.root, target.url, "--shard", "\(index)/3", "--run-id", "up", "--journal", journal,
                    "--output-dir", results, "--concurrency", "4", "--no-progress",
                ] + (rate.map { ["--rate", $0] } ?? []))
        }
        // Shard 1 is paced (5 files/s, 20 s for its 100 files) and killed as soon as its journal holds 10, so it is
        // still sending when it is killed even on a machine that stalls for seconds; the other shards run meanwhile.
        let slow = try shard(1, rate: "5")
        let others = try [shard(0), shard(2)]
        let slowJournal = journal + ".shard-1-of-3"
        try await waitUntil(timeout: .seconds(30), "shard 1's journal to record 10 files") {
            ((try? journaledPaths(slowJournal).count) ?? 0) >= 10
        }
        #expect(slow.isRunning)
        slow.signal(SIGKILL)
        #expect(try await slow.finish().status == 128 + SIGKILL)
        for command in others {
            let output = try await command.finish()
            #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        }

        // The merge sees shard 1 missing.
        let incomplete = try await CurlewBinary.run(["merge", results])
        #expect(incomplete.status == 1)
        #expect(incomplete.stderr.contains("shards missing (1/3)"), "\(incomplete.stderr)")

        let rerun = try await shard(1).finish()
        #expect(rerun.status == 0, "\(rerun.stdout)\n\(rerun.stderr)")
        #expect(rerun.stdout.contains("shard 1/3 of run up"))

        let merged = try await CurlewBinary.run(["merge", results, "--json"])
        #expect(merged.status == 0, "\(merged.stderr)")
        let json = try merged.json()
        #expect(json["files"] as? Int == names.count)
        #expect(json["failed"] as? Int == 0)
        let sentOrFound =
            (json["uploaded"] as? Int ?? 0) + (json["skipped"] as? Int ?? 0) + (json["alreadyThere"] as? Int ?? 0)
        #expect(sentOrFound == names.count)

        for name in names {
            #expect(
                FileManager.default.contents(atPath: target.storedPath(name)).map(Array.init)
                    == SourceTree.content(for: name, size: 2048 + extraSize(name)), "\(name)")
        }
        try await waitUntil(timeout: .seconds(10), "nginx to log a PUT of every file") {
            try target.acceptedPuts().count == names.count
        }
        let puts = try target.acceptedPuts()
        #expect(puts.values.allSatisfy { $0 == 1 }, "PUT more than once: \(puts.filter { $0.value != 1 })")
        // Each shard's journal holds its own files, and together they hold every file once.
        var journaled: [String] = []
        for index in 0..<3 { journaled += try journaledPaths(journal + ".shard-\(index)-of-3") }
        #expect(journaled.sorted() == names.sorted())
    }
}

extension UploadCommandTests {
    /// Filters apply within each shard, so the merge's counts are the run's: excluded files counted once.
    @Test func shardsCountTheirOwnExcludedFilesAndTheMergeAddsUpToTheRun() async throws {
        let tree = try SourceTree(prefix: "curlew-upload-shard-filters")
        let results = tree.root + ".results"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: results)
        }
        for index in 0..<40 { try tree.write("f\(index)" + (index % 4 == 0 ? ".skip" : ".bin"), [UInt8(index)]) }
        for index in 0..<2 {
            let output = try await CurlewBinary.run([
                "upload", tree.root, "--shard", "\(index)/2", "--exclude", "*.skip", "--output-dir", results,
                "--no-progress",
            ])
            #expect(output.status == 0, "\(output.stderr)")
        }
        let merged = try await CurlewBinary.run(["merge", results, "--json"])
        #expect(merged.status == 0, "\(merged.stderr)")
        let json = try merged.json()
        #expect(json["excluded"] as? Int == 10)
        #expect(json["uploaded"] as? Int == 30)
        #expect(json["files"] as? Int == 30)
        #expect(json["shardsMerged"] as? Int == 2)
    }
}

/// A size per name, so files differ in length as well as content.
private func extraSize(_ name: String) -> Int { name.utf8.reduce(0) { $0 + Int($1) } % 1024 }
