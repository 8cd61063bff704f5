import Foundation

/// No usable AWS credentials were found; the message names where they were looked for, never a key or secret.
public struct AWSCredentialsError: Error, Sendable, CustomStringConvertible {
    /// What is missing and where it was looked for.
    public let description: String

    package init(_ description: String) { self.description = description }
}

/// Finds credentials and the region where the AWS CLI and SDKs look, in their order: the environment
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), then the profile named by `AWS_PROFILE`
/// (else `default`) in `~/.aws/credentials` and `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE` and
/// `AWS_CONFIG_FILE` move them). Error messages name where it looked, never a key or secret.
package struct AWSCredentialResolver {
    package struct Resolved: Sendable {
        package let credentials: AWSCredentials
        /// From `AWS_REGION`, `AWS_DEFAULT_REGION` or the profile; nil if none says.
        package let region: String?
        /// Where the credentials came from, for the run's header line (`environment`, `profile default`).
        package let source: String
    }

    package let environment: [String: String]
    /// Reads a file's text, nil if it does not exist (tests pass their own).
    package let readFile: (String) -> String?

    package static func fromProcess() -> AWSCredentialResolver {
        AWSCredentialResolver(environment: ProcessInfo.processInfo.environment) { path in
            FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    package func resolve() throws(AWSCredentialsError) -> Resolved {
        let profile = value("AWS_PROFILE") ?? value("AWS_DEFAULT_PROFILE") ?? "default"
        let home = value("HOME") ?? NSHomeDirectory()
        let credentialsPath = value("AWS_SHARED_CREDENTIALS_FILE") ?? home + "/.aws/credentials"
        let configPath = value("AWS_CONFIG_FILE") ?? home + "/.aws/config"
        let credentialsFile = readFile(credentialsPath).map(Self.parseINI) ?? [:]
        let configFile = readFile(configPath).map(Self.parseINI) ?? [:]
        // In the config file, profiles other than `default` are sections named `profile NAME`.
        let configSection =
            configFile[profile == "default" ? "default" : "profile \(profile)"] ?? configFile[profile] ?? [:]
        let region =
            value("AWS_REGION") ?? value("AWS_DEFAULT_REGION")
            ?? configSection["region"].flatMap { $0.isEmpty ? nil : $0 }

        if let key = value("AWS_ACCESS_KEY_ID"), let secret = value("AWS_SECRET_ACCESS_KEY") {
            return Resolved(
                credentials: AWSCredentials(
                    accessKeyID: key, secretAccessKey: secret, sessionToken: value("AWS_SESSION_TOKEN")),
                region: region, source: "environment")
        }
        for section in [credentialsFile[profile], configSection] {
            if let section, let key = section["aws_access_key_id"], let secret = section["aws_secret_access_key"],
                !key.isEmpty, !secret.isEmpty
            {
                let token = section["aws_session_token"].flatMap { $0.isEmpty ? nil : $0 }
                return Resolved(
                    credentials: AWSCredentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token),
                    region: region, source: "profile \(profile)")
            }
        }
        if value("AWS_ACCESS_KEY_ID") != nil || value("AWS_SECRET_ACCESS_KEY") != nil {
            throw AWSCredentialsError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together")
        }
        throw AWSCredentialsError(
            "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile \(profile.debugDescription) "
                + "aws_access_key_id and aws_secret_access_key in \(credentialsPath) (AWS_PROFILE picks another profile)"
        )
    }

    private func value(_ name: String) -> String? {
        environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `[section]` headers and `key = value` lines; `#` and `;` start comments; keys are lower-cased, as the CLI does.
    package static func parseINI(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                let name = line.dropFirst().dropLast().split(separator: " ", omittingEmptySubsequences: true).joined(
                    separator: " ")
                current = name
                sections[name, default: [:]] = sections[name] ?? [:]
                continue
            }
            guard let current, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[current, default: [:]][key] = value
        }
        return sections
    }
}
