import CurlewEngine
import Foundation

/// One request of a `--targets` file, as written: nothing is validated against the network or read from disk
/// here, so parsing is pure.
package struct BenchTargetSpec: Sendable, Equatable {
    package enum Body: Sendable, Equatable {
        case text(String)
        /// A path, already resolved against the targets file's folder.
        case file(String)
    }

    package var method: String
    package var url: String
    package var headers: [(name: String, value: String)]
    package var body: Body?

    package init(method: String, url: String, headers: [(name: String, value: String)], body: Body?) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
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
/// The format is the JSON one when the first line that is not blank or a comment starts with `{`. A leading byte
/// order mark (U+FEFF) is skipped.
package enum BenchTargetFile {
    package struct ParseError: Error, CustomStringConvertible {
        package let description: String
    }

    /// - Parameter directory: the targets file's folder, against which relative body paths resolve.
    package static func parse(_ text: String, directory: String) throws(ParseError) -> [BenchTargetSpec] {
        // Lines end at LF (or CRLF), as JSON lines and vegeta's files define them: a JSON string may hold U+2028,
        // U+0085 and the other characters Unicode calls line breaks, which JSON writers leave as they are.
        let fileScalars = text.droppingByteOrderMark.unicodeScalars
        let lines = fileScalars.split(separator: "\n", omittingEmptySubsequences: false).map {
            (slice: Substring.UnicodeScalarView) -> Substring in
            var scalars = String.UnicodeScalarView(slice)
            if scalars.last == "\r" { scalars.removeLast() }
            return Substring(String(scalars))
        }
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
                    // Each word redacted: the line holds URLs, perhaps with their passwords or keys.
                    let shown = trimmed.split(separator: " ").map { URLRedaction.messages.displaying(String($0)) }
                    throw fail(
                        "expected a target line 'METHOD URL', found \(shown.joined(separator: " ").debugDescription)")
                }
                current = BenchTargetSpec(method: String(parts[0]), url: String(parts[1]), headers: [], body: nil)
            } else if trimmed.hasPrefix("@") {
                guard current?.body == nil else { throw fail("a second body line") }
                current?.body = .file(resolve(String(trimmed.dropFirst()), in: directory))
            } else if current?.body == nil, let field = HeaderFieldLine.parse(trimmed) {
                current?.headers.append(field)
            } else {
                // Not quoted: a malformed header line may hold a credential (`Authorization Bearer …`).
                throw fail(
                    "expected 'Name: value', '@body-file' or a blank line (a blank line goes before the next target)")
            }
        }
        if let finished = current { targets.append(finished) }
        return targets
    }
}

/// Which of a load test's requests each request of the run sends.
///
/// Request k's target depends on k alone (round-robin, or a seeded pseudo-random pick), so the order is the same
/// for a seed however the workers interleave, every shard of a sharded run agrees on it, and picking needs no
/// shared state.
///
/// A struct with static members rather than an enum, so that orders can be added without breaking a `switch`
/// (README, "API stability").
public struct LoadTargetOrder: Sendable, Equatable {
    private enum Kind: Sendable, Equatable {
        case roundRobin
        case random(seed: UInt64)
    }

    private let kind: Kind

    /// Request k sends target k modulo the number of targets.
    public static let roundRobin = LoadTargetOrder(kind: .roundRobin)

    /// Request k sends a target picked by a hash of the seed and k: reproducible for the same seed.
    public static func random(seed: UInt64) -> LoadTargetOrder { LoadTargetOrder(kind: .random(seed: seed)) }

    @inline(__always)
    package func targetIndex(ofRequest ticket: Int, targetCount: Int) -> Int {
        switch kind {
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
