import Curlew
import CurlewEngine
import CurlewTestSupport
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
}
