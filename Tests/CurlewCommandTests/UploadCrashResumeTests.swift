import CurlewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Issue 26's proof that no file is written twice after a crash, in every mode: a ``HoldingProxy`` lets the store
/// take one file's bytes and holds the 2xx, the test kills `curlew` with SIGKILL at exactly that moment (the journal
/// still says "in flight"), runs the same command again, and counts the writes in the store's own log.
@Suite struct UploadCrashResumeTests {
    static let names = ["a.bin", "dir/b c.bin", "held.bin", "z.bin"]

    /// Starts `curlew upload` with `arguments` (through the proxy), waits for the proxy to hold the write of
    /// `held.bin`, kills the command and checks it died of the signal.
    static func killWhileHeld(
        _ arguments: [String], proxy: HoldingProxy, environment: [String: String] = [:]
    ) async throws {
        let running = try CurlewBinary.start(arguments, environment: environment)
        do {
            try await proxy.waitForStored("held.bin", timeout: .seconds(90))
        } catch {
            running.signal(SIGKILL)
            let output = try await running.finish()
            throw TestSupportError("\(error)\ncurlew: \(output.stdout)\n\(output.stderr)")
        }
        running.signal(SIGKILL)
        #expect(try await running.finish().status == 128 + SIGKILL)
    }

    static func writeTree(_ tree: SourceTree, size: Int) throws {
        for name in names { try tree.write(name, SourceTree.content(for: name, size: size)) }
    }

    @Test(arguments: [false, true]) func putWritesEachFileOnceAfterAKillBetweenStoreAndResponse(
        gzip: Bool
    )
        async throws
    {
        let nginx = try await NginxServer.shared()
        let target = DavTarget(nginx: nginx)
        let tree = try SourceTree(prefix: "curlew-crash-put")
        let journal = tree.root + ".journal"
        let proxy = try await HoldingProxy.start(upstreamPort: nginx.httpPort, hold: "^PUT .*held\\.bin")
        defer {
            proxy.stop()
            tree.remove()
            target.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try Self.writeTree(tree, size: 20_000)
        let options = ["--journal", journal, "--concurrency", "1", "--no-progress"] + (gzip ? ["--gzip"] : [])
        let proxied = target.url.replacingOccurrences(of: nginx.httpBaseURL, with: proxy.baseURL)
        try await Self.killWhileHeld(["upload", tree.root, proxied] + options, proxy: proxy)

        // Resumed at the address it was killed at, as a user runs the command again: the journal is bound to it. The
        // proxy held only the first write, so it passes this run's on.
        let resumed = try await CurlewBinary.run(["upload", tree.root, proxied, "--json"] + options)
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        let json = try resumed.json()
        // held.bin was stored whole before the kill: the resumed run finds it instead of sending it.
        #expect((json["alreadyThereByRule"] as? [String: Int])?["in-flight-size"] == 1, "\(json)")

        try await waitUntil(timeout: .seconds(10), "nginx to log a PUT of every file") {
            try target.acceptedPuts().count == Self.names.count
        }
        let puts = try target.acceptedPuts()
        #expect(puts.values.allSatisfy { $0 == 1 }, "written more than once: \(puts.filter { $0.value != 1 })")
        for name in Self.names {
            let stored = target.storedPath(name)
            var bytes = FileManager.default.contents(atPath: stored).map(Array.init)
            if gzip {
                // gzip(1) is the independent decoder.
                let decoded = stored + ".decoded"
                let gunzip = try await CurlewBinary.runProgram([
                    "/bin/sh", "-c", "gzip -dc < \"$0\" > \"$1\"", stored, decoded,
                ])
                #expect(gunzip.status == 0, "\(gunzip.stderr)")
                bytes = FileManager.default.contents(atPath: decoded).map(Array.init)
            }
            #expect(bytes == SourceTree.content(for: name, size: 20_000), "\(name)")
        }
    }

    /// A form POST cannot be looked up afterwards: a store that honours `Idempotency-Key` is what keeps the resent
    /// form from becoming a second copy.
    @Test func formsAreWrittenOnceWhenTheServerHonoursIdempotencyKeys() async throws {
        let server = try await RecordingServer.start()
        let proxy = try await HoldingProxy.start(
            upstreamPort: server.port, hold: "^POST ", honouringIdempotencyKeys: true)
        let tree = try SourceTree(prefix: "curlew-crash-forms")
        let journal = tree.root + ".journal"
        defer {
            proxy.stop()
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        try Self.writeTree(tree, size: 3000)
        let arguments = [
            "upload", tree.root, proxy.baseURL + "/forms", "--mode", "multipart", "--journal", journal,
            "--concurrency", "1", "--no-progress",
        ]
        // The first form is stored and its response held: the kill comes before the client hears of it.
        let running = try CurlewBinary.start(arguments)
        try await proxy.waitForStored("/forms", timeout: .seconds(90))
        running.signal(SIGKILL)
        #expect(try await running.finish().status == 128 + SIGKILL)
        #expect(server.requests.count == 1)
        let heldForm = try #require(server.requests.first)
        let keyOfTheHeldForm = try #require(heldForm.header("idempotency-key"))
        let heldParts = try #require(
            MultipartParts.parse(body: heldForm.body, contentType: heldForm.header("content-type") ?? ""))
        let heldPath = String(decoding: heldParts[0].content, as: UTF8.self)

        // Resumed through the same proxy: it holds only the first stored write, and it remembers the key.
        let resumed = try await CurlewBinary.run(arguments + ["--json"])
        try await server.shutdown()
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(proxy.markers().contains("replayed \(keyOfTheHeldForm)"), "\(proxy.markers())")
        // The run names the form it sent again: the user can see which file may be stored twice elsewhere.
        #expect(try resumed.json()["resentAfterCrash"] as? [String] == [heldPath], "\(resumed.stdout)")
        var paths: [String: Int] = [:]
        for request in server.requests {
            let contentType = try #require(request.header("content-type"))
            let parts = try #require(MultipartParts.parse(body: request.body, contentType: contentType))
            let path = String(decoding: parts[0].content, as: UTF8.self)
            paths[path, default: 0] += 1
            #expect(parts.last?.content == SourceTree.content(for: path, size: 3000), "\(path)")
        }
        #expect(paths == Dictionary(uniqueKeysWithValues: Self.names.map { ($0, 1) }), "\(paths)")
    }
}

/// The same proof against moto with signature checks on (the proxy passes the signed requests unchanged): S3 single
/// PUT, the last part of a multipart upload, and CompleteMultipartUpload, each stored with its reply held at the kill.
@Suite struct UploadS3CrashResumeTests {
    enum HeldWrite: String, CaseIterable, Sendable {
        case singlePut, uploadPart, completeMultipartUpload
    }

    @Test(arguments: HeldWrite.allCases) func s3WritesEachFileOnceAfterAKillBetweenStoreAndResponse(
        held: HeldWrite
    ) async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("crash")
        let tree = try SourceTree(prefix: "curlew-crash-s3")
        let journal = tree.root + ".journal"
        defer {
            tree.remove()
            try? FileManager.default.removeItem(atPath: journal)
        }
        let partSize = 5 << 20
        // held.bin goes up in three parts unless the single PUT is the write under test.
        let heldSize = held == .singlePut ? 40_000 : 2 * partSize + 1000
        try await offCooperativePool {
            for name in UploadCrashResumeTests.names where name != "held.bin" {
                try UploadS3UploaderTests.writeRandomFile(tree.root + "/" + name, size: 30_000)
            }
            try UploadS3UploaderTests.writeRandomFile(tree.root + "/held.bin", size: heldSize)
        }
        let hold =
            switch held {
            case .singlePut: "^PUT /\(bucket)/held\\.bin$"
            case .uploadPart: "^PUT /\(bucket)/held\\.bin\\?partNumber=3&"
            case .completeMultipartUpload: "^POST /\(bucket)/held\\.bin\\?uploadId="
            }
        let proxy = try await HoldingProxy.start(upstreamPort: moto.port, hold: hold)
        defer { proxy.stop() }
        let arguments = [
            "upload", tree.root, "s3://\(bucket)/", "--part-size", "5MiB", "--concurrency", "1", "--journal", journal,
            "--no-progress",
        ]
        let environment = moto.credentialEnvironment.merging(["HOME": "/nonexistent"]) { $1 }
        try await UploadCrashResumeTests.killWhileHeld(
            arguments + ["--endpoint", proxy.baseURL], proxy: proxy, environment: environment)

        // Resumed through the same endpoint (the journal is bound to it); the proxy held only the first write.
        let resumed = try await CurlewBinary.run(
            arguments + ["--endpoint", proxy.baseURL, "--json"], environment: environment, timeout: .seconds(120))
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")

        // moto's own log: one 2xx object write per file (a PUT without a part number, or a completion).
        var writes: [String: Int] = [:]
        for request in moto.loggedRequests({ method, target in
            target.hasPrefix("/\(bucket)/")
                && ((method == "PUT" && !target.contains("partNumber="))
                    || (method == "POST" && target.contains("uploadId=")))
        }) where (200..<300).contains(request.status) {
            let key = String(request.target.dropFirst(bucket.count + 2).split(separator: "?")[0])
            writes[key.removingPercentEncoding ?? key, default: 0] += 1
        }
        #expect(
            writes == Dictionary(uniqueKeysWithValues: UploadCrashResumeTests.names.map { ($0, 1) }), "\(writes)")
        if held != .singlePut {
            let parts = UploadS3UploaderTests.acceptedParts(moto, bucket: bucket)
            #expect(parts == [1: 1, 2: 1, 3: 1], "parts written: \(parts)")
        }
        // boto3 downloads every object back.
        let stored = try await UploadS3UploaderTests.inventory(moto, bucket)
        for name in UploadCrashResumeTests.names {
            #expect(
                stored[name]?["sha256"] as? String
                    == (try await UploadS3UploaderTests.hexSHA256(ofFile: tree.root + "/" + name)), "\(name)")
        }
        #expect(try await UploadS3UploaderTests.openUploads(moto, bucket) == 0)
    }
}
