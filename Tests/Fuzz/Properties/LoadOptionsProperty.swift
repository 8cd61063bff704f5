import CurlewEngine
import CurlewLoad
import CurlewSharding
import Foundation

/// The parsers behind `curlew bench` and `curlew upload` options: `--threshold`, `--check`, request templates and
/// `--data` CSV, `--stages`, durations, sizes,
/// `--shard` (and the schedulers' environment variables that stand for it), `--start-at` and `--connect-to`.
///
/// The first byte picks the parser, the rest is the option's text. Garbage is refused (nil, or a thrown error with
/// a message that quotes the option), never a crash or a hang; what is accepted is in range and reads back the
/// same from its rendering.
enum LoadOptionsProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let parser = input.byte() % 8
        if parser == 7 { return checkShardEnvironment(&input) }
        let text = String(decoding: input.rest(), as: UTF8.self)
        switch parser {
        // `--check` shares the thresholds' byte: its grammar is another rule language, and the corpus stays valid.
        // So do request templates and `--data` CSV.
        case 0: return checkThresholds(text) ?? checkCheck(text) ?? checkTemplate(text)
        case 1: return checkStages(text)
        case 2: return checkDuration(text)
        case 3: return checkByteSize(text)
        case 4: return checkShard(text)
        case 5: return checkStartTime(text)
        default: return checkConnectTo(text)
        }
    }

    private static func checkThresholds(_ text: String) -> String? {
        let rules: [LoadThreshold]
        do {
            rules = try LoadThreshold.parseList(text)
        } catch {
            return error.description.contains("threshold") ? nil : "a refusal that names no threshold: \(error)"
        }
        for rule in rules {
            guard rule.limit.isFinite, rule.limit >= 0 else { return "\(rule) accepted with the limit \(rule.limit)" }
            if rule.metric.isPercentage && rule.limit > 100 { return "\(rule) accepted above 100%" }
            // The rule's text is what a merge reads back from a shard's summary: it must mean the same rule.
            guard let again = try? LoadThreshold(rule.text) else { return "\(rule.text.debugDescription) reads once" }
            if again.metric != rule.metric || again.comparison != rule.comparison || again.limit != rule.limit {
                return "\(rule.text.debugDescription) reads back as another rule"
            }
        }
        return nil
    }

    /// `--check`: refused with a message that quotes it, or accepted reading back as the same check.
    private static func checkCheck(_ text: String) -> String? {
        let check: LoadCheck
        do {
            check = try LoadCheck(text)
        } catch {
            return error.description.hasPrefix("check ") ? nil : "a refusal that names no check: \(error)"
        }
        guard let again = try? LoadCheck(check.text) else { return "\(check.text.debugDescription) reads once" }
        if again.needsBody != check.needsBody || again.text != check.text {
            return "\(check.text.debugDescription) reads back as another check"
        }
        return nil
    }

    /// A template whose URL, header value and body are the text, filled from the text read as CSV (or from a fixed
    /// row): refused with a message, or accepted making a valid request for every ticket tried.
    private static func checkTemplate(_ text: String) -> String? {
        let data: LoadData
        do {
            data = try LoadData.csv(text)
            if let row = data.rows.first(where: { $0.count != data.columns.count }) {
                return "a CSV row of \(row.count) fields under \(data.columns.count) columns"
            }
        } catch {
            if error.description.isEmpty { return "a CSV refusal without a message" }
            data = LoadData(columns: ["id"], rows: [["1"]])
        }
        let template: LoadRequestTemplate
        do {
            template = try LoadRequestTemplate(
                method: .post, url: "http://127.0.0.1/" + text, headers: [("X-T", text)], body: text, data: data,
                rows: .once, seed: 1)
        } catch {
            return error.description.isEmpty ? "a template refusal without a message" : nil
        }
        for ticket in 0..<min(data.rows.count, 4) {
            guard case .success = template.request(ticket: ticket) else { return "ticket \(ticket) made no request" }
        }
        return nil
    }

    private static func checkStages(_ text: String) -> String? {
        let stages: BenchStages
        do {
            stages = try BenchStages.parse(text)
        } catch {
            return error.description.hasPrefix("--stages") ? nil : "a refusal that names no option: \(error)"
        }
        switch stages {
        case .arrivals(let schedule):
            guard let total = schedule.totalSeconds, total.isFinite, total > 0 else {
                return "\(text.debugDescription) accepted lasting \(String(describing: schedule.totalSeconds)) s"
            }
            // Requests are due in order, within the run.
            var previous = 0.0
            for request in 0..<min(schedule.totalRequests, 64) {
                guard let due = schedule.intendedSeconds(ofRequest: request) else {
                    return "request \(request) of \(schedule.totalRequests) has no time"
                }
                if !(due >= previous && due <= total + 1e-6) {
                    return "request \(request) is due at \(due) s, after \(previous) s, in a run of \(total) s"
                }
                previous = due
            }
        case .concurrency(let schedule):
            guard schedule.totalSeconds.isFinite, schedule.totalSeconds > 0, schedule.maxConcurrency > 0,
                schedule.maxConcurrency <= 100_000
            else { return "\(text.debugDescription) accepted as \(schedule)" }
        }
        return nil
    }

    private static func checkDuration(_ text: String) -> String? {
        guard let duration = ScaledNumber.duration(text) else { return nil }
        let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        guard nanoseconds >= 0, nanoseconds < 1_000_000_000_000_000_000 else {
            return "\(text.debugDescription) accepted as \(duration)"
        }
        let rendered = "\(nanoseconds)ns"
        return ScaledNumber.duration(rendered) == duration ? nil : "\(rendered) does not read back as \(duration)"
    }

    private static func checkByteSize(_ text: String) -> String? {
        guard let bytes = ScaledNumber.byteSize(text) else { return nil }
        guard bytes >= 0, bytes < 9_000_000_000_000_000_000 else { return "\(text.debugDescription) is \(bytes) B" }
        for rendered in ["\(bytes)", "\(bytes)B"] where ScaledNumber.byteSize(rendered) != bytes {
            return "\(rendered) does not read back as \(bytes) B"
        }
        return nil
    }

    private static func checkShard(_ text: String) -> String? {
        let shard: ShardAssignment
        do {
            shard = try ShardAssignment.parse(text)
        } catch {
            return error.description.contains("--shard") ? nil : "a refusal that names no option: \(error)"
        }
        if let failure = invalid(shard) { return "\(text.debugDescription): \(failure)" }
        return (try? ShardAssignment.parse(shard.description)) == shard
            ? nil : "\(shard.description) does not read back as \(shard)"
    }

    /// Slurm's and Kubernetes' variables with values from the input (numbers near the edges of Int among them).
    private static func checkShardEnvironment(_ input: inout FuzzInput) -> String? {
        let names = [
            "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_COUNT",
            "JOB_COMPLETION_INDEX", "CURLEW_SHARDS",
        ]
        let edges = ["0", "1", "-1", "\(Int.max)", "\(Int.min)", "100000", "-9223372036854775807"]
        var environment: [String: String] = [:]
        for name in names where input.byte() & 1 == 1 {
            let choice = input.byte()
            environment[name] = choice < 64 ? edges[Int(choice) % edges.count] : input.text()
        }
        let shards = input.byte() & 1 == 1 ? Int(Int16(truncatingIfNeeded: input.number(below: 1 << 16))) : nil
        do {
            guard let shard = try ShardAssignment.fromEnvironment(environment, shards: shards) else { return nil }
            return invalid(shard).map { "\(environment): \($0)" }
        } catch {
            return error.description.isEmpty ? "\(environment) refused without a message" : nil
        }
    }

    private static func invalid(_ shard: ShardAssignment) -> String? {
        (1...100_000).contains(shard.count) && (0..<shard.count).contains(shard.index)
            ? nil : "shard \(shard.index) of \(shard.count) accepted"
    }

    private static func checkStartTime(_ text: String) -> String? {
        guard let date = BenchStartTime.parse(text) else { return nil }
        guard date.timeIntervalSince1970 > 0, date <= BenchStartTime.latest else {
            return "\(text.debugDescription) accepted as \(date.timeIntervalSince1970)"
        }
        // The wait from the epoch to the start is the whole interval, and never traps.
        let wait = BenchStartTime.wait(until: date, from: Date(timeIntervalSince1970: 0))
        if abs(Double(wait.components.seconds) - date.timeIntervalSince1970) > 1 {
            return "a wait of \(wait) for \(date.timeIntervalSince1970)"
        }
        // Both notations read back to the same instant, to the millisecond ISO 8601 keeps.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for rendered in ["\(date.timeIntervalSince1970)", formatter.string(from: date)] {
            guard let again = BenchStartTime.parse(rendered), abs(again.timeIntervalSince(date)) < 0.001 else {
                return "\(rendered) does not read back as \(date.timeIntervalSince1970)"
            }
        }
        return nil
    }

    private static func checkConnectTo(_ text: String) -> String? {
        let entry: BenchConnectTo
        do {
            entry = try BenchConnectTo.parse(text)
        } catch {
            return error.description.hasPrefix("--connect-to") ? nil : "a refusal that names no option: \(error)"
        }
        if entry.description.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false).count < 4 {
            return "\(text.debugDescription) accepted with fewer than four fields"
        }
        guard let again = try? BenchConnectTo.parse(entry.description), again == entry else {
            return "\(entry.description.debugDescription) does not read back as \(text.debugDescription)"
        }
        return nil
    }
}
