import CurlewEngine
import Foundation

/// The soak's verdict and figures, printed as one JSON line after the human summary.
struct SoakReport: Codable {
    struct RSS: Codable {
        var startKiB: Int
        /// The first sample at or after a fifth of the run: pools, caches and allocator arenas have settled.
        var warmKiB: Int
        var warmAtSeconds: Double
        var endKiB: Int
        var maxKiB: Int
        var growthKiB: Int
        var growthLimitKiB: Int
        var samples: [RSSSamples.Sample]
    }

    var passed: Bool
    var failures: [String]
    var seconds: Int
    var build: String
    var libcurl: String
    var requests: Int
    var succeeded: Int
    var wrongBodies: Int
    var libcurlTruncations: Int
    var hung: Int
    var stuckAtEnd: Int
    var untypedErrors: Int
    var normalRequestsFailed: Int
    var freshConnectionRetries: Int
    var failuresByCause: [String: Int]
    var cells: [String: SoakTally.Cell]
    var rss: RSS?
    var wrongBodyExamples: [SoakTally.WrongBody]
    var untypedExamples: [String]
}

extension Soak {
    /// Prints the summary and the JSON line; returns whether the soak passed.
    static func report(
        options: Options, tally: SoakTally, rss: RSSSamples, build: String, stuckRequests: Int
    ) -> Bool {
        let total = tally.total
        let cells = tally.cells
        let causes = tally.failuresByCause
        var failures: [String] = []
        if total.wrongBodies > 0 { failures.append("\(total.wrongBodies) wrong bodies") }
        if total.hung > 0 { failures.append("\(total.hung) requests hung past \(hangLimit)") }
        if stuckRequests > 0 { failures.append("\(stuckRequests) requests never returned") }
        if total.untypedErrors > 0 { failures.append("\(total.untypedErrors) errors that are not CurlewError") }
        if total.requests == 0 { failures.append("no requests ran") }

        func cellLine(_ name: String, _ cell: SoakTally.Cell) -> String {
            name.padding(toLength: 34, withPad: " ", startingAt: 0)
                + [cell.requests, cell.succeeded, cell.normalFailed, cell.wrongBodies, cell.hung, cell.untypedErrors]
                .map { String($0).leftPadded(to: 10) }.joined()
        }
        print(
            "\n" + "".padding(toLength: 34, withPad: " ", startingAt: 0)
                + ["requests", "succeeded", "normal✗", "wrong", "hung", "untyped"].map { $0.leftPadded(to: 10) }
                .joined())
        for name in cells.keys.sorted() { print(cellLine(name, cells[name]!)) }
        print(cellLine("total", total))
        if total.libcurlTruncations > 0 {
            print(
                "known libcurl limitation: \(total.libcurlTruncations) rst-no-error requests (RST_STREAM NO_ERROR before "
                    + "END_STREAM, no content-length) returned as complete with the first part of their body "
                    + "(curl issue 6015); not counted as wrong bodies")
        }
        print(
            "connections: \(total.reusedConnections) successful requests on a reused connection, "
                + "\(total.freshConnectionRetries) sent again on a fresh one after meeting a dead one")
        print("\nfailures by cause (route: error code), over every loop and protocol:")
        for (cause, count) in causes.sorted(by: { $0.key < $1.key }) {
            let isNormal = SoakRoute.all.contains { !$0.isFault && cause.hasPrefix($0.kind + " ") }
            print(
                "  \(cause.padding(toLength: 52, withPad: " ", startingAt: 0))\(String(count).leftPadded(to: 9))"
                    + (isNormal ? "   (a normal route)" : ""))
        }
        for example in tally.wrongBodyRecords {
            print("wrong body: \(example)")
        }
        for example in tally.untypedRecords {
            print("untyped error: \(example)")
        }

        var rssFigures: SoakReport.RSS?
        let samples = rss.all
        if let first = samples.first, let last = samples.last {
            let warm = samples.first { $0.seconds >= Double(options.seconds) / 5 } ?? last
            let limit = options.rssGrowthLimitMiB * 1024
            let figures = SoakReport.RSS(
                startKiB: first.kibibytes, warmKiB: warm.kibibytes, warmAtSeconds: warm.seconds,
                endKiB: last.kibibytes, maxKiB: samples.map(\.kibibytes).max()!,
                growthKiB: last.kibibytes - warm.kibibytes, growthLimitKiB: limit, samples: samples)
            rssFigures = figures
            func mebibytes(_ kibibytes: Int) -> String { String(format: "%.1f", Double(kibibytes) / 1024) }
            print("\nRSS (MiB) over time: " + samples.map { mebibytes($0.kibibytes) }.joined(separator: " "))
            print(
                "RSS: start \(mebibytes(figures.startKiB)) MiB, after warm-up (\(Int(warm.seconds)) s) "
                    + "\(mebibytes(figures.warmKiB)) MiB, end \(mebibytes(figures.endKiB)) MiB, max "
                    + "\(mebibytes(figures.maxKiB)) MiB: growth \(mebibytes(figures.growthKiB)) MiB "
                    + "(limit \(options.rssGrowthLimitMiB) MiB)")
            if figures.growthKiB > limit {
                failures.append("RSS grew \(mebibytes(figures.growthKiB)) MiB after the warm-up")
            }
        } else {
            print("\nRSS: not measured (no /proc/self/status)")
        }

        let passed = failures.isEmpty
        print(
            "\ncurlew-soak: \(passed ? "PASS" : "FAIL"): \(total.requests) requests, \(total.succeeded) succeeded, "
                + "\(total.wrongBodies) wrong bodies, \(total.hung) hung"
                + (passed ? "" : " — " + failures.joined(separator: "; ")))
        let summary = SoakReport(
            passed: passed, failures: failures, seconds: options.seconds, build: build,
            libcurl: CurlewClient.libcurlVersion, requests: total.requests, succeeded: total.succeeded,
            wrongBodies: total.wrongBodies, libcurlTruncations: total.libcurlTruncations, hung: total.hung,
            stuckAtEnd: stuckRequests,
            untypedErrors: total.untypedErrors, normalRequestsFailed: total.normalFailed,
            freshConnectionRetries: total.freshConnectionRetries, failuresByCause: causes, cells: cells,
            rss: rssFigures,
            wrongBodyExamples: tally.wrongBodyRecords, untypedExamples: tally.untypedRecords)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let json = try? encoder.encode(summary) {
            print(String(decoding: json, as: UTF8.self))
        }
        return passed
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
