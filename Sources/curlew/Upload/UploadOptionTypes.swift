public import ArgumentParser
import CurlewEngine
public import CurlewS3
public import CurlewUpload

// The libraries' option values as command-line arguments: the libraries know nothing of ArgumentParser.
extension UploadMode: ExpressibleByArgument {}
extension S3Addressing: ExpressibleByArgument {}

/// `--checksum-header md5|sha256`: parsed by the stable name, and listed in the help and completions as a
/// `CaseIterable` enum's cases were.
extension UploadChecksumHeader: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }

    public static var allValueStrings: [String] { all.map(\.name) }

    public static var defaultCompletionKind: CompletionKind { .list(allValueStrings) }
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
