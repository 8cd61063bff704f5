extension Duration {
    /// Whole milliseconds, towards zero; `Int64.max` (or `.min`) for a duration too long for them, such as
    /// `.seconds(Int64.max)`, which means "no limit" to the engine and a server may ask for in `Retry-After`.
    var saturatingMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflowed) = seconds.multipliedReportingOverflow(by: 1000)
        let (milliseconds, overflowedAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        guard !overflowed, !overflowedAgain else { return seconds < 0 ? .min : .max }
        return milliseconds
    }

    /// Whether the engine counts this timeout as no limit: its nanoseconds do not fit in 64 bits (a deadline that
    /// far cannot be represented), as with `.seconds(Int64.max)`.
    var isBeyondEngineDeadlines: Bool { saturatingNanoseconds == .max }
}
