import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import Testing

@Suite struct HTTPProviderStreamingTests {
    private static let document = "streamed and downloaded, byte for byte"
    private static var documentPath: String { "/base64/" + Data(document.utf8).base64EncodedString() }

    @Test(arguments: BackendKind.allCases)
    func downloadsLandInTheFileCompleteOrNotAtAll(kind: BackendKind) async throws {
        let provider = TestProvider(try await Backend.make(kind))
        let path = NSTemporaryDirectory() + "curlew-download-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        let response = try await provider.download(Route(path: Self.documentPath), to: path)
        #expect(response.status == .ok)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == Self.document)

        let missing = path + ".missing"
        await #expect {
            try await provider.download(Route(path: "/status/404"), to: missing)
        } throws: { error in
            (error as? ProviderError)?.status == .notFound
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test(arguments: BackendKind.allCases)
    func streamedResponsesDeliverTheBodyAfterTheHead(kind: BackendKind) async throws {
        let provider = TestProvider(try await Backend.make(kind))
        let response = try await provider.stream(Route(path: Self.documentPath))
        #expect(response.status == .ok)
        var received: [UInt8] = []
        for try await chunk in response.body { received += chunk }
        #expect(String(decoding: received, as: UTF8.self) == Self.document)

        do {
            _ = try await provider.stream(Route(path: "/status/418"))
            Issue.record("418 should fail")
        } catch  where error.code == .status {
            #expect(error.response?.string().contains("teapot") == true)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    /// A refused status's explanation is the body's first 64 KiB, as the documentation says, however long the body:
    /// a proxy's HTML error page, a verbose JSON error. Before, a body past 64 KiB was dropped whole.
    @Test func aRefusedStreamKeepsTheFirst64KiBOfALongBody() async throws {
        let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        func expectFirst64KiB(of provider: TestProvider) async {
            let error = await #expect(throws: ProviderError.self) { _ = try await provider.stream(Route(path: "/big")) }
            #expect(error?.code == .status)
            #expect(error?.response?.status == .internalServerError)
            #expect(error?.response?.body.count == 64 * 1024)
            #expect(error?.response?.body.elementsEqual(body.prefix(64 * 1024)) == true, "the body's first bytes")
        }
        try await withScriptedServer({ _ in ScriptedResponse(status: 500, body: body) }) { server in
            await expectFirst64KiB(of: TestProvider(baseURL: server.baseURL))
        }
        let mock = MockTransport(stubs: [
            Stub(matching: { _ in true }, respond: { _, _ in StubResponse(status: .internalServerError, body: body) })
        ])
        await expectFirst64KiB(of: TestProvider(baseURL: "https://api.example.com", transport: mock))
    }
}
