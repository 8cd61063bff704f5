package import Foundation

/// An ISO 8601 time (`2026-11-24T10:00:00Z`, fractional seconds allowed), read without trusting its text: the one
/// parser for times users give (`curlew bench --start-at`) and servers send (S3's `Initiated`).
package enum ISO8601Time {
    /// The instant `text` names, or nil.
    package static func date(_ text: String) -> Date? {
        // ICU, under ISO8601DateFormatter, traps (an integer division fault) on a fraction of many digits:
        // no field of an ISO 8601 time needs more than 9 (nanoseconds).
        guard text.utf8.count <= 64, !hasDigitRun(longerThan: 9, in: text) else { return nil }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    private static func hasDigitRun(longerThan limit: Int, in text: String) -> Bool {
        var run = 0
        for byte in text.utf8 {
            run = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? run + 1 : 0
            if run > limit { return true }
        }
        return false
    }
}
