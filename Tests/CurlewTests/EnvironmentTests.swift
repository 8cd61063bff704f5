import Curlew
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
}
