import ArgumentParser
import CurlewSharding
import Foundation

/// The options that place a process in a sharded run, shared by `curlew bench` and `curlew upload`.
struct ShardOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Do shard I of N of the run (I from 0), e.g. 2/4.",
            discussion: """
                Without it, a Slurm job array (SLURM_ARRAY_TASK_ID) or a Kubernetes Indexed Job \
                (JOB_COMPLETION_INDEX, with --shards or CURLEW_SHARDS) assigns the shard.
                """,
            valueName: "I/N"))
    var shard: String?

    @Option(help: "The number of shards when JOB_COMPLETION_INDEX gives only the index (default CURLEW_SHARDS).")
    var shards: Int?

    @Option(
        name: .customLong("run-id"),
        help:
            "Names the run the shards belong to; `curlew merge` refuses shards of different runs (default SLURM_ARRAY_JOB_ID, else CURLEW_RUN_ID)."
    )
    var runID: String?

    @Option(
        name: .customLong("output-dir"),
        help: "Write this process's results here (one file per kind, named after the shard) for `curlew merge`.")
    var outputDirectory: String?

    func validate() throws {
        _ = try resolved()
    }

    /// The shard and run id from the options, else from the environment.
    func resolved(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> (shard: ShardAssignment, runID: String?) {
        do {
            if let shards, shards < 1 { throw ValidationError("--shards must be at least 1") }
            let shard: ShardAssignment
            if let text = self.shard {
                shard = try ShardAssignment.parse(text)
                if let shards, shards != shard.count {
                    throw ValidationError("--shard \(text) and --shards \(shards) disagree")
                }
            } else if let assigned = try ShardAssignment.fromEnvironment(environment, shards: shards) {
                shard = assigned
            } else if shards != nil {
                throw ValidationError("--shards needs --shard I/N or a scheduler's JOB_COMPLETION_INDEX")
            } else {
                shard = .whole
            }
            let runID =
                runID
                ?? [environment["SLURM_ARRAY_JOB_ID"], environment["CURLEW_RUN_ID"]].compactMap { $0 }.first {
                    !$0.isEmpty
                }
            return (shard, runID)
        } catch let error as ShardAssignment.ParseError {
            throw ValidationError(error.description)
        }
    }

    /// The path of a result file in `--output-dir`: `bench-shard-2-of-4.json`, or `bench.json` for an unsharded run.
    static func outputPath(directory: String, kind: String, shard: ShardAssignment, suffix: String) -> String {
        let name = shard.isWhole ? kind : "\(kind)-\(shard.fileTag)"
        return (directory as NSString).appendingPathComponent(name + suffix)
    }

    /// Creates `--output-dir` before anything is sent: a typo should not cost a run.
    static func prepare(directory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw CommandFailure(
                "cannot create --output-dir \(directory.debugDescription): \(error.localizedDescription)")
        }
    }
}

extension ShardAssignment {
    /// The summary row that places a result in a sharded run: this process's shard, or how many shards a merge
    /// adds up; nil for an unsharded run. bench and upload print the same row.
    static func summaryRow(
        shard: ShardAssignment?, runId: String?, shardsMerged: Int?
    ) -> (label: String, value: String)? {
        if let shardsMerged { return ("shards", "\(shardsMerged) merged" + (runId.map { " (run \($0))" } ?? "")) }
        if let shard { return ("shard", "\(shard)" + (runId.map { " of run \($0)" } ?? "")) }
        return nil
    }
}
