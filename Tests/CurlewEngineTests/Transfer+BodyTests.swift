import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Glibc
import Testing

/// File request bodies: streamed with pread, exact on the wire, replayable, and never sent short or mixed.
@Suite("File request bodies")
struct TransferBodyTests {
    @Test(arguments: allLoops)
    func aFileArrivesByteForByte(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let file = try TemporaryFile(randomBytes: 5 * 1024 * 1024 + 17)
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let request = try CurlewRequest(
                    method: .put, url: "\(server.baseURL)/upload", body: .file(.path(file.path)))
                let json = try await client.execute(request).json()
                #expect(json["bytes"] as? Int == file.bytes.count)
                #expect(json["fnv1a64"] as? String == checksum(file.bytes[...]))
            }
        }
    }

    @Test(arguments: allLoops)
    func aSliceOfADescriptorIsSentAndTheDescriptorStaysTheCallers(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let file = try TemporaryFile(randomBytes: 100_000)
        let descriptor = open(file.path, O_RDONLY | O_CLOEXEC)
        defer { close(descriptor) }
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                let request = try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/upload",
                    body: .file(.descriptor(descriptor, offset: 1000, length: 4096)))
                let json = try await client.execute(request).json()
                #expect(json["bytes"] as? Int == 4096)
                #expect(json["fnv1a64"] as? String == checksum(file.bytes[1000..<5096]))
            }
        }
        #expect(fcntl(descriptor, F_GETFD) >= 0)
        #expect(lseek(descriptor, 0, SEEK_CUR) == 0)  // pread never moved the caller's offset
    }

    @Test(arguments: allLoops)
    func aFileBodyIsReplayedOnA307Redirect(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let file = try TemporaryFile(text: "replay me, byte for byte")
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop) { client in
            let request = try CurlewRequest(
                method: .post, url: "\(httpbin.baseURL)/redirect-to?url=/anything&status_code=307",
                body: .file(.path(file.path)))
            let json = try await client.execute(request).json()
            #expect(json["data"] as? String == "replay me, byte for byte")
        }
    }

    @Test(arguments: allLoops)
    func unreadableOrUnsuitableFilesFailBeforeAnythingIsSent(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let file = try TemporaryFile(text: "short")
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                for body in [
                    FileBody.path("/nonexistent/curlew-\(UUID().uuidString)"), .path("/tmp"),
                    .path(file.path, offset: 2, length: 10), .descriptor(-1),
                ] {
                    let request = try CurlewRequest(method: .put, url: "\(server.baseURL)/upload", body: .file(body))
                    let code = await curlewErrorCode { _ = try await client.execute(request) }
                    #expect(code == .requestBodyFailed, "\(body)")
                }
            }
            #expect(server.requestsServed == 0)
        }
    }

    /// A path that has become a FIFO with no writer (`rm f; mkfifo f` after the file was chosen) fails the request
    /// at once, and the loop goes on serving. Before, `open` blocked the event loop until something wrote to the
    /// FIFO: this transfer and every other one on the loop stalled, and no timeout fired.
    @Test(arguments: allLoops)
    func aFIFOBodyFailsAtOnceAndTheLoopGoesOn(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let folder = NSTemporaryDirectory() + "curlew-fifo-body-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let fifo = folder + "/body"
        #expect(mkfifo(fifo, 0o600) == 0)
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                // Releases a loop the bug left blocked in open, so a failing run ends instead of hanging the
                // client's shutdown.
                defer {
                    let writer = open(fifo, O_WRONLY | O_NONBLOCK)
                    if writer >= 0 { close(writer) }
                }
                let request = try CurlewRequest(method: .put, url: "\(server.baseURL)/upload", body: .file(.path(fifo)))
                let code = try await withTimeout(.seconds(20), "a FIFO body") {
                    await curlewErrorCode { _ = try await client.execute(request) }
                }
                #expect(code == .requestBodyFailed)
                let next = try CurlewRequest(method: .put, url: "\(server.baseURL)/upload", body: .bytes([1, 2, 3]))
                let response = try await withTimeout(.seconds(20), "the next request") {
                    try await client.execute(next)
                }
                #expect(try response.json()["bytes"] as? Int == 3)
            }
            #expect(server.requestsServed == 1, "only the next request reached the server")
        }
    }

    /// The body is held back by `Expect: 100-continue` against a route that never answers, which opens a window
    /// in which the file changes after the transfer started and before its bytes are read.
    @Test(arguments: allLoops, ["shrink", "grow", "rewrite", "delete"])
    func aFileThatChangesWhileItIsSentFailsTheRequest(
        loop: CurlewClient.Configuration.EventLoopKind, change: String
    ) async throws {
        let file = try TemporaryFile(randomBytes: 64 * 1024)
        try await withLoopbackServer { server in
            try await withClient(loop) { client in
                var request = try CurlewRequest(
                    method: .put, url: "\(server.baseURL)/fault/never-answer", body: .file(.path(file.path)))
                // The window is the 100-continue wait: wide enough that the change lands in it on a loaded machine
                // (a CI run on a VM whose neighbours stalled it missed a 4 s window).
                request.expectContinue = .enabled(timeout: .seconds(12))
                request.timeouts = .init(total: .seconds(60))
                async let outcome = curlewErrorCode { _ = try await client.execute(request) }
                // On a thread of its own, so the change lands inside the window however busy the suite is.
                try await onDedicatedThread {
                    try await waitUntil(timeout: .seconds(30)) { server.requestsServed >= 1 }
                    switch change {
                    case "shrink": #expect(truncate(file.path, 1000) == 0)
                    case "grow": try file.append(Array(repeating: 7, count: 10))
                    case "rewrite": try file.overwriteKeepingSize()
                    default: #expect(unlink(file.path) == 0)
                    }
                }
                #expect(await outcome == .requestBodyFailed, "\(change)")
            }
        }
    }
}
