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
package struct UploadFilter: Sendable {
    package let includes: [String]
    package let excludes: [String]

    package init(includes: [String], excludes: [String]) {
        self.includes = includes
        self.excludes = excludes
    }

    package var isEmpty: Bool { includes.isEmpty && excludes.isEmpty }

    package func admits(_ relativePath: String) -> Bool {
        if excludes.contains(where: { Self.matches($0, relativePath) }) { return false }
        return includes.isEmpty || includes.contains(where: { Self.matches($0, relativePath) })
    }

    package static func matches(_ pattern: String, _ relativePath: String) -> Bool {
        let anchored = pattern.hasPrefix("/") ? String(pattern.dropFirst()) : pattern
        let subject = anchored.contains("/") ? relativePath : String(relativePath.split(separator: "/").last ?? "")
        // `**` means the same as `*` here: without FNM_PATHNAME, `*` already crosses `/`.
        return fnmatch(anchored.replacingOccurrences(of: "**", with: "*"), subject, 0) == 0
    }
}
