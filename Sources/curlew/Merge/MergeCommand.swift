import ArgumentParser
import CurlewLoad
import CurlewSharding
import CurlewUpload
import Foundation

struct MergeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Add up the results of a sharded `curlew bench` or `curlew upload` run into the run's result.",
        discussion: """
            Give the shards' --output-dir files, or the directories holding them. bench: counts and bytes are \
            summed, latency percentiles come from the sum of the shards' HdrHistograms (exact, not averaged), and \
            intervals are lined up on wall-clock time. The shards' thresholds, and any given here, are evaluated on \
            the merge. upload: counts, bytes and failures are summed.

            The merge refuses inputs of different runs (another run id or other options) and a run with a shard \
            missing or twice, naming the files.

            Exit status: as `curlew bench` for bench results (0, 98 when no request succeeded, 99 when a threshold \
            failed, 130 when a shard was interrupted), as `curlew upload` for upload results (1 when a file \
            failed); 1 when the inputs cannot be merged.
            """
    )

    @Argument(help: "Shard result files (bench-shard-I-of-N.json, upload-shard-I-of-N.json) or directories of them.")
    var inputs: [String]

    @Flag(help: "Print the merged summary as one JSON object on stdout.")
    var json = false

    @Option(help: ArgumentHelp("bench: write the merged run's HTML report here.", valueName: "path.html"))
    var report: String?

    @Option(
        name: .customLong("threshold"),
        help: ArgumentHelp(
            "bench: one more pass/fail rule for the merge, as `curlew bench --threshold` (repeatable).",
            valueName: "rule"))
    var thresholdTexts: [String] = []

    func validate() throws {
        _ = try parsedThresholds()
    }

    private func parsedThresholds() throws -> [LoadThreshold] {
        do {
            var thresholds: [LoadThreshold] = []
            for text in thresholdTexts { thresholds += try LoadThreshold.parseList(text) }
            return thresholds
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let files = try ShardSet.resultFiles(in: inputs)
        // A file named for neither kind (a shard's `--json` output saved by hand) is told by its content.
        let benchCount = files.filter { file in
            let name = (file as NSString).lastPathComponent
            if name.hasPrefix("bench") { return true }
            if name.hasPrefix("upload") { return false }
            return BenchShardResult.isBenchSummary(path: file)
        }.count
        if benchCount > 0 && benchCount < files.count {
            throw CommandFailure("the inputs mix bench and upload results: merge one run at a time")
        }
        if benchCount > 0 {
            try mergeBench(files)
        } else {
            if report != nil || !thresholdTexts.isEmpty {
                throw ValidationError("--report and --threshold apply to bench results")
            }
            try mergeUpload(files)
        }
    }

    private func mergeBench(_ files: [String]) throws {
        let thresholds = try parsedThresholds()
        var shards: [BenchShardResult] = []
        let merge: BenchMerge
        do {
            for file in files { shards.append(try BenchShardResult.load(path: file)) }
            merge = try BenchMerge(shards, thresholds: thresholds)
        } catch {
            throw CommandFailure(error.description)
        }
        var summary = merge.summary
        summary.exitStatus = BenchExitStatus.of(
            interrupted: summary.interrupted, requests: summary.requests, succeeded: summary.succeeded,
            thresholds: summary.thresholds)
        if let report {
            let started = Date(timeIntervalSince1970: summary.startedAt ?? 0)
            var parameters: [(String, String)] = [
                ("target", "\(merge.plan.method) \(merge.plan.target)"),
                ("shards", "\(shards.count)" + (summary.runId.map { ", run \($0)" } ?? "")),
                ("started", ISO8601DateFormatter().string(from: started)),
                ("interval", String(format: "%g s", merge.plan.intervalSeconds)),
            ]
            if let requests = merge.plan.requests { parameters.append(("requests", formatCount(requests))) }
            if let stages = merge.plan.stages { parameters.append(("stages", stages)) }
            if let rate = merge.plan.rate { parameters.append(("rate", String(format: "%g requests/s", rate))) }
            let page = BenchReport(
                title: "curlew merge: \(shards.count) shards of \(merge.plan.target)", parameters: parameters,
                summary: summary,
                intervals: merge.intervals, histogram: merge.histogram)
            do {
                try page.html.write(toFile: report, atomically: true, encoding: .utf8)
            } catch {
                throw CommandFailure("cannot write --report \(report.debugDescription): \(error.localizedDescription)")
            }
            summary.report = report
        }
        if json { print(try jsonLine(summary)) } else { printLine(summary.text) }
        if summary.exitStatus != BenchExitStatus.success { throw ExitCode(summary.exitStatus) }
    }

    private func mergeUpload(_ files: [String]) throws {
        var shards: [(path: String, summary: UploadSummary)] = []
        for file in files {
            do {
                var summary = try JSONDecoder().decode(
                    UploadSummary.self, from: try Data(contentsOf: URL(fileURLWithPath: file)))
                summary.redactURLs()
                shards.append((file, summary))
            } catch {
                throw CommandFailure("\(file.debugDescription) is not a curlew upload result: \(error)")
            }
        }
        var members: [ShardSet.Member<UploadRunPlan>] = []
        for (path, summary) in shards {
            guard let record = summary.run else {
                throw CommandFailure(
                    "\(path.debugDescription) is a summary without the run's record: write shard results with --output-dir"
                )
            }
            members.append(
                ShardSet.Member(path: path, shard: summary.shard ?? .whole, runId: summary.runId, plan: record.plan))
        }
        try ShardSet.check(members)
        let summary = UploadSummary(merging: shards.map(\.summary))
        if json { print(try jsonLine(summary)) } else { printLine(summary.text) }
        if summary.interrupted { throw ExitCode(130) }
        if summary.failed > 0 { throw ExitCode(1) }
    }
}
