import CurlewSharding
import Testing

struct ShardAssignmentTests {
    @Test func shardIsParsedFromIOverNAndCountsFromZero() throws {
        #expect(try ShardAssignment.parse("2/4") == ShardAssignment(index: 2, count: 4))
        #expect(try ShardAssignment.parse("0/1") == .whole)
        for bad in ["4/4", "-1/4", "1/0", "1", "a/b", "1/2/3", ""] {
            #expect(throws: ShardAssignment.ParseError.self, "\(bad)") { try ShardAssignment.parse(bad) }
        }
    }

    @Test func aSlurmArrayAssignsShardsCountedFromItsFirstTask() throws {
        let slurm = [
            "SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_MAX": "7",
            "SLURM_ARRAY_TASK_COUNT": "4",
        ]
        #expect(try ShardAssignment.fromEnvironment(slurm, shards: nil) == ShardAssignment(index: 2, count: 4))
        // Without COUNT, MAX - MIN + 1.
        #expect(
            try ShardAssignment.fromEnvironment(["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MAX": "3"], shards: nil)
                == ShardAssignment(index: 3, count: 4))
        // An array with a step has holes in its task ids: not shard numbers.
        let stepped = [
            "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6",
            "SLURM_ARRAY_TASK_COUNT": "4",
        ]
        #expect(throws: ShardAssignment.ParseError.self) { try ShardAssignment.fromEnvironment(stepped, shards: nil) }
        #expect(try ShardAssignment.fromEnvironment([:], shards: nil) == nil)
    }

    /// MIN -1 and MAX Int.max once trapped computing the array's size (found by the load-options fuzz target).
    @Test(arguments: [
        ["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "-1", "SLURM_ARRAY_TASK_MAX": "9223372036854775807"],
        ["SLURM_ARRAY_TASK_ID": "-9223372036854775808", "SLURM_ARRAY_TASK_COUNT": "4"],
        ["JOB_COMPLETION_INDEX": "0", "CURLEW_SHARDS": "-1"],
    ])
    func schedulerVariablesOutsideTaskNumbersAreRefusedByName(environment: [String: String]) {
        let error = #expect(throws: ShardAssignment.ParseError.self) {
            try ShardAssignment.fromEnvironment(environment, shards: nil)
        }
        #expect(error?.description.contains("is not a number from 0 to 2147483647") == true)
    }

    @Test func aKubernetesIndexedJobNeedsTheShardCountFromOptionOrEnvironment() throws {
        #expect(
            try ShardAssignment.fromEnvironment(["JOB_COMPLETION_INDEX": "1"], shards: 3)
                == ShardAssignment(index: 1, count: 3))
        #expect(
            try ShardAssignment.fromEnvironment(["JOB_COMPLETION_INDEX": "1", "CURLEW_SHARDS": "2"], shards: nil)
                == ShardAssignment(index: 1, count: 2))
        #expect(throws: ShardAssignment.ParseError.self) {
            try ShardAssignment.fromEnvironment(["JOB_COMPLETION_INDEX": "1"], shards: nil)
        }
        #expect(throws: ShardAssignment.ParseError.self) {
            try ShardAssignment.fromEnvironment(["JOB_COMPLETION_INDEX": "3"], shards: 3)
        }
    }

    @Test(arguments: [1, 2, 3, 4, 7])
    func sharesAddUpToTheWholeAndEveryNumberHasOneShard(count: Int) {
        for total in [0, 1, 5, 100, 200_001] {
            let shards = (0..<count).map { ShardAssignment(index: $0, count: count) }
            #expect(shards.reduce(0) { $0 + $1.share(of: total) } == total)
            // The remainder goes one each to the first shards: no shard has two more than another.
            let shares = shards.map { $0.share(of: total) }
            #expect((shares.max() ?? 0) - (shares.min() ?? 0) <= 1)
        }
        // Shard i's local numbers 0, 1, 2, … are the run's i, i + N, i + 2N, …: together each number once.
        var numbers: [Int] = []
        for index in 0..<count {
            let shard = ShardAssignment(index: index, count: count)
            numbers += (0..<shard.share(of: 50)).map { shard.globalNumber(ofLocal: $0) }
        }
        #expect(numbers.sorted() == Array(0..<50))
    }

    @Test func filesGoToShardsByAStableHashOfTheirPath() {
        // FNV-1a's published 64-bit test vectors: the split cannot change between versions or machines.
        #expect(ShardAssignment.stableHash("") == 0xcbf2_9ce4_8422_2325)
        #expect(ShardAssignment.stableHash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(ShardAssignment.stableHash("foobar") == 0x8594_4171_f739_67e8)
        let paths = (0..<1000).map { "dir \($0 % 7)/file \($0).bin" }
        var owners = [Int](repeating: 0, count: paths.count)
        for index in 0..<4 {
            let shard = ShardAssignment(index: index, count: 4)
            for (number, path) in paths.enumerated() where shard.owns(relativePath: path) { owners[number] += 1 }
            // Roughly even: each shard gets a quarter, give or take.
            let owned = paths.filter(shard.owns(relativePath:)).count
            #expect((180...320).contains(owned), "shard \(index) owns \(owned) of 1000")
        }
        #expect(owners.allSatisfy { $0 == 1 }, "every file has exactly one shard")
        #expect(ShardAssignment.whole.owns(relativePath: "anything"))
    }
}
