package import CurlewEngine
import Foundation
package import HTTPTypes

/// An assertion on each response of a load test, counted apart from transport failures (as k6's `check()`):
/// `status in 200,201`, `status in 200-299`, `header content-type exists`, `header etag ~ "^W/"`,
/// `body contains "ok"`, `body ~ "id\":[0-9]+"`, `json .user.id exists`, `json .items.0.name == "x"`.
public struct LoadCheck: Sendable, CustomStringConvertible {
    /// A check that could not be read; the message says what is accepted.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        /// What is wrong with the check, and the grammar of a check.
        public let description: String
    }

    package enum Condition: Sendable {
        case status([ClosedRange<Int>])
        case headerExists(String)
        case headerMatches(String, pattern: String)
        case headerEquals(String, String)
        case bodyContains([UInt8])
        case bodyMatches(pattern: String)
        case jsonExists([String])
        case jsonEquals([String], JSONLiteral)
    }

    /// A JSON scalar a `json` check compares with.
    package enum JSONLiteral: Sendable, Equatable {
        case string(String)
        case number(Double)
        case bool(Bool)
        case null
    }

    package let condition: Condition
    /// The check as written (without surrounding spaces).
    public let text: String
    /// A compiled regular expression where the condition has one (Regex is not Sendable: kept per check, built once).
    private let regex: RegexBox?

    public var description: String { text }

    /// Whether evaluating the check needs the response body (a run without such checks keeps discarding bodies).
    public var needsBody: Bool {
        switch condition {
        case .bodyContains, .bodyMatches, .jsonExists, .jsonEquals: true
        case .status, .headerExists, .headerMatches, .headerEquals: false
        }
    }

    /// Whether evaluating the check reads the header fields.
    package var needsHeaders: Bool {
        switch condition {
        case .headerExists, .headerMatches, .headerEquals: true
        default: false
        }
    }

    package static let grammar =
        "status in 200,201 (or 200-299); header NAME exists, header NAME == \"v\", header NAME ~ \"regex\"; "
        + "body contains \"text\", body ~ \"regex\"; json .path exists, json .path == VALUE (a JSON string, number, "
        + "true, false or null)"

    /// Parses one check, such as `status in 200-299`.
    ///
    /// - Throws: ``ParseError`` naming what is wrong and what is accepted.
    public init(_ rawText: String) throws(ParseError) {
        let text = rawText.trimmingCharacters(in: .whitespaces)
        func fail(_ reason: String) -> ParseError {
            ParseError(description: "check \(rawText.debugDescription): \(reason); expected \(Self.grammar)")
        }
        var words = CheckScanner(text)
        guard let subject = words.word()?.lowercased() else { throw fail("empty") }
        let condition: Condition
        switch subject {
        case "status":
            guard words.word() == "in", let list = words.rest(), !list.isEmpty else { throw fail("expected `in`") }
            var ranges: [ClosedRange<Int>] = []
            for part in list.split(separator: ",", omittingEmptySubsequences: false) {
                let bounds = part.split(separator: "-", omittingEmptySubsequences: false).map {
                    Int($0.trimmingCharacters(in: .whitespaces))
                }
                guard bounds.count <= 2, let low = bounds.first ?? nil, let high = bounds.last ?? nil,
                    (100...999).contains(low), (100...999).contains(high), low <= high
                else { throw fail("\(String(part).debugDescription) is not a status (100-999) or a range of them") }
                ranges.append(low...high)
            }
            condition = .status(ranges)
        case "header":
            guard let name = words.word(), HTTPField.Name(name) != nil else { throw fail("expected a header name") }
            let lowered = name.lowercased()
            switch words.word() {
            case "exists":
                condition = .headerExists(lowered)
            case "==":
                guard let value = try words.quoted(fail) else { throw fail("expected a quoted value") }
                condition = .headerEquals(lowered, value)
            case "~":
                guard let pattern = try words.quoted(fail) else { throw fail("expected a quoted regular expression") }
                condition = .headerMatches(lowered, pattern: pattern)
            default:
                throw fail("expected exists, == or ~ after the header name")
            }
        case "body":
            switch words.word() {
            case "contains":
                guard let value = try words.quoted(fail) else { throw fail("expected a quoted string") }
                condition = .bodyContains(Array(value.utf8))
            case "~":
                guard let pattern = try words.quoted(fail) else { throw fail("expected a quoted regular expression") }
                condition = .bodyMatches(pattern: pattern)
            default:
                throw fail("expected contains or ~ after body")
            }
        case "json":
            guard let path = words.word(), path.hasPrefix(".") else { throw fail("expected a path such as .user.id") }
            let keys =
                path == "."
                ? [] : path.dropFirst().split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !keys.contains("") else { throw fail("empty key in the path \(path.debugDescription)") }
            switch words.word() {
            case "exists":
                condition = .jsonExists(keys)
            case "==":
                guard let literal = words.rest(), let value = JSONLiteral(literal) else {
                    throw fail("expected a JSON string, number, true, false or null after ==")
                }
                condition = .jsonEquals(keys, value)
            default:
                throw fail("expected exists or == after the path")
            }
        default:
            throw fail("unknown subject \(subject.debugDescription)")
        }
        if !words.isAtEnd { throw fail("unexpected text after the check") }
        var regex: RegexBox?
        switch condition {
        case .headerMatches(_, let pattern), .bodyMatches(let pattern):
            do {
                regex = RegexBox(try Regex(pattern))
            } catch {
                throw fail("invalid regular expression \(pattern.debugDescription)")
            }
        default: break
        }
        self.condition = condition
        self.text = text
        self.regex = regex
    }

    /// Whether `response` meets the check; `fields` (its header fields) and `json` (its body as JSON) are parsed
    /// once per response for all checks, and only when one needs them.
    package func holds(for response: CurlewResponse, fields: HTTPFields?, json: JSONDocument?) -> Bool {
        switch condition {
        case .status(let ranges):
            let code = response.status.code
            return ranges.contains { $0.contains(code) }
        case .headerExists(let name):
            return fields.flatMap { fields in HTTPField.Name(name).flatMap { fields[$0] } } != nil
        case .headerEquals(let name, let value):
            return fields.flatMap { fields in HTTPField.Name(name).flatMap { fields[$0] } } == value
        case .headerMatches(let name, _):
            guard let value = fields.flatMap({ fields in HTTPField.Name(name).flatMap { fields[$0] } }) else {
                return false
            }
            return regex?.matches(value) ?? false
        case .bodyContains(let needle):
            return needle.isEmpty || response.body.firstRange(of: needle) != nil
        case .bodyMatches:
            return regex?.matches(String(decoding: response.body, as: UTF8.self)) ?? false
        case .jsonExists(let keys):
            return json?.value(at: keys) != nil
        case .jsonEquals(let keys, let expected):
            return json?.value(at: keys).map(expected.matches) ?? false
        }
    }

    /// A body as JSON, once per response for all `json` checks; nil when it is not JSON.
    package static func document(of body: [UInt8]) -> JSONDocument? {
        (try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])).map(JSONDocument.init)
    }

    /// Whether evaluating the check reads the body as JSON.
    package var needsJSON: Bool {
        switch condition {
        case .jsonExists, .jsonEquals: true
        default: false
        }
    }
}

/// A parsed JSON body (JSONSerialization is several times faster than decoding a Codable tree).
package struct JSONDocument {
    let root: Any

    /// The value at `keys` (a number key also indexes an array), nil when absent.
    func value(at keys: [String]) -> Any? {
        var value = root
        for key in keys {
            if let object = value as? [String: Any], let next = object[key] {
                value = next
            } else if let array = value as? [Any], let index = Int(key), array.indices.contains(index) {
                value = array[index]
            } else {
                return nil
            }
        }
        return value
    }
}

extension LoadCheck.JSONLiteral {
    /// Parses a JSON scalar as written in a check.
    init?(_ text: String) {
        guard let document = LoadCheck.document(of: Array(text.utf8)) else { return nil }
        switch document.root {
        case is NSNull: self = .null
        case let string as String: self = .string(string)
        case let number as NSNumber:
            let isBool = text == "true" || text == "false"
            self = isBool ? .bool(number.boolValue) : .number(number.doubleValue)
        default: return nil
        }
    }

    /// Whether a JSONSerialization value equals this literal.
    func matches(_ value: Any) -> Bool {
        switch self {
        case .null: return value is NSNull
        case .string(let expected): return (value as? String) == expected
        case .number(let expected):
            return (value as? NSNumber).map { !Self.isBoolean($0) && $0.doubleValue == expected } ?? false
        case .bool(let expected):
            return (value as? NSNumber).map { Self.isBoolean($0) && $0.boolValue == expected } ?? false
        }
    }

    /// JSONSerialization gives `true` and `1` both as NSNumber; a boolean's type encoding is `c` or `B`.
    private static func isBoolean(_ number: NSNumber) -> Bool {
        let encoding = String(cString: number.objCType)
        return encoding == "c" || encoding == "B"
    }
}

/// A compiled regular expression; `Regex` is not `Sendable`, but matching does not mutate it.
private final class RegexBox: @unchecked Sendable {
    private let regex: Regex<AnyRegexOutput>

    init(_ regex: Regex<AnyRegexOutput>) {
        self.regex = regex
    }

    func matches(_ text: String) -> Bool {
        (try? regex.firstMatch(in: text)) != nil
    }
}

/// Splits a check into words and double-quoted strings (`\"` and `\\` escape inside them).
private struct CheckScanner {
    private let characters: [Character]
    private var index = 0

    init(_ text: String) {
        characters = Array(text)
    }

    var isAtEnd: Bool { skipSpacesIndex() >= characters.count }

    private func skipSpacesIndex() -> Int {
        var index = self.index
        while index < characters.count, characters[index] == " " || characters[index] == "\t" { index += 1 }
        return index
    }

    mutating func word() -> String? {
        index = skipSpacesIndex()
        let start = index
        while index < characters.count, characters[index] != " ", characters[index] != "\t" { index += 1 }
        return start == index ? nil : String(characters[start..<index])
    }

    /// The rest of the text, trimmed.
    mutating func rest() -> String? {
        index = skipSpacesIndex()
        defer { index = characters.count }
        return index < characters.count ? String(characters[index...]).trimmingCharacters(in: .whitespaces) : nil
    }

    mutating func quoted(_ fail: (String) -> LoadCheck.ParseError) throws(LoadCheck.ParseError) -> String? {
        index = skipSpacesIndex()
        guard index < characters.count, characters[index] == "\"" else { return nil }
        index += 1
        var value = ""
        while index < characters.count {
            let character = characters[index]
            index += 1
            if character == "\"" { return value }
            if character == "\\" {
                guard index < characters.count else { break }
                value.append(characters[index])
                index += 1
            } else {
                value.append(character)
            }
        }
        throw fail("unterminated quoted string")
    }
}
