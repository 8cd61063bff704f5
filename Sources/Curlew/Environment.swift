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

/// Why an environment could not be loaded.
public struct EnvironmentError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, naming the file and the environment.
    public let description: String
}
