/// Numbers with a unit suffix as people write them in options and specifications (`250ms`, `16MiB`, `2m`), shared
/// by the load generator's stage and threshold specifications and the command's options.
package enum ScaledNumber {
    /// A non-negative number with an optional unit suffix, times the unit's scale, rounded; nil if it is not one or
    /// reaches `below`. `units` are tried in order, so longer suffixes go first.
    package static func parse(
        _ text: String, units: [(suffix: String, scale: Double)], defaultScale: Double, below limit: Double
    ) -> Double? {
        let trimmed = text.trimmingWhitespace()
        var number = Substring(trimmed)
        var scale = defaultScale
        for unit in units where trimmed.hasSuffix(unit.suffix) {
            number = trimmed.dropLast(unit.suffix.count)
            scale = unit.scale
            break
        }
        guard let value = Double(String(number).trimmingWhitespace()), value.isFinite, value >= 0,
            value * scale < limit
        else {
            return nil
        }
        return (value * scale).rounded()
    }

    /// A duration: `10s`, `500ms`, `250us`, `2m`, `1h`, or a bare number of seconds; nil if it is not one.
    package static func duration(_ text: String) -> Duration? {
        // Longest suffixes first, so "ms" is not read as "s" after a number ending in "m".
        let units: [(suffix: String, scale: Double)] = [
            ("ms", 1e6), ("us", 1e3), ("µs", 1e3), ("ns", 1), ("s", 1e9), ("m", 60e9), ("h", 3600e9),
        ]
        guard let nanoseconds = parse(text.lowercased(), units: units, defaultScale: 1e9, below: 1e18) else {
            return nil
        }
        return .nanoseconds(Int64(nanoseconds))
    }
}

extension ScaledNumber {
    /// A size in bytes: `16MiB`, `8M` (binary, as rclone and the AWS CLI read them), `5MB` (decimal), or a bare
    /// number of bytes; nil if it is not one or is 9e18 bytes or more.
    package static func byteSize(_ text: String) -> Int64? {
        let units: [(suffix: String, scale: Double)] = [
            ("KiB", 0x1p10), ("MiB", 0x1p20), ("GiB", 0x1p30), ("TiB", 0x1p40), ("kB", 1e3), ("KB", 1e3), ("MB", 1e6),
            ("GB", 1e9), ("TB", 1e12), ("K", 0x1p10), ("k", 0x1p10), ("M", 0x1p20), ("G", 0x1p30), ("T", 0x1p40),
            ("B", 1),
        ]
        return parse(text, units: units, defaultScale: 1, below: 9e18).map { Int64($0) }
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        let isSpace = { (character: Character) in character == " " || character == "\t" }
        return String(self.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
