import CurlewLoad
import CurlewSharding
import CurlewTestSupport
import CurlewUpload
import Foundation
import Testing

@testable import curlew

/// Issue 15's proof, end to end: the real `curlew` binary run by the Slurm examples as they are documented
/// (`bash deploy/slurm/bench.sbatch`, `upload.sbatch`: a four-task job array and a merge job after it) on the test
/// support's one-node Slurm cluster, against nginx, and checked against what nginx logged and against an
/// independent merge of the shards' HdrHistogram logs (Python's `hdrh`).
///
/// Heavy (200,000 requests, 10,000 files, on two cores) and timing-sensitive (the shards' windows must line up), so
/// `make test` runs this suite in a process of its own, and its tests one at a time.
@Suite(.serialized) struct SlurmShardedRunTests {
    static let shards = 4

    // MARK: - bench

    @Test func fourBenchShardsSendExactlyTheRunsRequestsAndTheMergeIsExact() async throws {
        let cluster = try await SlurmCluster.shared()
        let nginx = try await NginxServer.shared()
        let marker = NginxHit.makeMarker()
        let folder = try cluster.makeJobDirectory("bench-run")
        let requests = 200_000
        let (array, merge, printed) = try await DeployManifestTests.launch(
            "bench.sbatch",
            environment: [
                "CURLEW": try CurlewBinary.path(), "TARGET": nginx.httpBaseURL + marker + "x",
                "REQUESTS": String(requests),
                "CONNECTIONS": "32", "SHARDS": String(Self.shards), "START_DELAY": String(Self.startDelaySeconds),
                // EXTRA_ARGS reaches every shard: their plans say 500 ms intervals.
                "EXTRA_ARGS": "--interval 500ms",
            ], in: folder, on: cluster)
        let tasks = try await Self.waitForShards(of: array, merge: merge, on: cluster, timeout: .seconds(300))
        #expect(tasks.map(\.state) == Array(repeating: "COMPLETED", count: Self.shards), "\(cluster.describe(tasks))")
        let mergeTasks = try await cluster.waitForJob(merge, timeout: .seconds(60))
        #expect(mergeTasks.map(\.state) == ["COMPLETED"], "\(cluster.describe(mergeTasks))")

        // Each shard: its quarter, as shard I of run ARRAY_JOB_ID, started at the common second.
        let outputDirectory = "\(folder)/curlew-bench-\(array)"
        let results = try Self.shardSummaries(in: outputDirectory)
        #expect(results.map(\.shard) == (0..<Self.shards).map { ShardAssignment(index: $0, count: Self.shards) })
        #expect(results.allSatisfy { $0.runId == String(array) }, "\(results.map(\.runId))")
        #expect(results.map(\.requests) == Array(repeating: requests / Self.shards, count: Self.shards))
        #expect(results.allSatisfy { $0.run?.plan.intervalSeconds == 0.5 && $0.run?.plan.requests == requests })
        let startAt = try #require(results[0].startAt)
        #expect(printed.contains("load starts at"), "\(printed)")
        #expect(results.allSatisfy { $0.startAt == startAt })
        // The windows line up: no shard started early, none was late by more than a machine stall (a CI run on a VM
        // whose neighbours stalled it saw 1.14 s), so they ran side by side.
        let starts = results.map { $0.startedAt ?? 0 }
        let ends = results.map { ($0.startedAt ?? 0) + $0.durationSeconds }
        #expect(
            starts.allSatisfy { $0 >= startAt - 0.05 && $0 - startAt < 3 }, "start at \(startAt), started \(starts)")
        #expect(starts.max()! - starts.min()! < 3, "started \(starts)")
        #expect(starts.max()! < ends.min()!, "started \(starts), ended \(ends)")

        // nginx counts exactly the run's requests.
        let hits = try await NginxHit.read(nginx, marker: marker, atLeast: requests)
        #expect(hits.count == requests, "nginx logged \(hits.count) requests under \(marker)")
        #expect(hits.allSatisfy { $0.status == 200 })

        // The merge job (deploy/slurm/merge.sbatch: curlew merge OUTPUT_DIR --json) reports the whole run.
        let merged = try decode(BenchSummary.self, fromLastLineOf: try Self.output(of: mergeTasks[0]))
        #expect(
            merged.requests == requests && merged.succeeded == requests,
            "\(merged.requests) requests, \(merged.succeeded) succeeded")
        #expect(merged.statusCodes == ["200": requests])
        #expect(merged.shardsMerged == Self.shards)
        #expect(merged.runId == String(array))

        // Its percentiles are those of one histogram of every request: hdrh's sum of every interval of every shard.
        let python = try await HdrhReference.summingShardLogs(in: outputDirectory)
        #expect(python.total == requests)
        let latency = Self.percentiles(merged.latencyMicroseconds)
        for key in HdrhReference.keys {
            #expect(
                latency[key] == python.percentiles[key],
                "\(key): merge job \(latency[key] ?? -1), hdrh \(python.percentiles[key] ?? -1)")
        }
        // The same merge run here says the same.
        let again = try await CurlewBinary.run(["merge", outputDirectory, "--json"])
        #expect(again.status == 0, "\(again.stderr)")
        let local = try decode(BenchSummary.self, fromLastLineOf: again.stdout)
        #expect(local.requests == requests && Self.percentiles(local.latencyMicroseconds) == latency)
        Self.log(
            "bench under Slurm: array \(array); shards started within \(String(format: "%.3f", starts.max()! - starts.min()!)) s, "
                + "ran \(ends.map { String(format: "%.1f", $0 - startAt) }) s after the start; nginx \(hits.count) hits; "
                + "merge p50/p90/p99/p99.9 \(HdrhReference.keys.map { latency[$0] ?? -1 }) µs = hdrh \(HdrhReference.keys.map { python.percentiles[$0] ?? -1 })"
        )
    }

    /// Seconds from the launch to the shards' common start: time for Slurm to start four tasks on a busy machine.
    static let startDelaySeconds = 6

    // MARK: - upload

    /// 10,000 small files: names with spaces, `#`, `%` and non-ASCII letters, some empty, every content distinct.
    static func uploadFiles(count: Int) -> [(name: String, size: Int)] {
        (0..<count).map { index in
            let name =
                switch index % 5 {
                case 0: "photos/2026 summer/img #\(index).raw"
                case 1: "notes/ünïcødé/note \(index).txt"
                case 2: "data/part \(index % 7)/récord_\(index).bin"
                case 3: "mixed/100% done/#\(index) ✓.dat"
                default: "deep/a b/c#d/e/\(index)"
                }
            return (name, index % 1000 == 999 ? 0 : 1 + (index &* 7919) % 3000)
        }
    }

    static let uploadFileCount = 10_000

    @Test func fourUploadShardsSendEveryFileOnceThroughAKilledAndRequeuedShard() async throws {
        let cluster = try await SlurmCluster.shared()
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-slurm-upload")
        defer {
            tree.remove()
            target.remove()
        }
        let files = Self.uploadFiles(count: Self.uploadFileCount)
        for file in files { try tree.write(file.name, SourceTree.content(for: file.name, size: file.size)) }
        let names = Set(files.map(\.name))
        #expect(names.count == Self.uploadFileCount)

        let killed = ShardAssignment(index: 1, count: Self.shards)
        let killedShardNames = files.map(\.name).filter { killed.owns(relativePath: $0) }
        let killedShardFiles = killedShardNames.count
        // Every shard sends through a proxy to nginx. Once a quarter of shard 1's files are stored, the proxy holds
        // shard 1's next writes: stored, never answered. So shard 1 stops mid-run with writes in flight, however
        // slow the machine (a paced run ended before its kill once the kill came late), and the other shards go on.
        let proxy = try await HoldingProxy.start(
            upstreamPort: nginx.httpPort, hold: "^PUT ", holdingEveryMatch: true,
            onlyPaths: Set(killedShardNames.map { target.pathPrefix + $0 }), passingFirst: killedShardFiles / 4)
        defer { proxy.stop() }

        let curlew = try CurlewBinary.path()
        let folder = try cluster.makeJobDirectory("upload-run")
        let (array, merge, printed) = try await DeployManifestTests.launch(
            "upload.sbatch",
            environment: [
                "CURLEW": curlew, "SOURCE": tree.root, "DEST": proxy.baseURL + target.pathPrefix, "CONCURRENCY": "4",
                "SHARDS": String(Self.shards),
            ], in: folder, on: cluster)
        let outputDirectory = "\(folder)/curlew-upload-\(array)"
        // upload.sbatch's default JOURNAL; curlew makes it one journal per shard.
        func journal(_ index: Int) -> String { "\(outputDirectory)/upload.journal.shard-\(index)-of-\(Self.shards)" }

        // Shard 1 is killed with SIGKILL (as the OOM killer or a lost node would) once its journal holds the quarter
        // the proxy let through and the proxy holds a write of it.
        do {
            try await waitUntil(
                timeout: .seconds(120), pollInterval: .milliseconds(50),
                "shard 1's journal to record a quarter of its files and the proxy to hold its next write"
            ) {
                ((try? journaledPaths(journal(1)).count) ?? 0) >= killedShardFiles / 4 && proxy.storedCount() > 0
            }
        } catch {
            await Self.stopShards(of: array, merge: merge, on: cluster)
            throw error
        }
        let heldAtKill = proxy.storedCount()
        try await cluster.cancel(jobID: array, arrayTask: 1, signal: "KILL", batchStep: true)
        try proxy.stopHolding()
        let afterKill = try await Self.waitForShards(of: array, merge: merge, on: cluster, timeout: .seconds(180))
        #expect(afterKill.map(\.arrayTaskIndex) == [0, 1, 2, 3])
        #expect([0, 2, 3].allSatisfy { afterKill[$0].state == "COMPLETED" }, "\(cluster.describe(afterKill))")
        #expect(afterKill[1].state == "FAILED" && afterKill[1].exitSignal == 9, "\(cluster.describe(afterKill))")
        let journaledBeforeRerun = try journaledPaths(journal(1)).count
        let inFlightAtKill = try inFlightPaths(journal(1))
        #expect(inFlightAtKill.count <= 4, "at most CONCURRENCY files in flight: \(inFlightAtKill)")
        #expect(journaledBeforeRerun == killedShardFiles / 4, "the proxy let a quarter of shard 1's files through")
        #expect(inFlightAtKill.count >= heldAtKill, "held writes are in flight: \(inFlightAtKill)")
        #expect(!FileManager.default.fileExists(atPath: "\(outputDirectory)/upload-shard-1-of-\(Self.shards).json"))

        // The merge job ran after the array however it ended, and refused the run, naming the missing shard.
        let failedMerge = try await cluster.waitForJob(merge, timeout: .seconds(60))
        #expect(
            failedMerge.map(\.state) == ["FAILED"] && failedMerge[0].exitStatus == 1, "\(cluster.describe(failedMerge))"
        )
        let refusal = try Self.output(of: failedMerge[0])
        #expect(refusal.contains("1 of \(Self.shards) shards missing (1/\(Self.shards))"), "\(refusal)")

        // As the launcher says: requeue the shard, then submit the merge again with the command it printed.
        try await cluster.requeue(jobID: array, arrayTask: 1)
        let resubmit = try #require(
            printed.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.contains("sbatch --dependency=afterany:\(array)")
            },
            "\(printed)")
        let submitted = try await cluster.run(
            ["bash", "-c", resubmit], environment: ["CURLEW": curlew], workingDirectory: folder)
        let secondMerge = try #require(
            submitted.stdout.split(separator: " ").last.flatMap {
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }, "\(submitted)")

        let rerun: [SlurmTask]
        do {
            rerun = try await cluster.waitForTasks(ofJob: array, timeout: .seconds(180), "shard 1 to run again and end")
            { tasks in
                tasks.first { $0.arrayTaskIndex == 1 }.map { $0.isFinished && $0.restarts == 1 } ?? false
            }
        } catch {
            await Self.stopShards(of: array, merge: secondMerge, on: cluster)
            throw error
        }
        #expect(rerun.map(\.state) == Array(repeating: "COMPLETED", count: Self.shards), "\(cluster.describe(rerun))")
        let mergeTasks = try await cluster.waitForJob(secondMerge, timeout: .seconds(60))
        #expect(mergeTasks.map(\.state) == ["COMPLETED"], "\(cluster.describe(mergeTasks))")

        // The merged summary accounts for every file.
        let merged = try decode(UploadSummary.self, fromLastLineOf: try Self.output(of: mergeTasks[0]))
        #expect(merged.files == Self.uploadFileCount && merged.failed == 0 && merged.notStarted == 0, "\(merged.text)")
        #expect(merged.uploaded + merged.skipped + merged.alreadyThere == Self.uploadFileCount, "\(merged.text)")
        #expect(merged.shardsMerged == Self.shards && merged.runId == String(array))
        // The re-run resumed: it skipped what its journal recorded, and looked up (HEAD) only what was in flight.
        let resumed = try decode(
            UploadSummary.self, fromFile: "\(outputDirectory)/upload-shard-1-of-\(Self.shards).json")
        #expect(resumed.files == killedShardFiles && resumed.skipped == journaledBeforeRerun, "\(resumed.text)")
        #expect(resumed.uploaded + resumed.alreadyThere == killedShardFiles - journaledBeforeRerun, "\(resumed.text)")
        let lookedUp = target.loggedRequests(method: "HEAD")
        #expect(
            Set(lookedUp.map(\.path)) == inFlightAtKill && lookedUp.count == inFlightAtKill.count,
            "HEAD \(lookedUp), in flight \(inFlightAtKill)")
        #expect(resumed.alreadyThere == lookedUp.filter { (200..<300).contains($0.status) }.count, "\(resumed.text)")
        // The held writes were stored: the re-run found them there rather than sending them again.
        #expect(resumed.alreadyThere >= heldAtKill, "\(resumed.text), \(heldAtKill) held")

        // On disk: every file once, intact.
        let stored = nginx.scratchDirectory + "/" + target.folder
        var storedFiles: [String] = []
        let enumerator = try #require(FileManager.default.enumerator(atPath: stored))
        while let relative = enumerator.nextObject() as? String {
            if enumerator.fileAttributes?[.type] as? FileAttributeType == .typeRegular { storedFiles.append(relative) }
        }
        #expect(
            storedFiles.count == Self.uploadFileCount && Set(storedFiles) == names, "\(storedFiles.count) files stored")
        var corrupt: [String] = []
        for file in files {
            let (copy, source) = (
                try FileDigest.sha256(ofFile: target.storedPath(file.name)),
                try FileDigest.sha256(ofFile: tree.root + "/" + file.name)
            )
            if copy != source { corrupt.append(file.name) }
        }
        #expect(corrupt.isEmpty, "differ from the source: \(corrupt.prefix(10))")
        // nginx accepted one PUT per file, none twice.
        try await waitUntil(timeout: .seconds(10), "nginx to log a PUT of every file") {
            try target.acceptedPuts().count == names.count
        }
        let puts = try target.acceptedPuts()
        #expect(puts.values.allSatisfy { $0 == 1 }, "PUT more than once: \(puts.filter { $0.value != 1 }.prefix(10))")
        #expect(Set(puts.keys) == names)
        // Each shard's journal holds only its own files; together, every file once.
        var journaled: [String] = []
        for index in 0..<Self.shards {
            let paths = try journaledPaths(journal(index))
            let shard = ShardAssignment(index: index, count: Self.shards)
            #expect(
                paths.allSatisfy { shard.owns(relativePath: $0) }, "shard \(index)'s journal holds another shard's file"
            )
            journaled += paths
        }
        #expect(journaled.count == Self.uploadFileCount && Set(journaled) == names)
        Self.log(
            "upload under Slurm: array \(array); shard 1 (\(killedShardFiles) files) killed with \(journaledBeforeRerun) journaled, "
                + "\(inFlightAtKill.count) in flight; re-run skipped \(resumed.skipped), uploaded \(resumed.uploaded), found \(resumed.alreadyThere) already there (HEAD); "
                + "merged: \(merged.uploaded) uploaded + \(merged.skipped) skipped + \(merged.alreadyThere) already there; nginx \(puts.count) PUTs"
        )
    }

    // MARK: - Shards on hosts of their own

    /// Runs `curlew bench` on the host of its shard (`ip netns exec`), anything else (the merge) where it is.
    static let onItsOwnHost = """
        #!/bin/bash
        # CURLEW for deploy/slurm/bench.sbatch: shard I runs in network namespace I of SHARD_HOSTS (space-separated).
        set -eu
        if [ "$1" = bench ]; then
            read -r -a hosts <<< "$SHARD_HOSTS"
            exec ip netns exec "${hosts[$SLURM_ARRAY_TASK_ID]}" "$REAL_CURLEW" "$@"
        fi
        exec "$REAL_CURLEW" "$@"

        """

    /// Each bench shard's JSON summary in a run's output folder, in shard order.
    static func shardSummaries(in outputDirectory: String) throws -> [BenchSummary] {
        try (0..<shards).map { index in
            try decode(BenchSummary.self, fromFile: "\(outputDirectory)/bench-shard-\(index)-of-\(shards).json")
        }
    }

    @Test(.enabled(if: NamespaceHosts.unavailableReason == nil, "network namespaces need root and iproute2's ip"))
    func benchShardsOnHostsOfTheirOwnReachTheServerFromFourAddressesAndMergeExactly() async throws {
        let cluster = try await SlurmCluster.shared()
        let hosts = try await NamespaceHosts.create(clients: Self.shards)
        try await hosts.withNginx { nginx in try await Self.benchOnHostsOfTheirOwn(cluster, hosts, nginx) }
        #expect(NamespaceHosts.ownNamespaces().isEmpty, "left behind: \(NamespaceHosts.ownNamespaces())")
    }

    static func benchOnHostsOfTheirOwn(
        _ cluster: SlurmCluster, _ hosts: NamespaceHosts, _ server: NamespaceNginx
    ) async throws {
        let folder = try cluster.makeJobDirectory("bench-hosts")
        let wrapper = try cluster.writeScript(Self.onItsOwnHost, named: "curlew-on-its-own-host", in: folder)
        let marker = NginxHit.makeMarker()
        let requests = 40_000
        let (array, merge, _) = try await DeployManifestTests.launch(
            "bench.sbatch",
            environment: [
                "CURLEW": wrapper, "REAL_CURLEW": try CurlewBinary.path(),
                "SHARD_HOSTS": hosts.clients.joined(separator: " "),
                "TARGET": server.baseURL + marker + "x", "REQUESTS": String(requests), "CONNECTIONS": "16",
                "SHARDS": String(Self.shards), "START_DELAY": String(Self.startDelaySeconds),
            ], in: folder, on: cluster)
        // On a timeout the shards are stopped before the namespaces go.
        let tasks = try await Self.waitForShards(of: array, merge: merge, on: cluster, timeout: .seconds(180))
        #expect(tasks.map(\.state) == Array(repeating: "COMPLETED", count: Self.shards), "\(cluster.describe(tasks))")
        let mergeTasks = try await cluster.waitForJob(merge, timeout: .seconds(60))
        #expect(mergeTasks.map(\.state) == ["COMPLETED"], "\(cluster.describe(mergeTasks))")
        let outputDirectory = "\(folder)/curlew-bench-\(array)"
        let results = try Self.shardSummaries(in: outputDirectory)

        // nginx saw four clients, each shard's address sending exactly that shard's requests.
        var perAddress: [String: Int] = [:]
        try await waitUntil(timeout: .seconds(10), "nginx to log \(requests) requests under \(marker)") {
            perAddress = [:]
            let log = (try? String(contentsOfFile: server.hitsLogPath, encoding: .utf8)) ?? ""
            for line in log.split(separator: "\n") {
                let fields = line.split(separator: " ")
                if fields.count == 3, fields[1] == "200", fields[2].hasPrefix(marker) {
                    perAddress[String(fields[0]), default: 0] += 1
                }
            }
            return perAddress.values.reduce(0, +) >= requests
        }
        #expect(perAddress.values.reduce(0, +) == requests)
        #expect(Set(perAddress.keys) == Set(hosts.clientAddresses), "\(perAddress)")
        for (index, address) in hosts.clientAddresses.enumerated() {
            #expect(perAddress[address] == results[index].requests, "shard \(index) on \(address): \(perAddress)")
        }

        // The merge is still exact.
        let merged = try decode(BenchSummary.self, fromLastLineOf: try Self.output(of: mergeTasks[0]))
        #expect(merged.requests == requests && merged.succeeded == requests && merged.shardsMerged == Self.shards)
        let python = try await HdrhReference.summingShardLogs(in: outputDirectory)
        #expect(python.total == requests)
        let latency = Self.percentiles(merged.latencyMicroseconds)
        for key in HdrhReference.keys {
            #expect(
                latency[key] == python.percentiles[key],
                "\(key): merge job \(latency[key] ?? -1), hdrh \(python.percentiles[key] ?? -1)")
        }
        let starts = results.map { $0.startedAt ?? 0 }
        Self.log(
            "bench on hosts of their own: array \(array); nginx saw \(perAddress.sorted { $0.key < $1.key }); shards started within "
                + "\(String(format: "%.3f", starts.max()! - starts.min()!)) s; merge p50/p90/p99/p99.9 \(HdrhReference.keys.map { latency[$0] ?? -1 }) µs = hdrh"
        )
    }

    // MARK: - Helpers

    /// Waits (at most `timeout`) for every task of the array to end; when they do not, stops them and the merge job
    /// (``stopShards(of:merge:on:)``) and throws.
    static func waitForShards(
        of array: Int, merge: Int, on cluster: SlurmCluster, timeout: Duration
    ) async throws -> [SlurmTask] {
        do {
            return try await cluster.waitForJob(array, timeout: timeout)
        } catch {
            await Self.stopShards(of: array, merge: merge, on: cluster)
            throw error
        }
    }

    /// Cancels the array and its merge job and waits (at most 30 s) for the array's tasks to end: a test that gives
    /// up leaves nothing running.
    static func stopShards(of array: Int, merge: Int, on cluster: SlurmCluster) async {
        try? await cluster.cancel(jobID: merge)
        try? await cluster.cancel(jobID: array)
        _ = try? await cluster.waitForJob(array, timeout: .seconds(30))
    }

    /// What a job printed (its `--output` file: stdout and stderr).
    static func output(of task: SlurmTask) throws -> String {
        let path = try #require(task.standardOutput, "job \(task.jobID) has no output file")
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    static func percentiles(_ latency: BenchSummary.Latency) -> [String: Double] {
        ["p50": latency.p50, "p90": latency.p90, "p99": latency.p99, "p99_9": latency.p99_9]
    }

    /// Measurements worth keeping from a passing run, on stderr (swift test shows it).
    static func log(_ line: String) {
        FileHandle.standardError.write(Data(("SlurmShardedRunTests: " + line + "\n").utf8))
    }
}

func decode<T: Decodable>(_ type: T.Type, fromFile path: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(contentsOf: URL(fileURLWithPath: path)))
}

/// The last line of `text` (what `--json` prints last) decoded.
func decode<T: Decodable>(_ type: T.Type, fromLastLineOf text: String) throws -> T {
    guard let line = text.split(separator: "\n").last else { throw TestSupportError("nothing printed") }
    do {
        return try JSONDecoder().decode(type, from: Data(line.utf8))
    } catch {
        throw TestSupportError("not a \(type) on the last line: \(error)\n\(text.suffix(2000))")
    }
}
