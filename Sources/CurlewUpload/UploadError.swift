/// Why an upload could not start, or could not keep its journal.
///
/// Files that fail are not errors of the upload: they are listed in ``UploadSummary/failures``.
public struct UploadError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, by what the caller can do about it.
    ///
    /// A struct rather than an enum, so that kinds can be added without breaking a caller's `switch`: compare with
    /// `==` (`error.kind == .journal`), and end a `switch` in `default`; ``name`` is stable.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        /// The package's exhaustive view of the kind.
        package enum Storage: Sendable, Hashable {
            case invalidConfiguration
            case unreadableSource
            case journal
            case unreadableDestination
        }

        /// What the kind is, for an exhaustive `switch` inside the package.
        package let storage: Storage

        private init(_ storage: Storage) { self.storage = storage }

        /// The configuration asks for something impossible (a bad URL, an option the destination does not take).
        public static let invalidConfiguration = Kind(.invalidConfiguration)
        /// The source folder or manifest is missing or unreadable: nothing could be sent.
        public static let unreadableSource = Kind(.unreadableSource)
        /// The journal could not be opened, read or written.
        public static let journal = Kind(.journal)
        /// The destination could not be listed (`Sync`): nothing was sent or deleted.
        public static let unreadableDestination = Kind(.unreadableDestination)

        /// The stable name: the static member's name (`"invalidConfiguration"`, `"unreadableSource"`, `"journal"`).
        public var name: String {
            switch storage {
            case .invalidConfiguration: "invalidConfiguration"
            case .unreadableSource: "unreadableSource"
            case .journal: "journal"
            case .unreadableDestination: "unreadableDestination"
            }
        }

        /// The ``name``.
        public var description: String { name }
    }

    /// What went wrong.
    public let kind: Kind
    /// The problem, naming the path or value concerned.
    public let description: String

    package init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}
