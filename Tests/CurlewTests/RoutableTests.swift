import Curlew
import CurlewTestSupport
import Foundation
import Synchronization
import Testing

/// A `Routable` takes the arguments a `Route` does (Konex's `requestArray(of:request:plugins:…)`, downloads,
/// streams, progress), against httpbin, so the two ways of describing an endpoint never drift apart.
@Suite("Routable calls")
struct RoutableTests {
    private struct UUIDRequest: Routable {
        var path: String { "/uuid" }
    }

    private struct BytesRequest: Routable {
        let count: Int
        var path: String { "/bytes/\(count)" }
    }

    private struct Echo: Decodable { let url: String }

    private struct PostsRequest: Routable {
        var path: String { "/anything" }
        var method: HTTPRequest.Method { .post }
        var parameters: Parameters? { ["user": ["name": "Ada", "age": 36]] }
    }

    @Test
    func requestObjectAndArrayTakePluginsProcessorsValidatorsAndProgress() async throws {
        let httpbin = try await HTTPBinServer.shared()
        let provider = TestProvider(baseURL: httpbin.baseURL, transport: CurlewClient.shared)
        let heard = Mutex<Int>(0)
        let plugin = AnyPlugin(didReceive: { _, _ in heard.withLock { $0 += 1 } })
        let progressed = Mutex<Bool>(false)
        let echo = try await provider.requestObject(
            of: Echo.self, PostsRequest(), plugins: [plugin], responseProcessors: [], responseValidators: [],
            progress: { if $0.isComplete { progressed.withLock { $0 = true } } })
        #expect(echo.url.hasSuffix("/anything"))
        // httpbin's /anything echoes an object; wrapped in an array by a processor, it decodes as one.
        let wrapped = try await provider.requestArray(
            of: Echo.self, PostsRequest(), plugins: [plugin],
            responseProcessors: [AnyResponseProcessor.json { .array([$0]) }])
        #expect(wrapped.count == 1)
        #expect(heard.withLock { $0 } == 2)
        #expect(progressed.withLock { $0 })
    }

    @Test
    func downloadAndStreamTakeARoutable() async throws {
        let httpbin = try await HTTPBinServer.shared()
        let provider = TestProvider(baseURL: httpbin.baseURL, transport: CurlewClient.shared)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "curlew-routable-\(UInt64.random(in: 0...UInt64.max))"
        ).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let downloaded = try await provider.download(BytesRequest(count: 2048), to: path, progress: { _ in })
        #expect(downloaded.status == .ok)
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue == 2048)
        let streamed = try await provider.stream(BytesRequest(count: 4096))
        var count = 0
        for try await chunk in streamed.body { count += chunk.count }
        #expect(count == 4096)
    }
}
