import CurlewEngine
import CurlewLoopbackServer
import Foundation
import Testing

/// The README's first example compiles (it is this code), runs, and stays word for word in the README.
@Suite("README example")
struct ReadmeExampleTests {
    @Test func firstExampleRunsAgainstALocalServer() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { try? await server.shutdown() } }
        let response = try await readmeExample(baseURL: server.baseURL)
        #expect(response.status == .ok)
        #expect(String(decoding: response.body, as: UTF8.self) == "hello, curlew")
    }

    @Test func readmeShowsExactlyThisExample() throws {
        let testFile = try String(contentsOfFile: #filePath, encoding: .utf8)
        let readme = try String(
            contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../README.md").path, encoding: .utf8)
        let lines = testFile.components(separatedBy: "\n")
        let marker = { (name: String) in { (line: String) in line.trimmingCharacters(in: .whitespaces) == "// " + name }
        }
        let begin = try #require(lines.firstIndex(where: marker("README-BEGIN")))
        let end = try #require(lines.firstIndex(where: marker("README-END")))
        let snippet = lines[(begin + 1)..<end].map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : $0 }
        #expect(snippet.count > 5)
        #expect(readme.contains(snippet.joined(separator: "\n")))
    }
}

private func readmeExample(baseURL: String) async throws -> CurlewResponse {
    // README-BEGIN
    let client = CurlewClient()
    var request = try CurlewRequest(method: .post, url: "\(baseURL)/echo")
    try request.addHeader("Content-Type", "text/plain")
    request.body = .bytes(Array("hello, curlew".utf8))
    request.timeouts = .init(connect: .seconds(2), total: .seconds(5))

    let response = try await client.execute(request)
    print(response.status.code, String(decoding: response.body, as: UTF8.self))
    print("first byte after", response.metrics.firstByte, "reused:", response.metrics.reusedConnection)

    await client.shutdown()
    // README-END
    return response
}
