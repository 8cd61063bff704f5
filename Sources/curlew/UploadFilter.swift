import ArgumentParser
import CurlewEngine
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
struct UploadFilter: Sendable {
    let includes: [String]
    let excludes: [String]

    var isEmpty: Bool { includes.isEmpty && excludes.isEmpty }

    func admits(_ relativePath: String) -> Bool {
        if excludes.contains(where: { Self.matches($0, relativePath) }) { return false }
        return includes.isEmpty || includes.contains(where: { Self.matches($0, relativePath) })
    }

    static func matches(_ pattern: String, _ relativePath: String) -> Bool {
        let anchored = pattern.hasPrefix("/") ? String(pattern.dropFirst()) : pattern
        let subject = anchored.contains("/") ? relativePath : String(relativePath.split(separator: "/").last ?? "")
        // `**` means the same as `*` here: without FNM_PATHNAME, `*` already crosses `/`.
        return fnmatch(anchored.replacingOccurrences(of: "**", with: "*"), subject, 0) == 0
    }
}

/// A size on the command line: `16MiB`, `8M` (binary, as rclone and the AWS CLI read them), `5MB` (decimal), or bytes.
struct ByteSizeArgument: ExpressibleByArgument, Sendable, Hashable, CustomStringConvertible {
    let bytes: Int64
    private let text: String

    init(bytes: Int64, text: String) {
        self.bytes = bytes
        self.text = text
    }

    init?(argument: String) {
        let units: [(suffix: String, scale: Double)] = [
            ("KiB", 0x1p10), ("MiB", 0x1p20), ("GiB", 0x1p30), ("TiB", 0x1p40), ("kB", 1e3), ("KB", 1e3), ("MB", 1e6),
            ("GB", 1e9), ("TB", 1e12), ("K", 0x1p10), ("k", 0x1p10), ("M", 0x1p20), ("G", 0x1p30), ("T", 0x1p40),
            ("B", 1),
        ]
        guard let bytes = ScaledNumber.parse(argument, units: units, defaultScale: 1, below: 9e18) else { return nil }
        self.bytes = Int64(bytes)
        self.text = argument
    }

    var description: String { text }
}
