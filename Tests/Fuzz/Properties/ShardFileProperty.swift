import CurlewSharding
import Foundation

@testable import CurlewLoad

/// The shard results `curlew merge` reads (`bench-shard-I-of-N.json` with the run's record, its histogram's JSON and
/// its `--hdr-log`), through `BenchShardResult.load` and `BenchMerge`.
///
/// Shards are written as `curlew bench --output-dir` writes them (the summary and histogram as JSON with sorted keys,
/// the interval log by `HdrHistogramLogWriter`), from intervals of random latencies and failures. Untouched, they
/// merge into the sum of their counts: requests, failures, latencies bucket by bucket, and intervals. With one
/// file changed (a byte flipped, cut short, bytes inserted, or a number replaced by another: huge, negative,
/// fractional), the merge is refused with a `BenchMergeError` that says why, or its counts are still consistent:
/// each histogram's total is the sum of its counts, the summary's requests are the histogram's total, and the
/// merged latencies are the sum of the shards' as loaded. Never a crash, a hang, or a count that wrapped around.
enum ShardFileProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let mutated = input.byte() & 1 == 1
        let directory = NSTemporaryDirectory() + "curlew-fuzz-shards-\(getpid())-\(UUID().uuidString)"
        guard (try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)) != nil
        else { return "cannot create \(directory)" }
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let count = 1 + input.number(below: 3)
        var written: [(summaryPath: String, requests: Int, failed: Int, counts: HdrLogProperty.Counts)] = []
        for index in 0..<count {
            do {
                written.append(try writeShard(index: index, of: count, from: &input, in: directory))
            } catch {
                return "shard \(index) cannot be written: \(error)"
            }
        }
        if mutated {
            let files = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
            guard !files.isEmpty else { return "no files written" }
            mutate(directory + "/" + files[input.number(below: files.count)], with: &input)
        }

        let merged: BenchMerge
        var loaded: [BenchShardResult] = []
        do {
            for shard in written { loaded.append(try BenchShardResult.load(path: shard.summaryPath)) }
            merged = try BenchMerge(loaded, thresholds: [])
        } catch {
            return mutated && !error.description.isEmpty ? nil : "the merge is refused: \(error)"
        }
        for shard in loaded {
            if let failure = HdrLogProperty.inconsistency(shard.histogram) { return "\(shard.path): \(failure)" }
            for interval in shard.intervals {
                if let failure = HdrLogProperty.inconsistency(interval.histogram) {
                    return "\(shard.path), an interval: \(failure)"
                }
            }
            if shard.histogram.totalCount != UInt64(exactly: shard.summary.requests) {
                return "\(shard.path): \(shard.summary.requests) requests, \(shard.histogram.totalCount) latencies"
            }
        }
        if let failure = HdrLogProperty.inconsistency(merged.histogram) { return "the merged histogram: \(failure)" }
        if merged.histogram.totalCount != UInt64(exactly: merged.summary.requests) {
            return "merged: \(merged.summary.requests) requests, \(merged.histogram.totalCount) latencies"
        }
        let loadedCounts = loaded.map { HdrLogProperty.counts(of: $0.histogram) }
            .reduce(into: HdrLogProperty.Counts()) { $0.merge($1, uniquingKeysWith: +) }
        if HdrLogProperty.counts(of: merged.histogram) != loadedCounts {
            return "the merged latencies are not the sum of the shards'"
        }
        if mutated { return nil }

        let requests = written.map(\.requests).reduce(0, +)
        let failed = written.map(\.failed).reduce(0, +)
        let counts = written.map(\.counts).reduce(into: HdrLogProperty.Counts()) { $0.merge($1, uniquingKeysWith: +) }
        if merged.summary.requests != requests || merged.summary.failed != failed {
            return
                "merged \(merged.summary.requests) requests (\(merged.summary.failed) failed), written \(requests) (\(failed))"
        }
        if loadedCounts != counts { return "the shards' latencies do not read back as written" }
        let intervalRequests = merged.intervals.map(\.requests).reduce(0, +)
        let intervalFailed = merged.intervals.map(\.failed).reduce(0, +)
        if intervalRequests != requests || intervalFailed != failed {
            return "merged intervals hold \(intervalRequests) requests (\(intervalFailed) failed), written \(requests)"
        }
        return nil
    }

    private static func writeShard(
        index: Int, of count: Int, from input: inout FuzzInput, in directory: String
    ) throws -> (summaryPath: String, requests: Int, failed: Int, counts: HdrLogProperty.Counts) {
        let shard = ShardAssignment(index: index, count: count)
        var tally = BenchTally()
        var intervals: [BenchInterval] = []
        var totalFailed = 0
        for number in 0..<input.number(below: 4) {
            var histogram = BenchTally.emptyHistogram()
            for _ in 0..<input.number(below: 4) {
                let value = UInt64(input.number(below: 1 << 16)) << UInt64(input.byte() % 16)
                _ = histogram.record(value, count: UInt64(input.byte()) + 1)
            }
            let requests = Int(histogram.totalCount)
            let failed = input.number(below: requests + 1)
            totalFailed += failed
            var statusCounts: [Int: Int] = [:]
            if requests > failed { statusCounts[200] = requests - failed }
            if failed > 0 { statusCounts[503] = failed }
            tally.histogram.add(histogram)
            for (code, count) in statusCounts { tally.statusCounts[code] += count }
            if failed > 0 { tally.failures["HTTP 503", default: 0] += failed }
            intervals.append(
                BenchInterval(
                    startSeconds: Double(number), endSeconds: Double(number + 1), histogram: histogram, failed: failed,
                    statusCounts: statusCounts, totalRequests: tally.requests, totalFailed: totalFailed))
        }
        tally.succeeded = tally.requests - totalFailed
        let result = BenchResult(tally: tally, elapsed: .seconds(intervals.count))
        var summary = BenchSummary(
            result: result, url: "http://127.0.0.1:8080/", method: "GET", connections: 2, loops: 1,
            latencyFromIntendedTime: false, rate: nil, targets: nil)
        summary.shard = shard
        summary.runId = "run-1"
        summary.startedAt = 1_795_514_400 + Double(input.byte()) / 100
        let name = "bench-\(shard.fileTag)"
        summary.run = BenchRunRecord(
            plan: BenchRunPlan(
                target: "http://127.0.0.1:8080/", method: "GET", httpVersion: "1.1", targetsOrder: "round-robin",
                intervalSeconds: 1, shards: count),
            intervals: intervals.map(BenchIntervalCounts.init), histogramFile: name + ".histogram.json",
            hdrLogFile: name + ".hlog")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(tally.histogram).write(to: URL(fileURLWithPath: "\(directory)/\(name).histogram.json"))
        let summaryPath = "\(directory)/\(name).json"
        try (encoder.encode(summary) + Data("\n".utf8)).write(to: URL(fileURLWithPath: summaryPath))
        let log = try HdrHistogramLogWriter(
            path: "\(directory)/\(name).hlog", startTime: Date(timeIntervalSince1970: summary.startedAt!))
        for interval in intervals { try log.append(interval) }
        log.close()
        return (summaryPath, tally.requests, totalFailed, HdrLogProperty.counts(of: tally.histogram))
    }

    private static func mutate(_ path: String, with input: inout FuzzInput) {
        guard var file = FileManager.default.contents(atPath: path).map(Array.init), !file.isEmpty else { return }
        let position = input.number(below: file.count)
        switch input.byte() % 4 {
        case 0: file[position] ^= max(input.byte(), 1)
        case 1: file.removeSubrange(position...)
        case 2: file.insert(contentsOf: input.field(), at: position)
        default:
            // A number (the first one at or after the position) replaced by another.
            let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
            guard let start = file[position...].firstIndex(where: isDigit) else { return }
            let end = file[start...].firstIndex { !isDigit($0) } ?? file.endIndex
            let numbers = [
                "0", "-1", "1e300", "0.5", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
                "4611686018427387904", "100001",
            ]
            let choice = input.byte()
            let replacement = choice < 200 ? numbers[Int(choice) % numbers.count] : input.text()
            file.replaceSubrange(start..<end, with: Array(replacement.utf8))
        }
        _ = FileManager.default.createFile(atPath: path, contents: Data(file))
    }
}
