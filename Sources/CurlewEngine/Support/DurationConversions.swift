extension Duration {
    /// The duration in seconds, for rates and reports (not exact beyond a double's precision).
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole nanoseconds, truncated; negative durations become zero. For durations counted on
    /// ``monotonicNanoseconds()``.
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
