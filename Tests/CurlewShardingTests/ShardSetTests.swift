import CurlewSharding
import Testing

struct ShardSetTests {
    struct Plan: Codable, Equatable {
        var requests: Int
        var shards: Int
    }

    private func members(
        _ indices: [Int], count: Int = 4, runId: String? = "r1", requests: Int = 100
    ) -> [ShardSet.Member<Plan>] {
        indices.map {
            ShardSet.Member(
                path: "out/s\($0).json", shard: ShardAssignment(index: $0, count: count), runId: runId,
                plan: Plan(requests: requests, shards: count))
        }
    }

    private func failure(_ body: () throws -> Void) -> String {
        do {
            try body()
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test func everyShardOnceOfOneRunIsAWholeRun() throws {
        try ShardSet.check(members([2, 0, 3, 1]))
    }

    @Test func aMissingShardIsNamed() {
        let message = failure { try ShardSet.check(members([0, 2, 3])) }
        #expect(message.contains("1 of 4 shards missing (1/4)"), "\(message)")
    }

    @Test func aShardTwiceIsNamedWithBothFiles() {
        var set = members([0, 1, 2, 3])
        set.append(
            ShardSet.Member(
                path: "again/s1.json", shard: ShardAssignment(index: 1, count: 4), runId: "r1",
                plan: Plan(requests: 100, shards: 4)))
        let message = failure { try ShardSet.check(set) }
        #expect(message.contains("shard 1/4 appears twice: s1.json and s1.json"), "\(message)")
    }

    @Test func shardsOfAnotherRunAreRefusedByIdOrByPlan() {
        let otherID = failure { try ShardSet.check(members([0, 1]) + members([2, 3], runId: "r2")) }
        #expect(
            otherID.contains("different runs") && otherID.contains("run r1") && otherID.contains("run r2"), "\(otherID)"
        )
        let otherPlan = failure { try ShardSet.check(members([0, 1]) + members([2, 3], requests: 200)) }
        #expect(otherPlan.contains("differ in requests (100 vs 200)"), "\(otherPlan)")
        let otherCount = failure { try ShardSet.check(members([0, 1]) + members([2], count: 3)) }
        #expect(otherCount.contains("shards (4 vs 3)"), "\(otherCount)")
        #expect(failure { try ShardSet.check([ShardSet.Member<Plan>]()) }.contains("nothing to merge"))
    }
}
