import CurlewLoad
import Foundation

/// `--targets` files (JSON lines and vegeta's plain text) through `BenchTargetFile.parse`: any text is read or
/// refused with a message that names the line, never a crash or a hang; what is read, written back as JSON lines
/// (as a tool would generate a targets file), reads back as the same targets.
enum BenchTargetsProperty {
    static let directory = "/targets"

    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        let targets: [BenchTargetSpec]
        do {
            targets = try BenchTargetFile.parse(text, directory: directory)
        } catch {
            return error.description.hasPrefix("targets line") || error.description.contains("no target")
                ? nil : "a refusal that names no line: \(error)"
        }
        for target in targets {
            if case .file(let path) = target.body, !path.hasPrefix("/") {
                return "the body file \(path.debugDescription) is not resolved against the targets file's folder"
            }
        }
        let rendered: String
        do {
            rendered = try jsonLines(targets)
        } catch {
            return "the targets cannot be written as JSON: \(error)"
        }
        let again: [BenchTargetSpec]
        do {
            again = try BenchTargetFile.parse(rendered, directory: directory)
        } catch {
            return "written as JSON lines, \(targets.count) targets are refused: \(error)\n\(rendered.debugDescription)"
        }
        let expected = targets.map(groupedByName)
        guard again == expected else {
            return "written as JSON lines, \(expected) read back as \(again)\n\(rendered.debugDescription)"
        }
        return nil
    }

    /// JSON keeps a target's headers as an object, so same-name fields come back together, names in order.
    private static func groupedByName(_ target: BenchTargetSpec) -> BenchTargetSpec {
        var grouped = target
        grouped.headers = target.headers.enumerated().sorted { left, right in
            left.element.name == right.element.name
                ? left.offset < right.offset : left.element.name < right.element.name
        }.map(\.element)
        return grouped
    }

    private static func jsonLines(_ targets: [BenchTargetSpec]) throws -> String {
        try targets.map { target in
            var object: [String: Any] = ["method": target.method, "url": target.url]
            if !target.headers.isEmpty {
                var headers: [String: [String]] = [:]
                for (name, value) in target.headers { headers[name, default: []].append(value) }
                object["headers"] = headers
            }
            switch target.body {
            case .text(let text): object["body"] = text
            case .file(let path): object["bodyFile"] = path
            case nil: break
            }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            return String(decoding: data, as: UTF8.self)
        }.joined(separator: "\n")
    }
}
