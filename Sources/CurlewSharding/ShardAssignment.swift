import Foundation

/// Which part of a run this process does: shard `index` (from 0) of `count`.
///
/// A run is split so that the shards together do exactly what one process would have done: request `k` of the
/// whole run (and worker `w`, and file `f`) belongs to shard `k mod count`. Interleaving rather than cutting the
/// run into blocks keeps every shard's load spread over the whole window and its remainders spread over the
/// shards, and it keeps the open model's schedule exact: each shard sends its requests at the times the
/// unsharded run would have (docs/design/0015-shards.md).
public struct ShardAssignment: Sendable, Equatable, Codable, CustomStringConvertible {
    /// This shard's number, from 0.
    public var index: Int
    /// How many shards the run has.
    public var count: Int

    /// Shard `index` of `count`, unchecked; ``checked(index:count:source:)`` validates.
    public init(index: Int, count: Int) {
        self.index = index
        self.count = count
    }

    /// The whole run: one shard.
    public static let whole = ShardAssignment(index: 0, count: 1)

    /// A shard that is not one: the text names the input and what is wrong with it.
    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
    }

    /// `I/N`, with `0 <= I < N`.
    public static func parse(_ text: String) throws(ParseError) -> ShardAssignment {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
            throw ParseError(description: "--shard \(text.debugDescription) is not I/N (for example 0/4)")
        }
        return try checked(index: index, count: count, source: "--shard \(text)")
    }

    /// Shard `index` of `count`, or an error naming `source` when the index or count is out of range.
    public static func checked(index: Int, count: Int, source: String) throws(ParseError) -> ShardAssignment {
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
    public static func fromEnvironment(
        _ environment: [String: String], shards: Int?
    ) throws(ParseError) -> ShardAssignment? {
        // Task ids, indexes and counts are never negative, and bounding them keeps the arithmetic on them (a
        // count from MIN and MAX) from overflowing on any value.
        func integer(_ name: String) throws(ParseError) -> Int? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            guard let value = Int(text), (0...Int(Int32.max)).contains(value) else {
                throw ParseError(
                    description: "\(name)=\(text.debugDescription) is not a number from 0 to \(Int32.max)")
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
    public func share(of total: Int) -> Int {
        total <= index ? 0 : (total - index - 1) / count + 1
    }

    /// The number in the whole run of this shard's item number `local`.
    public func globalNumber(ofLocal local: Int) -> Int {
        local * count + index
    }

    /// Whether a file of an upload belongs to this shard: by a hash of its path relative to the source, so adding
    /// files moves no other file to another shard, and every shard decides alone, without a shared listing.
    public func owns(relativePath: String) -> Bool {
        count == 1 || Int(Self.stableHash(relativePath) % UInt64(count)) == index
    }

    /// FNV-1a (64 bits) of the UTF-8 bytes: fixed by its specification, unlike `Hasher`, which is seeded per
    /// process.
    public static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// Whether this is the whole run (one shard).
    public var isWhole: Bool { count == 1 }

    /// `shard-2-of-4`: names of per-shard files.
    public var fileTag: String { "shard-\(index)-of-\(count)" }

    /// `2/4`.
    public var description: String { "\(index)/\(count)" }
}
