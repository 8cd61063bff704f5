import CurlewEngine
package import CurlewS3
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--include` / `--exclude` globs (`*`, `?`, `[…]`), as rclone and `aws s3 cp` users write them: a pattern
/// without `/` matches a file's name in any folder; one with `/` matches the whole relative path (`*` crosses
/// folders there, so `logs/*` is everything under logs/). A file is sent if no exclude matches it and, when
/// includes are given, some include does.
///
/// Size and age bounds, as rclone's `--min-size`, `--max-size`, `--min-age` and `--max-age`: a file is sent only if
/// its size is within the size bounds (both inclusive) and its age (now minus its modification time) within the
/// age bounds (`maxAge` 24 h: modified in the last day; `minAge` 1 h: not touched for an hour).
package struct UploadFilter: Sendable {
    package let includes: [String]
    package let excludes: [String]
    package var minSize: Int64?
    package var maxSize: Int64?
    package var minAge: Duration?
    package var maxAge: Duration?

    package init(
        includes: [String], excludes: [String], minSize: Int64? = nil, maxSize: Int64? = nil,
        minAge: Duration? = nil, maxAge: Duration? = nil
    ) {
        self.includes = includes
        self.excludes = excludes
        self.minSize = minSize
        self.maxSize = maxSize
        self.minAge = minAge
        self.maxAge = maxAge
    }

    package var isEmpty: Bool {
        includes.isEmpty && excludes.isEmpty && minSize == nil && maxSize == nil && minAge == nil && maxAge == nil
    }

    /// Whether `item` is sent, its age taken at `nowNanoseconds` (wall clock, since 1970).
    package func admits(_ item: UploadItem, nowNanoseconds: Int64) -> Bool {
        if let minSize, item.size < minSize { return false }
        if let maxSize, item.size > maxSize { return false }
        let age = Duration.nanoseconds(nowNanoseconds &- item.modifiedNanoseconds)
        if let minAge, age < minAge { return false }
        if let maxAge, age > maxAge { return false }
        return admits(item.relativePath)
    }

    /// The bounds that cannot all hold (a minimum above its maximum, a negative bound), named as the options are;
    /// nil when the filter is sound.
    package var contradiction: String? {
        if let minSize, minSize < 0 { return "--min-size must not be negative" }
        if let maxSize, maxSize < 0 { return "--max-size must not be negative" }
        if let minSize, let maxSize, minSize > maxSize { return "--min-size is above --max-size: no file could match" }
        if let minAge, minAge < .zero { return "--min-age must not be negative" }
        if let maxAge, maxAge < .zero { return "--max-age must not be negative" }
        if let minAge, let maxAge, minAge > maxAge { return "--min-age is above --max-age: no file could match" }
        return nil
    }

    /// The wall clock now, in nanoseconds since 1970, for ``admits(_:nowNanoseconds:)``.
    package static var nowNanoseconds: Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    package func admits(_ relativePath: String) -> Bool {
        if excludes.contains(where: { Self.matches($0, relativePath) }) { return false }
        return includes.isEmpty || includes.contains(where: { Self.matches($0, relativePath) })
    }

    package static func matches(_ pattern: String, _ relativePath: String) -> Bool {
        // By bytes: `hasPrefix` and `contains` compare `Character`s, and `/\u{301}x` holds the grapheme `/\u{301}`,
        // not `/`, so that pattern was neither anchored nor matched against the whole path.
        let anchored =
            PercentEncoding.startsWithSlash(pattern)
            ? String(decoding: pattern.utf8.dropFirst(), as: UTF8.self) : pattern
        let subject =
            anchored.utf8.contains(UInt8(ascii: "/"))
            ? relativePath : String(PercentEncoding.segments(of: relativePath, omittingEmpty: true).last ?? "")
        // `**` means the same as `*` here: without FNM_PATHNAME, `*` already crosses `/`.
        return fnmatch(anchored.replacingOccurrences(of: "**", with: "*"), subject, 0) == 0
    }
}
