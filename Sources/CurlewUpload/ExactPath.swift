/// A relative path compared and hashed by its UTF-8 bytes. `String`'s `==` and hashing use canonical equivalence, so
/// `café` in NFC and in NFD are one `String` key, yet two files on Linux (names are bytes) and two names on a server.
package struct ExactPath: Hashable, Sendable {
    package let path: String

    package init(_ path: String) { self.path = path }

    package static func == (lhs: ExactPath, rhs: ExactPath) -> Bool { lhs.path.utf8.elementsEqual(rhs.path.utf8) }

    package func hash(into hasher: inout Hasher) {
        var path = path
        path.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// Records by relative path, looked up and listed with `String`s as a dictionary is, but told apart by the path's
/// exact bytes (``ExactPath``): the records of `café` in NFC and in NFD are two.
package struct RecordsByExactPath<Value> {
    private var records: [ExactPath: Value] = [:]

    package init() {}

    /// The record of `path`, matched byte for byte.
    package subscript(_ path: String) -> Value? {
        get { records[ExactPath(path)] }
        set { records[ExactPath(path)] = newValue }
    }

    /// The paths that have a record, in no particular order.
    package var keys: [String] { records.keys.map(\.path) }

    package var count: Int { records.count }

    package var isEmpty: Bool { records.isEmpty }

    /// Some record, if there is any (as a dictionary's `first`).
    package var first: Element? { records.first.map { (key: $0.key.path, value: $0.value) } }
}

extension RecordsByExactPath: Sequence {
    package typealias Element = (key: String, value: Value)

    package func makeIterator() -> LazyMapSequence<[ExactPath: Value], Element>.Iterator {
        records.lazy.map { (key: $0.key.path, value: $0.value) }.makeIterator()
    }
}

extension RecordsByExactPath: ExpressibleByDictionaryLiteral {
    package init(dictionaryLiteral elements: (String, Value)...) {
        for (path, value) in elements { self[path] = value }
    }
}

extension RecordsByExactPath: Equatable where Value: Equatable {}
extension RecordsByExactPath: Sendable where Value: Sendable {}
