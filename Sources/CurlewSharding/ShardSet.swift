import Foundation

/// What must be the same in every shard of one run, and the check that a set of shard results is one whole run.
public enum ShardSet {
    /// Why a set of shard results is not one whole run; the text names the files.
    public struct Mismatch: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// One shard's result file, as far as the check needs it.
    public struct Member<Plan: Codable & Equatable> {
        /// The result file, named in errors.
        public var path: String
        public var shard: ShardAssignment
        public var runId: String?
        /// The run as asked for, before it was divided: every shard of one run has the same.
        public var plan: Plan

        public init(path: String, shard: ShardAssignment, runId: String?, plan: Plan) {
            self.path = path
            self.shard = shard
            self.runId = runId
            self.plan = plan
        }
    }

    /// Throws, naming the files, unless the members are every shard of one run exactly once: the same run id, the
    /// same plan (which includes the shard count), and each index from 0 to count − 1.
    public static func check<Plan>(_ members: [Member<Plan>]) throws(Mismatch) {
        guard let first = members.first else { throw Mismatch("nothing to merge: no shard results found") }
        let name = { (member: Member<Plan>) in (member.path as NSString).lastPathComponent }
        for member in members.dropFirst() {
            if member.runId != first.runId {
                throw Mismatch(
                    "the inputs come from different runs: \(name(first)) is run \(first.runId ?? "(no id)"), "
                        + "\(name(member)) is run \(member.runId ?? "(no id)")")
            }
            if member.plan != first.plan {
                throw Mismatch(
                    "the inputs come from different runs: \(name(first)) and \(name(member)) differ in "
                        + differences(first.plan, member.plan).joined(separator: ", "))
            }
        }
        let count = first.shard.count
        var seen: [Int: Member<Plan>] = [:]
        for member in members {
            // The plan holds the shard count, so every member has the same one here.
            if let earlier = seen[member.shard.index] {
                throw Mismatch("shard \(member.shard) appears twice: \(name(earlier)) and \(name(member))")
            }
            seen[member.shard.index] = member
        }
        let missing = (0..<count).filter { seen[$0] == nil }
        if !missing.isEmpty {
            let list =
                missing.prefix(20).map { "\($0)/\(count)" }.joined(separator: ", ") + (missing.count > 20 ? ", …" : "")
            throw Mismatch(
                "\(missing.count) of \(count) shards missing (\(list)): the merge of an incomplete run would not be "
                    + "the run's result; re-run those shards or merge the ones of another run")
        }
    }

    /// The top-level fields two plans differ in, with both values.
    package static func differences<Plan: Encodable>(_ left: Plan, _ right: Plan) -> [String] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func fields(_ plan: Plan) -> [String: String] {
            guard let data = try? encoder.encode(plan),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return [:] }
            return object.mapValues { value in
                (try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]))
                    .map { String(decoding: $0, as: UTF8.self) } ?? "\(value)"
            }
        }
        let (a, b) = (fields(left), fields(right))
        return Set(a.keys).union(b.keys).sorted().compactMap { key in
            a[key] == b[key] ? nil : "\(key) (\(a[key] ?? "none") vs \(b[key] ?? "none"))"
        }
    }
}
