import ArgumentParser
import CurlewLoad
import Foundation

/// `curlew compare BASE NEW`: the change in throughput and latency between two runs, and a regression gate for CI.
struct CompareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "Compare two bench runs: the change in throughput and in each latency percentile, with intervals.",
        discussion: """
            BASE and NEW are each an --output-dir folder of `curlew bench` (its shard files, merged as `curlew merge` \
            does) or a file holding a `curlew bench --json` summary. Folders carry the HdrHistograms and the \
            per-interval counts, so each change comes with a 95 % interval: a bootstrap over the histograms for \
            the percentiles, the spread of the interval rates for throughput. Printed summaries give the change \
            without one.
            --fail-if 'p99 +10%' fails (exit 99) when p99 rose by more than 10 % and, where the change has an \
            interval, the whole interval is above no change; --fail-if 'rps -5%' when throughput fell by more \
            than 5 % likewise. Exit status: 0, 99 when a --fail-if failed, 64 for bad arguments, 1 for an \
            unreadable run.
            """)

    @Argument(help: "The run to compare against: an --output-dir folder or a --json summary file.")
    var base: String

    @Argument(help: "The new run: an --output-dir folder or a --json summary file.")
    var new: String

    @Option(
        name: .customLong("fail-if"),
        help:
            "A regression that fails the comparison (repeatable): 'p99 +10%', 'rps -5%' (rps, p50, p90, p99, p99.9, max)."
    )
    var failIf: [String] = []

    @Flag(help: "Print the comparison as one JSON object.")
    var json = false

    func validate() throws {
        for text in failIf {
            do { _ = try LoadRegressionLimit(parsing: text) } catch { throw ValidationError(error.description) }
        }
    }

    private struct Output: Encodable {
        let base: String
        let new: String
        let changes: [MetricChange]
        let failed: [String]
    }

    func run() throws {
        var limits: [LoadRegressionLimit] = []
        for text in failIf {
            do { limits.append(try LoadRegressionLimit(parsing: text)) } catch {
                throw ValidationError(error.description)
            }
        }
        let baseRun: ComparedRun
        let newRun: ComparedRun
        do {
            baseRun = try ComparedRun.load(base)
            newRun = try ComparedRun.load(new)
        } catch {
            throw CommandFailure(error.description)
        }
        let changes = MetricChange.compare(baseRun, newRun)
        let failed = limits.filter { limit in changes.contains { limit.isExceeded(by: $0) } }.map { $0.description }
        if json {
            print(try jsonLine(Output(base: base, new: new, changes: changes, failed: failed)))
        } else {
            print("curlew compare \(base) → \(new)")
            print("metric         base           new     change   95% interval of the change")
            for change in changes {
                let unit = change.metric == "rps" ? "/s" : " µs"
                let interval =
                    if let low = change.low, let high = change.high {
                        String(format: "[%+.1f%%, %+.1f%%]", low * 100, high * 100)
                    } else if change.metric == "max" {
                        "(none: the maximum is one latency)"
                    } else { "(none: a printed summary has no histogram or intervals)" }
                print(
                    String(
                        format: "%-6@ %11.1f%@ %11.1f%@ %+8.1f%%   %@", change.metric as NSString, change.base,
                        unit as NSString, change.new, unit as NSString, change.change * 100, interval as NSString))
            }
            for text in failed { print("FAILED --fail-if '\(text)'") }
        }
        if !failed.isEmpty { throw ExitCode(99) }
    }
}
