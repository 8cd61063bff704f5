import CurlewEngine

/// A named set of settings for one deployment of an API: production, staging, testing (LKAPI's `Environment`,
/// chosen by configuration instead of by build target).
///
/// ```yaml
/// # api-environments.yaml (JSON works too)
/// default: production
/// environments:
///   production:
///     baseURL: https://api.example.com/v1
///     apiKey: live-key
///   staging:
///     baseURL: https://staging.example.com/v1
///     apiKey: staging-key
///   testing:
///     baseURL: https://api.example.com/v1
///     fixtures: Fixtures        # relative to this file
/// ```
/// ```swift
/// let environment = try Environment.load(file: "api-environments.yaml")   // CURLEW_ENVIRONMENT=staging picks staging
/// struct API: HTTPProvider {
///     let environment: Environment
///     var baseURL: String { environment.baseURL }
///     var additionalHeaders: [String: String] { ["X-Api-Key": environment["apiKey"] ?? ""] }
/// }
/// ```
/// The environment named `testing` (any case) ``isTesting``: ``transport(live:)`` is then a ``FixtureTransport``
/// that serves the routes' fixtures from ``fixturesDirectory`` through the whole pipeline instead of the network.
public struct Environment: Sendable, Hashable {
    /// The environment's name, as in the file.
    public let name: String
    /// The base URL providers use in this environment.
    public let baseURL: String
    /// Every other setting, as text.
    public let values: [String: String]
    /// Where fixtures live (the `fixtures` key), resolved against the file's directory.
    public let fixturesDirectory: String?

    /// An environment made in code, for tests or for settings that come from elsewhere.
    public init(name: String, baseURL: String, values: [String: String] = [:], fixturesDirectory: String? = nil) {
        self.name = name
        self.baseURL = baseURL
        self.values = values
        self.fixturesDirectory = fixturesDirectory
    }

    /// A setting of this environment.
    public subscript(key: String) -> String? { values[key] }

    /// Whether this is the testing environment, which serves fixtures instead of calling the API.
    public var isTesting: Bool { name.lowercased() == "testing" }
}

/// Printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger), an environment shows its
/// name, its base URL as messages name URLs (a password in it replaced), the names of its settings and where its
/// fixtures live; never a setting's value. Nothing in the file says which values are secrets (an `apiKey` is, a
/// `region` is not), so none is shown: read one with its key.
extension Environment: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `Environment(staging, baseURL: https://staging.example.com/v1, values: [apiKey: <redacted>], fixturesDirectory:
    /// nil)`.
    public var description: String {
        let settings = values.keys.sorted().map { "\($0): \(CurlewRequest.redactionMarker)" }.joined(separator: ", ")
        return "Environment(\(name), baseURL: \(shownBaseURL), values: [\(settings)], fixturesDirectory: "
            + "\(fixturesDirectory ?? "nil"))"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the name, the redacted base URL, each setting's name with the marker in place of
    /// its value, and the fixtures directory.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "name": name, "baseURL": shownBaseURL,
                "values": values.mapValues { _ in CurlewRequest.redactionMarker },
                "fixturesDirectory": fixturesDirectory as Any,
            ],
            displayStyle: .struct)
    }

    private var shownBaseURL: String { URLRedaction.messages.displaying(baseURL) }
}

/// Why an environment could not be loaded.
public struct EnvironmentError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, naming the file and the environment.
    public let description: String
}
