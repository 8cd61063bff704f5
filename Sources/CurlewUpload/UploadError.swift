/// Why an upload could not start, or could not keep its journal.
///
/// Files that fail are not errors of the upload: they are listed in ``UploadSummary/failures``.
public struct UploadError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, by what the caller can do about it.
    public enum Kind: Sendable, Hashable {
        /// The configuration asks for something impossible (a bad URL, an option the destination does not take).
        case invalidConfiguration
        /// The source folder or manifest is missing or unreadable: nothing could be sent.
        case unreadableSource
        /// The journal could not be opened, read or written.
        case journal
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
