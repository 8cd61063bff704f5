import CurlewEngine
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
            guard let parsed = ISO8601Time.date(text), parsed.timeIntervalSince1970 > 0 else { return nil }
            date = parsed
        }
        return date <= latest ? date : nil
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
