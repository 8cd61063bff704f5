import CurlewEngine
import Foundation

/// One request of a `--targets` file, as written: nothing is validated against the network or read from disk
/// here, so parsing is pure.
struct BenchTargetSpec: Sendable, Equatable {
    enum Body: Sendable, Equatable {
        case text(String)
        /// A path, already resolved against the targets file's folder.
        case file(String)
    }

    var method: String
    var url: String
    var headers: [(name: String, value: String)]
    var body: Body?

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.method == rhs.method && lhs.url == rhs.url && lhs.body == rhs.body
            && lhs.headers.map { [$0.name, $0.value] } == rhs.headers.map { [$0.name, $0.value] }
    }
}

/// Parses `--targets` files in two formats:
///
/// - JSON lines, one object per line: `{"method": "POST", "url": "http://…", "headers": {"X-A": "1"},
///   "body": "text"}`, or `"bodyFile": "path"` instead of `body`. `method` defaults to GET; a header's value may
///   also be a list of values (sent as several fields).
/// - vegeta's plain-text format: `METHOD URL`, then `Name: value` header lines, then optionally `@path` for the
///   body; targets are separated by blank lines, `#` starts a comment line.
///
/// The format is the JSON one when the first line that is not blank or a comment starts with `{`.
enum BenchTargetFile {
    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    /// - Parameter directory: the targets file's folder, against which relative body paths resolve.
    static func parse(_ text: String, directory: String) throws(ParseError) -> [BenchTargetSpec] {
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        let firstContent = lines.first { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return !trimmed.isEmpty && !trimmed.hasPrefix("#")
        }
        let targets =
            if firstContent?.trimmingCharacters(in: .whitespaces).hasPrefix("{") == true {
                try parseJSONLines(lines, directory: directory)
            } else {
                try parsePlainText(lines, directory: directory)
            }
        guard !targets.isEmpty else { throw ParseError(description: "the targets file holds no target") }
        return targets
    }

    private static func resolve(_ path: String, in directory: String) -> String {
        path.hasPrefix("/") ? path : (directory as NSString).appendingPathComponent(path)
    }

    private static func parseJSONLines(_ lines: [Substring], directory: String) throws(ParseError) -> [BenchTargetSpec]
    {
        var targets: [BenchTargetSpec] = []
        for (offset, line) in lines.enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            func fail(_ reason: String) -> ParseError {
                ParseError(description: "targets line \(offset + 1): \(reason)")
            }
            guard let object = (try? JSONSerialization.jsonObject(with: Data(trimmed.utf8))) as? [String: Any] else {
                throw fail("not a JSON object")
            }
            let known: Set<String> = ["method", "url", "headers", "body", "bodyFile"]
            if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
                throw fail("unknown key \(unknown.debugDescription) (known: method, url, headers, body, bodyFile)")
            }
            guard let url = object["url"] as? String else { throw fail("\"url\" (a string) is missing") }
            let method = object["method"] ?? "GET"
            guard let method = method as? String else { throw fail("\"method\" is not a string") }
            var headers: [(name: String, value: String)] = []
            if let rawHeaders = object["headers"] {
                guard let fields = rawHeaders as? [String: Any] else { throw fail("\"headers\" is not an object") }
                for name in fields.keys.sorted() {
                    switch fields[name] {
                    case let value as String: headers.append((name, value))
                    case let values as [String]: headers += values.map { (name, $0) }
                    default: throw fail("header \(name.debugDescription) is neither a string nor a list of strings")
                    }
                }
            }
            var body: BenchTargetSpec.Body?
            switch (object["body"], object["bodyFile"]) {
            case (nil, nil): body = nil
            case (let text as String, nil): body = .text(text)
            case (nil, let path as String): body = .file(resolve(path, in: directory))
            case (.some, .some): throw fail("give \"body\" or \"bodyFile\", not both")
            default: throw fail("\"body\" and \"bodyFile\" are strings")
            }
            targets.append(BenchTargetSpec(method: method, url: url, headers: headers, body: body))
        }
        return targets
    }

    private static func parsePlainText(_ lines: [Substring], directory: String) throws(ParseError) -> [BenchTargetSpec]
    {
        var targets: [BenchTargetSpec] = []
        var current: BenchTargetSpec?
        for (offset, line) in lines.enumerated() {
            func fail(_ reason: String) -> ParseError {
                ParseError(description: "targets line \(offset + 1): \(reason)")
            }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#") { continue }
            if trimmed.isEmpty {
                if let finished = current { targets.append(finished) }
                current = nil
                continue
            }
            if current == nil {
                let parts = trimmed.split(separator: " ", omittingEmptySubsequences: true)
                guard parts.count == 2, parts[0].allSatisfy({ $0.isLetter && $0.isUppercase }) else {
                    throw fail("expected a target line 'METHOD URL', found \(trimmed.debugDescription)")
                }
                current = BenchTargetSpec(method: String(parts[0]), url: String(parts[1]), headers: [], body: nil)
            } else if trimmed.hasPrefix("@") {
                guard current?.body == nil else { throw fail("a second body line") }
                current?.body = .file(resolve(String(trimmed.dropFirst()), in: directory))
            } else if current?.body == nil, let field = HeaderFieldLine.parse(trimmed) {
                current?.headers.append(field)
            } else {
                throw fail("expected 'Name: value', '@body-file' or a blank line, found \(trimmed.debugDescription)")
            }
        }
        if let finished = current { targets.append(finished) }
        return targets
    }
}

/// Which target request k uses: round-robin, or a seeded pseudo-random pick that depends on k alone, so the
/// order is the same for a seed however the workers interleave, and picking needs no shared state.
enum BenchTargetOrder: Sendable, Equatable {
    case roundRobin
    case random(seed: UInt64)

    @inline(__always)
    func targetIndex(ofRequest ticket: Int, targetCount: Int) -> Int {
        switch self {
        case .roundRobin:
            return ticket % targetCount
        case .random(let seed):
            // SplitMix64 of (seed, k): a well-mixed 64-bit value per request, then reduced to the target count.
            var z = seed &+ UInt64(truncatingIfNeeded: ticket) &* 0x9E37_79B9_7F4A_7C15
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            return Int(z % UInt64(targetCount))
        }
    }
}
