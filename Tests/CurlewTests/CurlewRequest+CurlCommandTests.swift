import Curlew
import CurlewEngine
import CurlewTestSupport
import Foundation
import HTTPTypes
import Testing

@Suite struct CurlCommandTests {
    @Test func aPlainGETIsMinimal() throws {
        let request = try CurlewRequest(url: "http://127.0.0.1:8080/small")
        #expect(
            request.curlCommand()
                == "curl -H User-Agent: --compressed --location --max-redirs 10 --connect-timeout 10 http://127.0.0.1:8080/small"
        )
    }

    @Test func methodHeadersBodyAndVersionAreRendered() throws {
        var request = try CurlewRequest(method: .post, url: "https://api.example.com/login?x=1")
        try request.addHeader("Content-Type", "application/json")
        try request.addHeader("X-Quote", "it's")
        request.body = .bytes(Array(#"{"a":"b c"}"#.utf8))
        request.httpVersion = .http2
        request.timeouts = .init(CurlewClient.Timeouts(connect: .milliseconds(1500), total: .seconds(30), idle: nil))
        #expect(
            request.curlCommand()
                == #"curl -X POST -H 'Content-Type: application/json' -H 'X-Quote: it'\''s' -H User-Agent: -H Expect: --data-raw '{"a":"b c"}' --compressed --http2 --location --max-redirs 10 --connect-timeout 1.5 --max-time 30 'https://api.example.com/login?x=1'"#
        )
    }

    @Test func binaryBodiesUseEscapesAndFilesUseAt() throws {
        var request = try CurlewRequest(method: .put, url: "http://h/x")
        request.body = .bytes([0xFF, 0x41, 0x27])
        request.httpVersion = .http1_1
        request.decompression = .disabled
        request.redirects = .disabled
        #expect(
            request.curlCommand()
                == #"curl -X PUT -H User-Agent: -H Expect: -H Content-Type: --data-raw $'\xFFA\'' --http1.1 --connect-timeout 10 http://h/x"#
        )
        request.body = .file(.path("/tmp/a b"))
        #expect(request.curlCommand().contains("--data-binary '@/tmp/a b' --http1.1"))
        request.body = .file(.path("/tmp/a b", offset: 2, length: 3))
        #expect(request.curlCommand().contains("--data-binary @- --http1.1"))
        #expect(
            request.curlCommand().hasSuffix(
                "# placeholder, pipe in on standard input: the body (bytes 2..<5 of /tmp/a b)"))
        #expect(request.curlCommand(bodyFile: "/tmp/part").contains("--data-binary @/tmp/part --http1.1"))
        request.body = .bytes([0x41, 0x00])
        #expect(
            request.curlCommand().hasSuffix(
                "# placeholder, pipe in on standard input: the body (2 bytes with NUL, which no argument can hold)"))
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let route: Route
        var testDescription: String { "\(route.method) \(route.path)" }
    }

    private static let cases: [Case] = [
        Route(path: "/anything/search", params: ["q": "Zoë & co", "ids": [1, 2]], headers: ["X-Trace": "a'b\"c"]),
        Route(path: "/anything/login", method: .post, params: ["email": "foo@gmail.com", "password": "it's $HOME"]),
        Route(path: "/anything/about", method: .put, params: ["text": "Hey!! 😀"], encoding: .form),
        Route(
            path: "/anything/raw", method: .patch,
            body: .bytes([0x01, 0xC3, 0x28, 0x7F, 0x27, 0x5C], contentType: "application/octet-stream")),
        Route(path: "/anything/delete", method: .delete, headers: ["Empty": ""]),
        Route(
            path: "/anything/framed", method: .post, params: ["text": "framed by the engine"],
            headers: ["Content-Length": "3", "Transfer-Encoding": "gzip", "Proxy-Authorization": "Basic cHJveHk="]),
    ].map(Case.init)

    @Test(arguments: cases)
    func realCurlSendsWhatCurlewSends(case: Case) async throws {
        let route = `case`.route
        let server = try await HTTPBinServer.shared()
        let provider = TestProvider(baseURL: server.baseURL)
        let fromCurlew = try await provider.request(route).json()
        let command = try provider.curlCommand(for: route)
        let fromCurl = try JSONDecoder().decode(JSONValue.self, from: try await Self.run(command))
        for key in ["method", "url", "args", "form", "data", "json", "files"] {
            #expect(fromCurl[key] == fromCurlew[key], "\(key) differs for \(command)")
        }
        #expect(fromCurl["headers"] == fromCurlew["headers"], "headers differ for \(command)")
    }

    /// An empty `Proxy-Authorization` is no field to the engine (it would drop the client's proxy login): the
    /// command leaves it out too, where `--proxy-header 'Proxy-Authorization;'` would send an empty one.
    @Test func anEmptyProxyAuthorizationIsLeftOutOfTheCommand() throws {
        let provider = TestProvider(baseURL: "http://127.0.0.1:9")
        let empty = try provider.curlCommand(
            for: Route(path: "/anything", headers: ["Proxy-Authorization": "", "X-Kept": ""]))
        #expect(!empty.contains("Proxy-Authorization"), "\(empty)")
        #expect(empty.contains("X-Kept;"), "\(empty)")
        let given = try provider.curlCommand(
            for: Route(path: "/anything", headers: ["Proxy-Authorization": "Basic eA=="]))
        #expect(given.contains("--proxy-header 'Proxy-Authorization: Basic eA=='"), "\(given)")
    }

    @Test func aFormOfTextFieldsBecomesCurlsOwnForm() async throws {
        let server = try await HTTPBinServer.shared()
        let provider = TestProvider(baseURL: server.baseURL)
        var form = MultipartForm()
        form.append(value: "Zoë's \"album\" & more", forKey: "title")
        form.append(value: "@not-a-file", forKey: "note")
        let route = Route(path: "/anything/form", method: .post, multipartForm: form)
        let command = try provider.curlCommand(for: route)
        #expect(command.contains("--form-string"))
        #expect(!command.contains("--data-binary"))
        let fromCurlew = try await provider.request(route).json()
        let fromCurl = try JSONDecoder().decode(JSONValue.self, from: try await Self.run(command))
        #expect(fromCurl["form"] == fromCurlew["form"])
        #expect(fromCurl["form"] == ["title": "Zoë's \"album\" & more", "note": "@not-a-file"])
        #expect(fromCurl["method"] == "POST")
        #expect(fromCurl["headers"]["Content-Type"].stringValue.hasPrefix("multipart/form-data; boundary="))
    }

    /// `.seconds(Int64.max)` is how a caller says "no limit", and the engine takes it so: its milliseconds used to
    /// overflow and trap. A total the engine counts as no limit is no `--max-time`; a connect timeout that long is
    /// the longest curl takes.
    @Test func aTimeoutTooLongForMillisecondsIsNoLimitInsteadOfATrap() throws {
        var request = try CurlewRequest(url: "http://h/x")
        request.redirects = .disabled
        request.decompression = .disabled
        request.timeouts = .init(
            CurlewClient.Timeouts(connect: .seconds(Int64.max), total: .seconds(Int64.max), idle: nil))
        #expect(request.curlCommand() == "curl -H User-Agent: --connect-timeout 9223372036854775 http://h/x")
        request.timeouts = .init(
            CurlewClient.Timeouts(connect: .seconds(1), total: .seconds(Int64.max / 1000) + .seconds(1), idle: nil))
        #expect(request.curlCommand() == "curl -H User-Agent: --connect-timeout 1 http://h/x")
        // Long, but a deadline the engine keeps: curl gets it too.
        request.timeouts = .init(CurlewClient.Timeouts(connect: .seconds(1), total: .seconds(1_000_000_000), idle: nil))
        #expect(request.curlCommand() == "curl -H User-Agent: --connect-timeout 1 --max-time 1000000000 http://h/x")
    }

    /// The comment that says which file to pipe in ended at a line break in the file's path, and bash ran the rest
    /// of the path as a command. Run through bash, the line sends the file and runs nothing else.
    @Test func aBodyFilePathWithALineBreakStaysInsideTheComment() async throws {
        let server = try await HTTPBinServer.shared()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "curlew-body-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Its second line is a command (no slash: a path is one file's name).
        let bodyFile = directory.path + "/body\necho injected #"
        try Data("from the file".utf8).write(to: URL(fileURLWithPath: bodyFile))
        var request = try CurlewRequest(method: .post, url: server.baseURL + "/anything/file")
        request.body = .file(.path("/nonexistent", offset: 1, length: 2))
        request.httpVersion = .http1_1
        let command = request.curlCommand(bodyFile: bodyFile)
        #expect(command.contains("# placeholder, pipe in from '"), "\(command)")
        let output = try await Self.run(command)
        #expect(!String(decoding: output, as: UTF8.self).contains("injected"), "the path's second line ran")
        let echo = try JSONDecoder().decode(JSONValue.self, from: output)
        #expect(echo["data"] == "from the file")
    }

    /// Runs the line through bash (for `$'…'`), with `input` on standard input, returning what curl printed.
    ///
    /// Waits for curl without blocking a thread: the suite runs in parallel on a 2-thread cooperative pool, and a
    /// blocking wait there delays every other test's continuations.
    static func run(_ command: String, input: [UInt8]? = nil) async throws -> Data {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "curlew-curl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let inputURL = directory.appendingPathComponent("stdin")
        let outputURL = directory.appendingPathComponent("stdout")
        try Data(input ?? []).write(to: inputURL)
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        // Spawned with posix_spawn, as the test support spawns every other program, not with Foundation's Process:
        // its run() once crashed the whole test process in CI (a bad pointer in its memcpy) while the suite ran in
        // parallel. Standard input comes from the file through bash: the line may end with a comment, so nothing can
        // follow it.
        let line = "exec <'\(inputURL.path)'; curl --silent --show-error " + command.dropFirst("curl ".count)
        let pid = try spawnWithOutputFiles(
            ["/bin/bash", "-c", line], environment: ProcessInfo.processInfo.environment,
            stdoutPath: outputURL.path, stderrPath: directory.appendingPathComponent("stderr").path)
        var raw: Int32 = 0
        do {
            try await waitUntil(timeout: .seconds(60), pollInterval: .milliseconds(5), "curl to exit") {
                waitpid(pid, &raw, WNOHANG) == pid
            }
        } catch {
            kill(pid, SIGKILL)
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            throw error
        }
        let status = shellExitStatus(fromWaitStatus: raw)
        #expect(status == 0, "\(command) failed")
        return try Data(contentsOf: outputURL)
    }
}
