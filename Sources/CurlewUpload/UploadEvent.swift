import Foundation

/// One thing that happened to one file during an upload, as it happened: what `curlew upload --json-events` writes,
/// one JSON object per line, for the pipeline around a run to follow it (as `rclone --use-json-log` and
/// `s5cmd --json` do).
///
/// Encoded as `{"event":"done","path":"a/b.txt","size":123,"time":1800000000.123}`, with `part` for
/// ``Kind/partDone``, `rule` for ``Kind/skipped`` and `error` for ``Kind/failed``; absent fields are left out.
public struct UploadEvent: Sendable, Hashable, Codable {
    /// What happened. A struct with static members rather than an enum, so kinds can be added without breaking a
    /// caller's `switch`; ``name`` is the stable word in the JSON.
    public struct Kind: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The stable name: `started`, `partDone`, `done`, `skipped`, `failed`, `deleted`.
        public let name: String

        private init(_ name: String) { self.name = name }

        /// The file's first request is about to go out.
        public static let started = Kind("started")
        /// One part of a multipart S3 upload was stored (`part` is its number, `size` its bytes).
        public static let partDone = Kind("partDone")
        /// The server accepted the whole file.
        public static let done = Kind("done")
        /// Not sent: the journal or the store already had it (`rule` says how that was known: `journal`,
        /// `in-flight-size`, or an S3 rule such as `whole-file-sha256-metadata`).
        public static let skipped = Kind("skipped")
        /// Not sent (`error` says why: the server's status, a transport error after how many attempts, a file that
        /// changed or vanished), or not deleted (`curlew sync --delete`).
        public static let failed = Kind("failed")
        /// `curlew sync --delete`: removed from the destination, which the source no longer has it.
        public static let deleted = Kind("deleted")

        public var description: String { name }

        public init(from decoder: any Decoder) throws {
            self.init(try decoder.singleValueContainer().decode(String.self))
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(name)
        }
    }

    /// What happened.
    public let kind: Kind
    /// The file's relative path: its name on the server.
    public let path: String
    /// The file's size, or the part's for ``Kind/partDone``.
    public let size: Int64?
    /// The part number, for ``Kind/partDone``.
    public let part: Int?
    /// How a skipped file was known to be there already; for a started file in `curlew sync`, why it is sent
    /// (`missing`, `size`, `checksum`, `newer`).
    public let rule: String?
    /// Why a file failed.
    public let error: String?
    /// When, in seconds since 1970.
    public let time: Double

    package init(
        _ kind: Kind, path: String, size: Int64? = nil, part: Int? = nil, rule: String? = nil, error: String? = nil,
        time: Double = Date().timeIntervalSince1970
    ) {
        self.kind = kind
        self.path = path
        self.size = size
        self.part = part
        self.rule = rule
        self.error = error
        self.time = time
    }

    private enum CodingKeys: String, CodingKey {
        case kind = "event"
        case path, size, part, rule, error, time
    }
}
