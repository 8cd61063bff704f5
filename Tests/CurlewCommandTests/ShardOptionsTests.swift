import CurlewSharding
import Foundation
import Testing

@testable import curlew

struct ShardOptionsTests {
    @Test func optionsWinOverTheEnvironmentAndTheRunIdComesFromSlurm() throws {
        let options = try ShardOptions.parse(["--shard", "1/2"])
        let resolved = try options.resolved(environment: [
            "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_JOB_ID": "77",
        ])
        #expect(resolved.shard == ShardAssignment(index: 1, count: 2))
        #expect(resolved.runID == "77")
        #expect(
            try ShardOptions.parse(["--run-id", "mine"]).resolved(environment: ["CURLEW_RUN_ID": "other"]).runID
                == "mine")
        #expect(throws: (any Error).self) {
            try ShardOptions.parse(["--shard", "1/2", "--shards", "3"]).resolved(environment: [:])
        }
        #expect(throws: (any Error).self) { try ShardOptions.parse(["--shards", "3"]).resolved(environment: [:]) }
    }

    @Test func startAtTakesISO8601OrSecondsSince1970() throws {
        #expect(StartTimeArgument(argument: "2026-11-24T10:00:00Z")?.date == Date(timeIntervalSince1970: 1_795_514_400))
        #expect(
            StartTimeArgument(argument: "2026-11-24T10:00:00.500Z")?.date
                == Date(timeIntervalSince1970: 1_795_514_400.5))
        #expect(StartTimeArgument(argument: "1795514400")?.date == Date(timeIntervalSince1970: 1_795_514_400))
        #expect(StartTimeArgument(argument: "tomorrow") == nil)
        #expect(StartTimeArgument(argument: "-5") == nil)
    }

    @Test func outputFilesAreNamedAfterTheShard() {
        #expect(
            ShardOptions.outputPath(
                directory: "out", kind: "bench", shard: ShardAssignment(index: 2, count: 4), suffix: ".json")
                == "out/bench-shard-2-of-4.json")
        #expect(
            ShardOptions.outputPath(directory: "out", kind: "upload", shard: .whole, suffix: ".json")
                == "out/upload.json")
    }
}
