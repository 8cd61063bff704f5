import Foundation
import Synchronization

/// A server's access log, read as it grows and grouped by the first two segments of each line's request URI
/// (`/hits/MARKER/`, `/dav/FOLDER/`), so a test finds its own lines without reading the whole shared log again.
///
/// Tests poll these logs every few milliseconds while other suites add thousands of lines to them. Reading and
/// splitting the whole file on every poll kept the test process's two cooperative threads busy on CI, which
/// stalled unrelated tests for seconds. Here each byte of the log is read and split once.
public final class AccessLogIndex: Sendable {
    /// The log file.
    public let path: String
    /// Which space-separated field of a line holds the request URI (0-based).
    private let uriField: Int
    private let state = Mutex(State())

    private struct State {
        /// How far the file has been read.
        var offset: UInt64 = 0
        /// The bytes after the last newline read: a line nginx is still writing.
        var partialLine: [UInt8] = []
        var linesByGroup: [String: [String]] = [:]
    }

    /// An index of the log at `path` whose lines hold the request URI in field `uriField`.
    public init(path: String, uriField: Int) {
        self.path = path
        self.uriField = uriField
    }

    /// Every line so far whose URI is in the same group as `prefix` (its first two segments, `/hits/MARKER/`), in
    /// log order. Callers filter further on the whole prefix when it is longer than its group.
    public func lines(inGroupOf prefix: String) -> [String] {
        let group = Self.group(ofURI: Substring(prefix))
        return state.withLock { state in
            readAppendedLines(into: &state)
            return state.linesByGroup[group] ?? []
        }
    }

    /// The URI up to and including its third `/`: `/hits/MARKER/` of `/hits/MARKER/x?y`.
    static func group(ofURI uri: Substring) -> String {
        var slashes = 0
        for index in uri.indices where uri[index] == "/" {
            slashes += 1
            if slashes == 3 { return String(uri[...index]) }
        }
        return String(uri)
    }

    private func readAppendedLines(into state: inout State) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        guard (try? handle.seek(toOffset: state.offset)) != nil, let data = try? handle.readToEnd(), !data.isEmpty
        else { return }
        state.offset += UInt64(data.count)
        var bytes = state.partialLine
        bytes.append(contentsOf: data)
        guard let lastNewline = bytes.lastIndex(of: UInt8(ascii: "\n")) else {
            state.partialLine = bytes
            return
        }
        state.partialLine = Array(bytes[(lastNewline + 1)...])
        for line in bytes[..<lastNewline].split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            let fields = text.split(separator: " ", maxSplits: uriField + 1, omittingEmptySubsequences: false)
            guard fields.count > uriField else { continue }
            state.linesByGroup[Self.group(ofURI: fields[uriField]), default: []].append(text)
        }
    }
}
