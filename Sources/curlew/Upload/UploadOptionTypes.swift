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
        guard let bytes = ScaledNumber.byteSize(argument) else { return nil }
        self.bytes = bytes
        self.text = argument
    }

    var description: String { text }
}
