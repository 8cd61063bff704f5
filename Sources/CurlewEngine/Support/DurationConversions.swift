extension Duration {
    /// The duration in seconds, for rates and reports (not exact beyond a double's precision).
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole nanoseconds, truncated; negative durations become zero, and those past `UInt64.max` nanoseconds (584
    /// years) `UInt64.max`, so a public API's `.seconds(.max)` is a run that never ends rather than a trap. For
    /// durations counted on ``monotonicNanoseconds()``.
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (total, carry) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return overflow || carry ? .max : total
    }
}
