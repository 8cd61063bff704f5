import CurlewEngine
import CurlewTestSupport
import Foundation
import Glibc
import Testing

/// Bodies of any size stream in constant memory: 1 GiB each way, with the process's peak RSS growing by less
/// than 32 MiB. Peak RSS is process-wide, so this suite runs one test at a time in a process of its own
/// (`make test` runs it apart, like the descriptor tests).
@Suite("Constant memory for 1 GiB bodies", .serialized)
struct MemoryTests {
    static let gibibyte = 1 << 30
    static let allowedGrowth = 32 * 1024 * 1024

    @Test
    func aRawOneGibibyteFileUploadStaysWithinBounds() async throws {
        let file = try SparseFile(size: Self.gibibyte)
        try await measurePeakGrowth { client, nginx in
            let request = try CurlewRequest(
                method: .post, url: "\(nginx.httpBaseURL)/upload", body: .file(.path(file.path)))
            let response = try await client.execute(request)
            #expect(try response.json()["bytes"] as? Int == Self.gibibyte)
        }
    }

    @Test
    func aOneGibibyteMultipartFileUploadStaysWithinBounds() async throws {
        let file = try SparseFile(size: Self.gibibyte)
        try await measurePeakGrowth { client, nginx in
            var form = MultipartForm()
            form.append(value: "1", forKey: "a")
            form.append(value: "2", forKey: "b")
            form.append(fileAt: file.path, forKey: "file")
            let request = try CurlewRequest(method: .post, url: "\(nginx.httpBaseURL)/upload", body: .multipart(form))
            let response = try await client.execute(request)
            let received = try #require(response.json()["bytes"] as? Int)
            #expect(received > Self.gibibyte)
            #expect(Int64(received) == response.metrics.bytesSent)
        }
    }

    @Test
    func aOneGibibyteGzipCompressedStreamStaysWithinBounds() async throws {
        try await measurePeakGrowth { client, nginx in
            // JSON lines, produced while they are sent.
            let line = Array(#"{"id": 12345, "name": "item", "tags": ["a", "b", "c"], "score": 0.5}"#.utf8) + [10]
            let chunk = Array((0..<(65_536 / line.count)).map { _ in line }.joined())
            let chunks = Self.gibibyte / chunk.count
            let source = AsyncStream<[UInt8]> { continuation in
                Task {
                    for _ in 0..<chunks { continuation.yield(chunk) }
                    continuation.finish()
                }
            }
            var request = try CurlewRequest(
                method: .post, url: "\(nginx.httpBaseURL)/upload", body: .stream(RequestBodyStream(source)))
            request.bodyCompression = .gzip(level: 1)
            let response = try await client.execute(request)
            let received = try #require(response.json()["bytes"] as? Int)
            #expect(received > 0 && received < Self.gibibyte / 10)
        }
    }

    @Test
    func aOneGibibyteDownloadThroughASlowConsumerStaysWithinBounds() async throws {
        let nginx = try await NginxServer.shared()
        let name = "memory-\(UUID().uuidString).bin"
        let file = try SparseFile(size: Self.gibibyte, path: nginx.scratchDirectory + "/" + name)
        try await measurePeakGrowth { client, nginx in
            let response = try await client.stream(try CurlewRequest(url: "\(nginx.httpBaseURL)/dav/\(name)"))
            #expect(response.status == .ok)
            var received = 0
            var chunks = 0
            for try await piece in response.body {
                received += piece.count
                chunks += 1
                if chunks % 16 == 0 { try await Task.sleep(for: .milliseconds(1)) }  // slower than the network
            }
            #expect(received == Self.gibibyte)
        }
        _ = file
    }

    private func measurePeakGrowth(
        _ test: String = #function, _ body: (CurlewClient, NginxServer) async throws -> Void
    ) async throws {
        let nginx = try await NginxServer.shared()
        let client = CurlewClient()
        // Warm up: the first transfer allocates the loops' and libcurl's long-lived buffers.
        _ = try await client.execute(try CurlewRequest(url: "\(nginx.httpBaseURL)/small"))
        let baseline = try PeakMemory.resetPeak()
        do {
            try await body(client, nginx)
        } catch {
            await client.shutdown()
            throw error
        }
        let peak = try PeakMemory.peakResident()
        await client.shutdown()
        let growth = peak - baseline
        print("\(test): peak RSS grew by \(growth / 1024) KiB")
        #expect(growth < Self.allowedGrowth, "peak RSS grew by \(growth / 1024 / 1024) MiB")
    }
}

/// The process's resident memory from `/proc/self/status`.
enum PeakMemory {
    /// Resets the peak (VmHWM) to the current resident size (Linux `clear_refs` 5) and returns that size.
    static func resetPeak() throws -> Int {
        try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        return try field("VmRSS")
    }

    static func peakResident() throws -> Int {
        try field("VmHWM")
    }

    private static func field(_ name: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }),
            let kilobytes = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "")
        else { throw CurlewError(code: .transport, detail: "no \(name) in /proc/self/status") }
        return kilobytes * 1024
    }
}

/// A file of the given size that takes no disk space (a hole), removed when released.
final class SparseFile {
    let path: String

    init(size: Int, path: String = NSTemporaryDirectory() + "curlew-sparse-\(UUID().uuidString)") throws {
        self.path = path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0, ftruncate(descriptor, off_t(size)) == 0 else {
            throw CurlewError(code: .requestBodyFailed, detail: "cannot create \(path)")
        }
        close(descriptor)
    }

    deinit { unlink(path) }
}
