import Foundation
import Yams

extension Environment {
    /// The variable that names the environment to use.
    public static let nameVariable = "CURLEW_ENVIRONMENT"
    /// The variable that names the environments file when no path is given.
    public static let fileVariable = "CURLEW_ENVIRONMENT_FILE"

    /// Loads one environment from a YAML or JSON file (read with Yams; JSON is YAML).
    ///
    /// The environment is the one named by `name`, else by the `CURLEW_ENVIRONMENT` variable, else by the file's
    /// `default` key; names match exactly or, failing that, in any case.
    ///
    /// - Parameters:
    ///   - path: the file; `nil` reads the path from `CURLEW_ENVIRONMENT_FILE`.
    ///   - processEnvironment: the variables to read (the process's by default; tests pass their own).
    /// - Throws: ``EnvironmentError`` when the file is missing or malformed, or names no such environment.
    public static func load(
        file path: String? = nil, name: String? = nil,
        processEnvironment: [String: String]? = nil
    ) throws -> Environment {
        let processEnvironment = processEnvironment ?? ProcessInfo.processInfo.environment
        guard let path = path ?? processEnvironment[fileVariable] else {
            throw EnvironmentError(description: "no environments file: pass a path or set \(fileVariable)")
        }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw EnvironmentError(description: "cannot read \(path): \(error.localizedDescription)")
        }
        let directory = (path as NSString).deletingLastPathComponent
        return try parse(text, name: name ?? processEnvironment[nameVariable], relativeTo: directory, source: path)
    }

    /// Picks one environment out of the text of an environments file.
    ///
    /// Values are read as written: `apiKey: 0123` is `"0123"`, `apiVersion: 2.10` is `"2.10"`, `country: NO` is
    /// `"NO"` and `since: 2024-01-01` is `"2024-01-01"` (YAML 1.1's types would have made them 83, 2.1, false and a
    /// date). A value left empty, `~` or `null` is no value; mappings and sequences are not values either.
    static func parse(_ text: String, name: String?, relativeTo directory: String, source: String) throws -> Environment
    {
        let document: Node?
        do {
            // Only null and merge keys are resolved: every other scalar stays the text it was written as.
            document = try Yams.compose(yaml: text, Resolver.basic.appending(.null).appending(.merge))
        } catch {
            throw EnvironmentError(description: "\(source) is not valid YAML or JSON: \(error)")
        }
        guard let root = document.flatMap(entries(of:)), let environments = root["environments"].flatMap(entries(of:))
        else {
            throw EnvironmentError(description: "\(source) has no `environments` mapping")
        }
        guard let chosen = name ?? root["default"].flatMap(text(of:)) else {
            throw EnvironmentError(
                description: "no environment chosen: set \(nameVariable) or a `default` key in \(source)")
        }
        // Exact name first, then any case: LKAPI's testing target was described as "Testing".
        let key =
            environments[chosen] != nil
            ? chosen : environments.keys.first { $0.lowercased() == chosen.lowercased() } ?? chosen
        guard let settings = environments[key].flatMap(entries(of:)) else {
            let known = environments.keys.sorted().joined(separator: ", ")
            throw EnvironmentError(
                description: "\(source) has no environment \(chosen.debugDescription) (it has \(known))")
        }
        var values = settings.compactMapValues(text(of:))
        guard let baseURL = values.removeValue(forKey: "baseURL") else {
            throw EnvironmentError(description: "environment \(chosen) in \(source) has no baseURL")
        }
        let fixtures = values.removeValue(forKey: "fixtures").map { path in
            path.hasPrefix("/") || directory.isEmpty ? path : directory + "/" + path
        }
        return Environment(name: key, baseURL: baseURL, values: values, fixturesDirectory: fixtures)
    }

    /// A mapping's entries by their keys as written, with the entries of `<<` merge keys under its own (the first
    /// merged mapping winning over later ones); `nil` for a node that is not a mapping.
    private static func entries(of node: Node) -> [String: Node]? {
        guard let mapping = node.mapping else { return nil }
        var own: [String: Node] = [:]
        var merged: [String: Node] = [:]
        for (key, value) in mapping {
            if key.tag.rawValue == Tag.Name.merge.rawValue {
                for source in value.sequence.map(Array.init) ?? [value] {
                    merged.merge(entries(of: source) ?? [:]) { earlier, _ in earlier }
                }
            } else if let key = key.scalar?.string {
                own[key] = value
            }
        }
        return own.merging(merged) { own, _ in own }
    }

    /// A scalar's text as written; `nil` for null (`~`, `null`, nothing) and for mappings and sequences.
    private static func text(of node: Node) -> String? {
        guard let scalar = node.scalar, node.tag.rawValue != Tag.Name.null.rawValue else { return nil }
        return scalar.string
    }
}
