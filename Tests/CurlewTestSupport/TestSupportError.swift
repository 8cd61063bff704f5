/// A test helper could not do what it was asked; the message says why and what to install.
public struct TestSupportError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
