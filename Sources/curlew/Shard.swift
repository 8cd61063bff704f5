import ArgumentParser
import Foundation

/// Which part of a run this process does: shard `index` (from 0) of `count`.
///
/// A run is split so that the shards together do exactly what one process would have done: request `k` of the
/// whole run (and worker `w`, and file `f`) belongs to shard `k mod count`. Interleaving rather than cutting the
/// run into blocks keeps every shard's load spread over the whole window and its remainders spread over the
/// shards, and it keeps the open model's schedule exact: each shard sends its requests at the times the
/// unsharded run would have (docs/design/0015-shards.md).
struct ShardAssignment: Sendable, Equatable, Codable, CustomStringConvertible {
    var index: Int
    var count: Int

    /// The whole run: one shard.
    static let whole = ShardAssignment(index: 0, count: 1)

    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    /// `I/N`, with `0 <= I < N`.
    static func parse(_ text: String) throws(ParseError) -> ShardAssignment {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
            throw ParseError(description: "--shard \(text.debugDescription) is not I/N (for example 0/4)")
        }
        return try checked(index: index, count: count, source: "--shard \(text)")
    }

    static func checked(index: Int, count: Int, source: String) throws(ParseError) -> ShardAssignment {
        guard count >= 1, count <= 100_000 else {
            throw ParseError(description: "\(source): the shard count must be between 1 and 100000")
        }
        guard index >= 0, index < count else {
            throw ParseError(
                description: "\(source): shard \(index) is not one of 0…\(count - 1) (shards count from 0)")
        }
        return ShardAssignment(index: index, count: count)
    }

    /// The shard a scheduler assigned through the environment, or nil when none did.
    ///
    /// - Slurm job arrays: `SLURM_ARRAY_TASK_ID`, counted from `SLURM_ARRAY_TASK_MIN` (an array `--array=1-4` is
    ///   shards 0…3), out of `SLURM_ARRAY_TASK_COUNT` (or `MAX - MIN + 1`).
    /// - Kubernetes Indexed Jobs: `JOB_COMPLETION_INDEX` out of `shards` (`--shards`) or `CURLEW_SHARDS`: the pod
    ///   is not told the Job's completion count.
    static func fromEnvironment(_ environment: [String: String], shards: Int?) throws(ParseError) -> ShardAssignment? {
        func integer(_ name: String) throws(ParseError) -> Int? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            guard let value = Int(text) else {
                throw ParseError(description: "\(name)=\(text.debugDescription) is not a number")
            }
            return value
        }
        if let task = try integer("SLURM_ARRAY_TASK_ID") {
            let minimum = try integer("SLURM_ARRAY_TASK_MIN") ?? 0
            var count = try integer("SLURM_ARRAY_TASK_COUNT")
            if count == nil, let maximum = try integer("SLURM_ARRAY_TASK_MAX") { count = maximum - minimum + 1 }
            guard let count else {
                throw ParseError(
                    description:
                        "SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX")
            }
            // An array with a step (--array=0-6:2) has holes: its task ids are not shard numbers.
            if let maximum = try integer("SLURM_ARRAY_TASK_MAX"), maximum - minimum + 1 != count {
                throw ParseError(
                    description:
                        "the Slurm array \(minimum)-\(maximum) has \(count) tasks: shards need consecutive task ids (--array=0-\(count - 1))"
                )
            }
            return try checked(index: task - minimum, count: count, source: "SLURM_ARRAY_TASK_ID=\(task)")
        }
        if let index = try integer("JOB_COMPLETION_INDEX") {
            let fromEnvironment = try integer("CURLEW_SHARDS")
            guard let count = shards ?? fromEnvironment else {
                throw ParseError(
                    description:
                        "JOB_COMPLETION_INDEX is set: give the Job's completions as --shards N or CURLEW_SHARDS")
            }
            return try checked(index: index, count: count, source: "JOB_COMPLETION_INDEX=\(index)")
        }
        return nil
    }

    /// How many of `total` items (numbered from 0) fall to this shard: those numbered `index`, `index + count`, ….
    func share(of total: Int) -> Int {
        total <= index ? 0 : (total - index - 1) / count + 1
    }

    /// The number in the whole run of this shard's item number `local`.
    func globalNumber(ofLocal local: Int) -> Int {
        local * count + index
    }

    /// Whether a file of an upload belongs to this shard: by a hash of its path relative to the source, so adding
    /// files moves no other file to another shard, and every shard decides alone, without a shared listing.
    func owns(relativePath: String) -> Bool {
        count == 1 || Int(Self.stableHash(relativePath) % UInt64(count)) == index
    }

    /// FNV-1a (64 bits) of the UTF-8 bytes: fixed by its specification, unlike `Hasher`, which is seeded per
    /// process.
    static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    var isWhole: Bool { count == 1 }

    /// The summary row that places a result in a sharded run: this process's shard, or how many shards a merge
    /// adds up; nil for an unsharded run. bench and upload print the same row.
    static func summaryRow(
        shard: ShardAssignment?, runId: String?, shardsMerged: Int?
    ) -> (label: String, value: String)? {
        if let shardsMerged { return ("shards", "\(shardsMerged) merged" + (runId.map { " (run \($0))" } ?? "")) }
        if let shard { return ("shard", "\(shard)" + (runId.map { " of run \($0)" } ?? "")) }
        return nil
    }

    /// `shard-2-of-4`: names of per-shard files.
    var fileTag: String { "shard-\(index)-of-\(count)" }

    var description: String { "\(index)/\(count)" }
}

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
