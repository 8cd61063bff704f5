import CurlewTestSupport
import Foundation
import Testing
import Yams

/// The deploy examples (`deploy/slurm/*.sbatch`, `deploy/kubernetes/*.yaml`): the manifests say what their comments
/// and the README promise, the Slurm scripts and the Kubernetes Job pass `curlew` the same flags, and the Slurm
/// scripts run as documented on a real Slurm cluster, with a stand-in that records how `curlew` was called.
@Suite struct DeployManifestTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // CurlewCommandTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()
        .path

    static func path(_ relative: String) -> String { repository + "/" + relative }

    static func documents(_ relative: String) throws -> [[String: Any]] {
        var sequence = try Yams.load_all(yaml: String(contentsOfFile: path(relative), encoding: .utf8))
        var documents: [[String: Any]] = []
        while let document = sequence.next() {
            guard let object = document as? [String: Any] else {
                throw TestSupportError("\(relative): a document is not a mapping")
            }
            documents.append(object)
        }
        if let error = sequence.error { throw error }
        return documents
    }

    /// The one container of a Job's pods, with the pod spec.
    static func container(of job: [String: Any]) throws -> (container: [String: Any], pod: [String: Any]) {
        let spec = job["spec"] as? [String: Any]
        let pod = (spec?["template"] as? [String: Any])?["spec"] as? [String: Any]
        guard let pod, let containers = pod["containers"] as? [[String: Any]], containers.count == 1 else {
            throw TestSupportError("\(job["metadata"] ?? "a Job") has no single container")
        }
        return (containers[0], pod)
    }

    /// The value after `flag` in `arguments`.
    static func value(of flag: String, in arguments: [String]) -> String? {
        arguments.firstIndex(of: flag).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    }

    /// The flags of the `exec "$CURLEW" SUBCOMMAND …` line of a Slurm script.
    static func curlewFlags(inScript name: String, subcommand: String) throws -> [String] {
        let script = try String(contentsOfFile: path("deploy/slurm/" + name), encoding: .utf8)
        let lines = script.split(separator: "\n").filter {
            $0.hasPrefix("exec \"$CURLEW\" \(subcommand) ") || $0.hasPrefix("exec \"${CURLEW:-curlew}\"")
        }
        guard lines.count == 1 else {
            throw TestSupportError("\(name): expected one line running curlew \(subcommand), found \(lines.count)")
        }
        return lines[0].split(separator: " ").map(String.init).filter { $0.hasPrefix("-") }
    }

    // MARK: - Kubernetes

    @Test func benchJobIsAnIndexedJobOfFourShardsWritingToASharedVolume() throws {
        let documents = try Self.documents("deploy/kubernetes/bench-job.yaml")
        #expect(documents.map { $0["kind"] as? String } == ["PersistentVolumeClaim", "Job"])
        let claim = documents[0]
        let claimName = (claim["metadata"] as? [String: Any])?["name"] as? String
        #expect((claim["spec"] as? [String: Any])?["accessModes"] as? [String] == ["ReadWriteMany"])

        let job = documents[1]
        #expect((job["metadata"] as? [String: Any])?["name"] as? String == "curlew-bench")
        let spec = try #require(job["spec"] as? [String: Any])
        #expect(spec["completionMode"] as? String == "Indexed")
        #expect(spec["completions"] as? Int == 4)
        #expect(spec["parallelism"] as? Int == 4)

        let (container, pod) = try Self.container(of: job)
        #expect(pod["restartPolicy"] as? String == "Never")
        #expect(container["command"] as? [String] == ["curlew"])
        let arguments = try #require(container["args"] as? [String])
        #expect(arguments.first == "bench")
        // The shard count must be the number of completions: JOB_COMPLETION_INDEX runs 0..<completions.
        #expect(Self.value(of: "--shards", in: arguments) == "4")
        #expect(!arguments.contains("--shard"), "the index comes from JOB_COMPLETION_INDEX")
        // Kubernetes expands $(NAME) in args from the container's variables.
        #expect(Self.value(of: "--start-at", in: arguments) == "$(START_AT)")

        let volumes = try #require(pod["volumes"] as? [[String: Any]])
        let mounts = try #require(container["volumeMounts"] as? [[String: Any]])
        let outputDirectory = try #require(Self.value(of: "--output-dir", in: arguments))
        let mount = try #require(
            mounts.first { $0["mountPath"] as? String == outputDirectory },
            "--output-dir \(outputDirectory) is not a volume mount")
        let volume = try #require(volumes.first { $0["name"] as? String == mount["name"] as? String })
        #expect((volume["persistentVolumeClaim"] as? [String: Any])?["claimName"] as? String == claimName)

        let environment = try #require(container["env"] as? [[String: Any]])
        func source(_ name: String) -> [String: Any]? {
            environment.first { $0["name"] as? String == name }?["valueFrom"] as? [String: Any]
        }
        #expect(
            (source("CURLEW_RUN_ID")?["fieldRef"] as? [String: Any])?["fieldPath"] as? String
                == "metadata.labels['batch.kubernetes.io/controller-uid']")
        #expect((source("START_AT")?["configMapKeyRef"] as? [String: Any])?["name"] as? String == "curlew-bench-run")
        for reference in arguments where reference.hasPrefix("$(") {
            let name = String(reference.dropFirst(2).dropLast())
            #expect(
                environment.contains { $0["name"] as? String == name },
                "\(reference) names no variable of the container")
        }
    }

    @Test func mergeJobMergesTheBenchJobsVolume() throws {
        let bench = try Self.documents("deploy/kubernetes/bench-job.yaml")
        let documents = try Self.documents("deploy/kubernetes/merge-job.yaml")
        #expect(documents.map { $0["kind"] as? String } == ["Job"])
        let job = documents[0]
        #expect((job["metadata"] as? [String: Any])?["name"] as? String == "curlew-merge")
        let (container, pod) = try Self.container(of: job)
        #expect(container["command"] as? [String] == ["curlew"])
        #expect(container["args"] as? [String] == ["merge", "/results", "--json"])
        #expect(pod["restartPolicy"] as? String == "Never")

        let mounts = try #require(container["volumeMounts"] as? [[String: Any]])
        let mount = try #require(mounts.first { $0["mountPath"] as? String == "/results" })
        let volume = try #require(
            (pod["volumes"] as? [[String: Any]])?.first { $0["name"] as? String == mount["name"] as? String })
        let claimName = (bench[0]["metadata"] as? [String: Any])?["name"] as? String
        #expect((volume["persistentVolumeClaim"] as? [String: Any])?["claimName"] as? String == claimName)
        // The bench Job writes where this one reads.
        let benchArguments = try #require(try Self.container(of: bench[1]).container["args"] as? [String])
        #expect(Self.value(of: "--output-dir", in: benchArguments) == "/results")
    }

    @Test func slurmScriptsPassTheFlagsTheKubernetesJobsDo() throws {
        let bench = try Self.documents("deploy/kubernetes/bench-job.yaml")
        let kubernetesBench = try #require(try Self.container(of: bench[1]).container["args"] as? [String])
        let slurmBench = try Self.curlewFlags(inScript: "bench.sbatch", subcommand: "bench")
        // The same flags, less --shards: Slurm gives the count (SLURM_ARRAY_TASK_COUNT), Kubernetes does not.
        #expect(slurmBench == kubernetesBench.filter { $0.hasPrefix("-") && $0 != "--shards" })
        #expect(slurmBench.contains("--output-dir") && slurmBench.contains("--start-at"))

        let slurmUpload = try Self.curlewFlags(inScript: "upload.sbatch", subcommand: "upload")
        #expect(slurmUpload.contains("--output-dir") && slurmUpload.contains("--journal"))
        for flags in [slurmBench, slurmUpload] {
            #expect(
                !flags.contains("--shard") && !flags.contains("--run-id"),
                "Slurm's variables give the shard and the run")
        }

        let merge = try #require(
            try Self.container(of: Self.documents("deploy/kubernetes/merge-job.yaml")[0]).container["args"] as? [String]
        )
        let mergeScript = try String(contentsOfFile: Self.path("deploy/slurm/merge.sbatch"), encoding: .utf8)
        #expect(mergeScript.contains("arguments=(merge \"$OUTPUT_DIR\" --json)"))
        #expect(merge.filter { $0.hasPrefix("-") } == ["--json"])
    }

    @Test(arguments: ["bench.sbatch", "upload.sbatch", "merge.sbatch"])
    func slurmScriptIsValidBash(_ name: String) async throws {
        let output = try await CurlewBinary.runProgram(["bash", "-n", Self.path("deploy/slurm/" + name)])
        #expect(output.status == 0, "\(output.stderr)")
        let script = try String(contentsOfFile: Self.path("deploy/slurm/" + name), encoding: .utf8)
        #expect(
            script.hasPrefix("#!/bin/bash\n#SBATCH --job-name="),
            "sbatch reads #SBATCH lines only before the first command")
    }

    // MARK: - The Slurm scripts on a Slurm cluster

    /// Stands in for `curlew`, whose sharding flags live on another branch: records its arguments (one a line) and
    /// the Slurm variables in `$STUB_CALLS/SUBCOMMAND-TASK.txt`, writes the shard's output file where
    /// `--output-dir` says, and for `merge` lists the files it found.
    static let stub = """
        #!/bin/bash
        set -eu
        name="$1-${SLURM_ARRAY_TASK_ID:-none}"
        {
            echo "task=${SLURM_ARRAY_TASK_ID:-} count=${SLURM_ARRAY_TASK_COUNT:-} array=${SLURM_ARRAY_JOB_ID:-}"
            printf '%s\\n' "$@"
        } > "$STUB_CALLS/$name.txt"
        previous=""
        for argument in "$@"; do
            if [ "$previous" = --output-dir ]; then
                : > "$argument/$1-shard-$SLURM_ARRAY_TASK_ID-of-$SLURM_ARRAY_TASK_COUNT.json"
            fi
            previous=$argument
        done
        if [ "$1" = merge ]; then ls "$2" > "$STUB_CALLS/merge-saw.txt"; fi

        """

    struct StubRun {
        let folder: String
        let calls: String
        let environment: [String: String]

        init(_ cluster: SlurmCluster, _ hint: String, _ settings: [String: String]) throws {
            self.folder = try cluster.makeJobDirectory(hint)
            self.calls = folder + "/calls"
            try FileManager.default.createDirectory(atPath: calls, withIntermediateDirectories: true)
            let stub = try cluster.writeScript(DeployManifestTests.stub, named: "curlew-stub", in: folder)
            self.environment = settings.merging(["CURLEW": stub, "STUB_CALLS": calls]) { $1 }
        }

        /// The stub's record of one call: the Slurm variables, then the arguments.
        func call(_ name: String) throws -> (slurm: String, arguments: [String]) {
            let lines = try String(contentsOfFile: "\(calls)/\(name).txt", encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false)
            return (String(lines[0]), lines.dropFirst().dropLast().map(String.init))
        }

        func mergeSaw() throws -> [String] {
            try String(contentsOfFile: calls + "/merge-saw.txt", encoding: .utf8).split(separator: "\n").map(
                String.init)
        }
    }

    /// `bash deploy/slurm/…` as documented; returns the array's and the merge's job IDs from what it printed.
    static func launch(
        _ script: String, _ run: StubRun, on cluster: SlurmCluster
    ) async throws -> (array: Int, merge: Int, printed: String) {
        try await launch(script, environment: run.environment, in: run.folder, on: cluster)
    }

    /// `bash deploy/slurm/SCRIPT` run from `folder` with `environment` (the settings the script reads); returns the
    /// array's and the merge's job IDs from the line it printed ("array job N … merge job M").
    static func launch(
        _ script: String, environment: [String: String], in folder: String, on cluster: SlurmCluster
    ) async throws -> (array: Int, merge: Int, printed: String) {
        let output = try await cluster.run(
            ["bash", path("deploy/slurm/" + script)], environment: environment, workingDirectory: folder)
        #expect(output.status == 0, "\(output)")
        let words = output.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," })
        let array = words.firstIndex(of: "array").flatMap { Int(words[$0 + 2]) }
        let merge = words.firstIndex(of: "merge").flatMap { Int(words[$0 + 2]) }
        guard let array, let merge else { throw TestSupportError("no job IDs in what \(script) printed: \(output)") }
        return (array, merge, output.stdout)
    }

    @Test func benchLauncherSubmitsShardsThatStartTogetherThenTheMerge() async throws {
        let cluster = try await SlurmCluster.shared()
        let run = try StubRun(
            cluster, "bench-launcher",
            [
                "TARGET": "http://127.0.0.1:9/small", "REQUESTS": "200000", "CONNECTIONS": "8", "SHARDS": "4",
                "START_DELAY": "30",
            ])
        let launched = Date()
        let (array, merge, printed) = try await Self.launch("bench.sbatch", run, on: cluster)
        let shards = try await cluster.waitForJob(array, timeout: .seconds(60))
        #expect(shards.map(\.state) == Array(repeating: "COMPLETED", count: 4), "\(cluster.describe(shards))")
        let merged = try await cluster.waitForJob(merge, timeout: .seconds(60))
        #expect(merged.map(\.state) == ["COMPLETED"], "\(cluster.describe(merged))")

        let outputDirectory = "\(run.folder)/curlew-bench-\(array)"
        var startTimes: Set<String> = []
        for task in 0..<4 {
            let (slurm, arguments) = try run.call("bench-\(task)")
            #expect(slurm == "task=\(task) count=4 array=\(array)")
            let startAt = try #require(Self.value(of: "--start-at", in: arguments))
            startTimes.insert(startAt)
            #expect(
                arguments == [
                    "bench", "http://127.0.0.1:9/small", "-n", "200000", "-c", "8", "--output-dir", outputDirectory,
                    "--start-at", startAt,
                ])
        }
        #expect(startTimes.count == 1, "every shard starts at the same second: \(startTimes)")
        let startAt = try #require(
            startTimes.first.flatMap { ISO8601DateFormatter().date(from: $0) }, "not ISO 8601: \(startTimes)")
        #expect(abs(startAt.timeIntervalSince(launched) - 30) < 5, "START_AT \(startAt), launched \(launched)")
        #expect(printed.contains("load starts at \(startTimes.first!)"))

        #expect(try run.call("merge-none").arguments == ["merge", outputDirectory, "--json"])
        #expect(
            try run.mergeSaw() == (0..<4).map { "bench-shard-\($0)-of-4.json" }, "the merge ran after every shard wrote"
        )
    }

    @Test func uploadLauncherGivesEveryShardTheJournalThenMerges() async throws {
        let cluster = try await SlurmCluster.shared()
        let run = try StubRun(
            cluster, "upload-launcher",
            [
                "SOURCE": "/data/photos", "DEST": "http://127.0.0.1:9/dav/photos/", "CONCURRENCY": "3", "SHARDS": "4",
                // Passed on word by word and not globbed: the job's folder holds curlew-stub, which curlew-* would match.
                "EXTRA_ARGS": "--include curlew-*  --rate 5",
            ])
        let (array, merge, _) = try await Self.launch("upload.sbatch", run, on: cluster)
        let shards = try await cluster.waitForJob(array, timeout: .seconds(60))
        #expect(shards.map(\.state) == Array(repeating: "COMPLETED", count: 4), "\(cluster.describe(shards))")
        let merged = try await cluster.waitForJob(merge, timeout: .seconds(60))
        #expect(merged.map(\.state) == ["COMPLETED"], "\(cluster.describe(merged))")

        let outputDirectory = "\(run.folder)/curlew-upload-\(array)"
        for task in 0..<4 {
            let (slurm, arguments) = try run.call("upload-\(task)")
            #expect(slurm == "task=\(task) count=4 array=\(array)")
            // One JOURNAL for the run: curlew makes it JOURNAL.shard-I-of-N in each shard.
            #expect(
                arguments == [
                    "upload", "/data/photos", "http://127.0.0.1:9/dav/photos/", "--concurrency", "3",
                    "--journal", outputDirectory + "/upload.journal", "--output-dir", outputDirectory, "--include",
                    "curlew-*", "--rate", "5",
                ])
        }
        #expect(try run.call("merge-none").arguments == ["merge", outputDirectory, "--json"])
        #expect(try run.mergeSaw() == (0..<4).map { "upload-shard-\($0)-of-4.json" })
    }

    @Test func benchShardsSubmittedWithSbatchAloneAgreeOnTheStartFromTheSubmitTime() async throws {
        let cluster = try await SlurmCluster.shared()
        let run = try StubRun(cluster, "bench-direct", ["TARGET": "http://127.0.0.1:9/small", "START_DELAY": "45"])
        let before = Int(Date().timeIntervalSince1970)
        let array = try await cluster.submit(
            script: Self.path("deploy/slurm/bench.sbatch"), arguments: ["--array=0-1"], environment: run.environment,
            workingDirectory: run.folder)
        let after = Int(Date().timeIntervalSince1970)
        let shards = try await cluster.waitForJob(array, timeout: .seconds(60))
        #expect(shards.map(\.state) == ["COMPLETED", "COMPLETED"], "\(cluster.describe(shards))")

        let calls = try (0..<2).map { try run.call("bench-\($0)") }
        #expect(calls.map(\.slurm) == ["task=0 count=2 array=\(array)", "task=1 count=2 array=\(array)"])
        let starts = calls.map { Self.value(of: "--start-at", in: $0.arguments).flatMap { Int($0) } }
        #expect(starts[0] != nil && starts[0] == starts[1], "Unix seconds, the same in both: \(starts)")
        #expect((before + 45...after + 45).contains(starts[0] ?? 0))
        // The defaults: -n 1000000 -c 64, and the output beside the submission.
        #expect(
            calls[0].arguments.prefix(7) == [
                "bench", "http://127.0.0.1:9/small", "-n", "1000000", "-c", "64", "--output-dir",
            ])
        #expect(Self.value(of: "--output-dir", in: calls[0].arguments) == "\(run.folder)/curlew-bench-\(array)")
    }
}
