import Curlew
import CurlewTestSupport
import CurlewTesting
import Foundation
import Testing

@Suite struct EnvironmentTests {
    private static let yaml = """
        default: production
        environments:
          production:
            baseURL: https://api.example.com/v1
            apiKey: live
            retries: 3
          staging:
            baseURL: https://staging.example.com/v1
            apiKey: stage
          testing:
            baseURL: https://api.example.com/v1
            fixtures: fixtures
        """

    @discardableResult
    private func withFile<T>(_ text: String, name: String = "env.yaml", _ body: (String) throws -> T) throws -> T {
        let directory = NSTemporaryDirectory() + "curlew-env-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return try body(path)
    }

    @Test func theFilesDefaultIsUsedWhenNothingElseChooses() throws {
        try withFile(Self.yaml) { path in
            let environment = try Environment.load(file: path, processEnvironment: [:])
            #expect(environment.name == "production")
            #expect(environment.baseURL == "https://api.example.com/v1")
            #expect(environment["apiKey"] == "live")
            #expect(environment["retries"] == "3")
            #expect(!environment.isTesting)
        }
    }

    @Test func theVariableChoosesAndAnArgumentWinsOverIt() throws {
        try withFile(Self.yaml) { path in
            let byVariable = try Environment.load(file: path, processEnvironment: ["CURLEW_ENVIRONMENT": "staging"])
            #expect(byVariable["apiKey"] == "stage")
            let byArgument = try Environment.load(
                file: path, name: "production", processEnvironment: ["CURLEW_ENVIRONMENT": "staging"])
            #expect(byArgument.name == "production")
            let fileByVariable = try Environment.load(
                processEnvironment: ["CURLEW_ENVIRONMENT_FILE": path, "CURLEW_ENVIRONMENT": "staging"])
            #expect(fileByVariable.name == "staging")
        }
    }

    @Test func testingServesFixturesFromAFolderBesideTheFile() throws {
        try withFile(Self.yaml) { path in
            let environment = try Environment.load(file: path, name: "testing", processEnvironment: [:])
            #expect(environment.isTesting)
            let directory = (path as NSString).deletingLastPathComponent
            #expect(environment.fixturesDirectory == directory + "/fixtures")
            #expect(environment.transport() is FixtureTransport)
            let production = try Environment.load(file: path, processEnvironment: [:])
            #expect(!(production.transport() is FixtureTransport))
        }
    }

    private struct Session: Decodable { let token: String }

    @Test func theTestingEnvironmentServesRouteFixturesThroughTheProvider() async throws {
        try await withFileAsync(Self.yaml) { path in
            let directory = (path as NSString).deletingLastPathComponent + "/fixtures"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try #"{"token":"from-fixture"}"#.write(toFile: directory + "/login.json", atomically: true, encoding: .utf8)
            let environment = try Environment.load(file: path, processEnvironment: ["CURLEW_ENVIRONMENT": "Testing"])
            let provider = TestProvider(baseURL: environment.baseURL, transport: environment.transport())
            let session = try await provider.requestObject(
                of: Session.self, Route(path: "/login", method: .post, params: ["user": "a"], mockData: "login"))
            #expect(session.token == "from-fixture")
            // A route without a fixture fails loudly instead of reaching the network.
            await #expect(throws: ProviderError.self) { try await provider.request(Route(path: "/me")) }
        }
    }

    private func withFileAsync(_ text: String, _ body: (String) async throws -> Void) async throws {
        let directory = NSTemporaryDirectory() + "curlew-env-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/env.yaml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try await body(path)
    }

    @Test func jsonFilesWorkToo() throws {
        let json = #"{"environments": {"local": {"baseURL": "http://127.0.0.1:1", "token": "t"}}, "default": "local"}"#
        try withFile(json, name: "env.json") { path in
            let environment = try Environment.load(file: path, processEnvironment: [:])
            #expect(environment.baseURL == "http://127.0.0.1:1")
            #expect(environment["token"] == "t")
        }
    }

    @Test func mistakesAreExplained() throws {
        try withFile(Self.yaml) { path in
            #expect {
                try Environment.load(file: path, name: "qa", processEnvironment: [:])
            } throws: { error in
                "\(error)".contains("no environment \"qa\"") && "\(error)".contains("production, staging, testing")
            }
        }
        try withFile("environments: [1, 2]") { path in
            #expect(throws: EnvironmentError.self) { try Environment.load(file: path, processEnvironment: [:]) }
        }
        #expect(throws: EnvironmentError.self) {
            try Environment.load(file: "/nonexistent/env.yaml", processEnvironment: [:])
        }
        #expect(throws: EnvironmentError.self) { try Environment.load(processEnvironment: [:]) }
    }

    /// YAML 1.1's types rewrote values: `0123` became "83" (octal), `0789` "789.0", `2.10` "2.1", `NO` "false",
    /// `2024-01-01` a date's description, `1_000` "1000". A value is the text written.
    @Test(arguments: [
        ("0123", "0123"), ("0789", "0789"), ("2.10", "2.10"), ("NO", "NO"), ("yes", "yes"),
        ("2024-01-01", "2024-01-01"), ("1_000", "1_000"), ("0x1F", "0x1F"), ("1e3", "1e3"), (".inf", ".inf"),
        ("'0123'", "0123"), (#""~""#, "~"), ("''", ""), ("plain text", "plain text"),
    ])
    func aValueIsTheTextWrittenNotWhatYAMLTypesMakeOfIt(written: String, value: String) throws {
        try withFile("environments:\n  local:\n    baseURL: http://127.0.0.1:1\n    setting: \(written)\n") { path in
            let environment = try Environment.load(file: path, name: "local", processEnvironment: [:])
            #expect(environment["setting"] == value)
        }
    }

    /// An empty value used to be the description of `NSNull` ("<null>"), and `~` or `null` as well.
    @Test(arguments: ["", " ~", " null", " Null", " NULL"])
    func aNullValueIsNoValue(written: String) throws {
        try withFile("environments:\n  local:\n    baseURL: http://127.0.0.1:1\n    setting:\(written)\n") { path in
            let environment = try Environment.load(file: path, name: "local", processEnvironment: [:])
            #expect(environment["setting"] == nil)
        }
    }

    /// Values shared through an anchor and a `<<` merge key are read as written too, and the environment's own
    /// values win over merged ones.
    @Test func mergedValuesAreReadAsWrittenAndTheEnvironmentsOwnWin() throws {
        let yaml = """
            default: NO
            shared: &shared
              apiKey: 0123
              apiVersion: 2.10
            environments:
              NO:
                <<: *shared
                baseURL: https://api.example.no
                apiVersion: 3.10
            """
        try withFile(yaml) { path in
            let environment = try Environment.load(file: path, processEnvironment: [:])
            #expect(environment.name == "NO")
            #expect(environment["apiKey"] == "0123")
            #expect(environment["apiVersion"] == "3.10")
        }
    }

    @Test func everyPrintingNamesTheSettingsButHidesTheirValues() {
        // Nothing marks which values are secrets (an `apiKey` is one, a `region` is not): every value is hidden.
        let environment = Environment(
            name: "staging", baseURL: "https://deploy:url-secret@staging.example.com/v1",
            values: ["apiKey": "key-secret", "clientSecret": "client-secret-value"], fixturesDirectory: "/srv/fixtures")
        for (way, text) in everyPrinting(of: environment) {
            for secret in ["url-secret", "key-secret", "client-secret-value"] {
                #expect(!text.contains(secret), "\(way): \(text)")
            }
            #expect(text.contains("staging.example.com/v1") && text.contains("staging"), "\(way): \(text)")
            #expect(text.contains("apiKey") && text.contains("clientSecret"), "\(way): \(text)")
            #expect(text.contains("/srv/fixtures"), "\(way): \(text)")
        }
    }
}
