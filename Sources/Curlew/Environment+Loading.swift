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
    static func parse(_ text: String, name: String?, relativeTo directory: String, source: String) throws -> Environment
    {
        let document: Any?
        do {
            document = try Yams.load(yaml: text)
        } catch {
            throw EnvironmentError(description: "\(source) is not valid YAML or JSON: \(error)")
        }
        guard let root = document as? [String: Any], let environments = root["environments"] as? [String: Any] else {
            throw EnvironmentError(description: "\(source) has no `environments` mapping")
        }
        guard let chosen = name ?? (root["default"].map { "\($0)" }) else {
            throw EnvironmentError(
                description: "no environment chosen: set \(nameVariable) or a `default` key in \(source)")
        }
        // Exact name first, then any case: LKAPI's testing target was described as "Testing".
        let key =
            environments[chosen] != nil
            ? chosen : environments.keys.first { $0.lowercased() == chosen.lowercased() } ?? chosen
        guard let settings = environments[key] as? [String: Any] else {
            let known = environments.keys.sorted().joined(separator: ", ")
            throw EnvironmentError(
                description: "\(source) has no environment \(chosen.debugDescription) (it has \(known))")
        }
        var values: [String: String] = [:]
        for (key, value) in settings {
            values[key] = value is [Any] || value is [String: Any] ? nil : "\(value)"
        }
        guard let baseURL = values.removeValue(forKey: "baseURL") else {
            throw EnvironmentError(description: "environment \(chosen) in \(source) has no baseURL")
        }
        let fixtures = values.removeValue(forKey: "fixtures").map { path in
            path.hasPrefix("/") || directory.isEmpty ? path : directory + "/" + path
        }
        return Environment(name: key, baseURL: baseURL, values: values, fixturesDirectory: fixtures)
    }
}
