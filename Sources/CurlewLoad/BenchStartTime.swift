package import Foundation

/// `--start-at`: the wall-clock time every shard of a run starts at, in seconds since 1970 (`1795514400.5`) or ISO
/// 8601 (`2026-11-24T10:00:00Z`, fractional seconds allowed).
package enum BenchStartTime {
    /// The last instant accepted, 9999-12-31T23:59:59Z: the end of what ISO 8601's four-digit years write, and far
    /// below what a wait in nanoseconds can hold.
    package static let latest = Date(timeIntervalSince1970: 253_402_300_799)

    /// The instant `text` names; nil if it names none, or one at or before 1970 or after ``latest``.
    package static func parse(_ text: String) -> Date? {
        let text = text.trimmingCharacters(in: .whitespaces)
        let date: Date
        if let seconds = Double(text) {
            guard seconds.isFinite, seconds > 0 else { return nil }
            date = Date(timeIntervalSince1970: seconds)
        } else {
            // ICU, under ISO8601DateFormatter, traps (an integer division fault) on a fraction of many digits:
            // no field of an ISO 8601 time needs more than 9 (nanoseconds).
            guard text.utf8.count <= 64, !hasDigitRun(longerThan: 9, in: text) else { return nil }
            let formatter = ISO8601DateFormatter()
            var parsed = formatter.date(from: text)
            if parsed == nil {
                formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                parsed = formatter.date(from: text)
            }
            guard let parsed, parsed.timeIntervalSince1970 > 0 else { return nil }
            date = parsed
        }
        return date <= latest ? date : nil
    }

    private static func hasDigitRun(longerThan limit: Int, in text: String) -> Bool {
        var run = 0
        for byte in text.utf8 {
            run = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? run + 1 : 0
            if run > limit { return true }
        }
        return false
    }

    /// How long to wait from `now` until `start`: zero for a time already past.
    package static func wait(until start: Date, from now: Date) -> Duration {
        let seconds = start.timeIntervalSince(now)
        guard seconds > 0 else { return .zero }
        // Whole seconds and nanoseconds apart: a wait of centuries in nanoseconds alone would not fit in Int64.
        let whole = seconds.rounded(.down)
        return .seconds(Int64(whole)) + .nanoseconds(Int64((seconds - whole) * 1e9))
    }
}
