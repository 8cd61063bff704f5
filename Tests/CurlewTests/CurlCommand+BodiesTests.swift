import Curlew
import CurlewEngine
import CurlewTestSupport
import Foundation
import HTTPTypes
import Testing

/// Forms with files, file bodies and streams rendered as curl lines: the real curl sends them to httpbin (or to a
/// scripted server that keeps the raw bytes), and what arrives must be what Curlew sends for the same route.
@Suite struct CurlCommandBodiesTests {
    /// A directory with awkward file names: spaces, a quote, a semicolon, a double quote, unicode.
    private final class Files: Sendable {
        let directory: String
        let text: String
        let binary: String

        init() throws {
            directory = NSTemporaryDirectory() + "curlew curl-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            text = directory + "/it's a \"b\";c Zoë.txt"
            binary = directory + "/photo.bin"
            try Data("line one\nline two; with \"quotes\"\n".utf8).write(to: URL(fileURLWithPath: text))
            try Data([0x89, 0x50, 0x4E, 0x47, 0x00, 0xFF, 0x0D, 0x0A]).write(to: URL(fileURLWithPath: binary))
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }
    }

    private static func form(_ files: Files) -> MultipartForm {
        var form = MultipartForm()
        form.append(value: "Zoë's \"album\" & more", forKey: "title")
        form.append(
            fileAt: files.text, forKey: "upload", fileName: "x\"y;z Zoë.txt", mimeType: "text/plain; charset=utf-8")
        form.append(fileAt: files.binary, forKey: "photo", mimeType: "image/png")
        form.append(
            data: Array("a;b,\"c\"\\d\n@e".utf8), forKey: "memo", fileName: "memo.csv", mimeType: "text/csv",
            headerFields: [HTTPField.Name("X-Part")!: "one \"1\""])
        form.append(data: [0xFF, 0x01, 0x41, 0x27], forKey: "blob", fileName: "blob.bin")
        form.parts.append(
            MultipartForm.Part(name: "typed", contentType: "application/json", content: .bytes(Array(#"{"a":1}"#.utf8)))
        )
        form.parts.append(MultipartForm.Part(name: "inline", content: .file(.path(files.text))))
        return form
    }

    /// What both requests must agree on; a form's Content-Type and Content-Length carry each side's boundary, and
    /// curl reads standard input whole where Curlew streams (chunked).
    private static func expectSameEcho(
        _ fromCurl: JSONValue, _ fromCurlew: JSONValue, _ command: String, isForm: Bool, isStream: Bool = false
    ) {
        for key in ["method", "url", "args", "form", "data", "json", "files"] {
            #expect(fromCurl[key] == fromCurlew[key], "\(key) differs for \(command)")
        }
        var curlHeaders = fromCurl["headers"].object ?? [:]
        var curlewHeaders = fromCurlew["headers"].object ?? [:]
        if isForm {
            #expect(curlHeaders.removeValue(forKey: "Content-Type") != nil)
            #expect(curlewHeaders.removeValue(forKey: "Content-Type") != nil)
            curlHeaders["Content-Length"] = nil
            curlewHeaders["Content-Length"] = nil
            #expect(fromCurl["headers"]["Content-Type"].stringValue.hasPrefix("multipart/form-data; boundary="))
        }
        if isStream {
            curlHeaders["Content-Length"] = nil
            #expect(curlewHeaders.removeValue(forKey: "Transfer-Encoding") == "chunked")
        }
        #expect(curlHeaders == curlewHeaders, "headers differ for \(command)")
    }

    @Test(arguments: ["/post", "/anything/form"])
    func aFormWithFilesTypesAndPartHeadersBecomesCurlsOwnForm(path: String) async throws {
        let files = try Files()
        let provider = TestProvider(baseURL: try await HTTPBinServer.shared().baseURL)
        let route = Route(path: path, method: .post, multipartForm: Self.form(files))
        let command = try provider.curlCommand(for: route)
        #expect(!command.contains("--data-binary") && !command.contains("#"))
        #expect(command.contains(#"-F 'upload=@""#))
        let fromCurlew = try await provider.request(route).json()
        let fromCurl = try JSONDecoder().decode(JSONValue.self, from: try await CurlCommandTests.run(command))
        Self.expectSameEcho(fromCurl, fromCurlew, command, isForm: true)
        #expect(fromCurl["files"]["upload"] == "line one\nline two; with \"quotes\"\n")
        #expect(fromCurl["files"]["memo"] == "a;b,\"c\"\\d\n@e")
        #expect(fromCurl["form"]["title"] == "Zoë's \"album\" & more")
        #expect(fromCurl["form"]["inline"] == "line one\nline two; with \"quotes\"\n")
    }

    @Test func theFormsBytesAreTheSameButForTheBoundary() async throws {
        let files = try Files()
        let received = EntryLog()
        try await withScriptedServer({ request in
            let boundary = request.header("Content-Type")?.components(separatedBy: "boundary=").last ?? "?"
            received.append(
                String(decoding: request.body, as: UTF8.self).replacingOccurrences(of: boundary, with: "BOUNDARY"))
            return ScriptedResponse(status: 204)
        }) { server in
            let provider = TestProvider(baseURL: server.baseURL)
            let route = Route(path: "/upload", method: .post, multipartForm: Self.form(files))
            try await provider.request(route)
            _ = try await CurlCommandTests.run(try provider.curlCommand(for: route))
        }
        let bodies = received.entries
        #expect(bodies.count == 2)
        // Part by part, so a difference points at its part.
        let parts = bodies.map { $0.components(separatedBy: "--BOUNDARY") }
        #expect(parts.first?.count == 9)
        for (fromCurlew, fromCurl) in zip(parts[0], parts[1]) { #expect(fromCurl == fromCurlew) }
    }

    @Test func fileBodiesAreSentWithAt() async throws {
        let files = try Files()
        let provider = TestProvider(baseURL: try await HTTPBinServer.shared().baseURL)
        for route in [
            Route(path: "/anything/file", method: .put, body: .file(files.text, contentType: "text/plain")),
            Route(path: "/post", method: .post, body: .file(files.binary, contentType: nil)),
        ] {
            let command = try provider.curlCommand(for: route)
            #expect(command.contains("--data-binary '@\(files.directory)/") && !command.contains("#"))
            let fromCurlew = try await provider.request(route).json()
            let fromCurl = try JSONDecoder().decode(JSONValue.self, from: try await CurlCommandTests.run(command))
            Self.expectSameEcho(fromCurl, fromCurlew, command, isForm: false)
        }
    }

    /// A body that starts with `@` is data, not a file name: `--data-binary '@channel …'` made curl read a file of
    /// that name (and fail, or send another file's bytes).
    @Test func bytesStartingWithAtAreSentAsTheyAre() async throws {
        let provider = TestProvider(baseURL: try await HTTPBinServer.shared().baseURL)
        for body in [Array("@channel deploy done".utf8), [UInt8(ascii: "@"), 0xFF, 0x41]] {
            let route = Route(path: "/anything/at", method: .post, body: .bytes(body, contentType: "text/plain"))
            let command = try provider.curlCommand(for: route)
            #expect(command.contains("--data-raw ") && !command.contains("--data-binary"))
            let fromCurlew = try await provider.request(route).json()
            let fromCurl = try JSONDecoder().decode(JSONValue.self, from: try await CurlCommandTests.run(command))
            Self.expectSameEcho(fromCurl, fromCurlew, command, isForm: false)
        }
    }

    @Test func streamsArePlaceholdersThatReadStandardInput() async throws {
        let provider = TestProvider(baseURL: try await HTTPBinServer.shared().baseURL)
        let bytes = Array("streamed\nbytes".utf8)
        func stream() -> RequestBodyStream {
            RequestBodyStream(
                AsyncStream { continuation in
                    continuation.yield(bytes)
                    continuation.finish()
                })
        }
        let body = Route(path: "/anything/stream", method: .post, body: .stream(stream(), contentType: "text/plain"))
        var form = MultipartForm()
        form.append(value: "v", forKey: "field")
        form.append(stream: stream(), forKey: "upload", fileName: "s.txt", mimeType: "text/plain")
        let formRoute = Route(path: "/post", method: .post, multipartForm: form)

        let bodyCommand = try provider.curlCommand(for: body)
        #expect(bodyCommand.contains("--data-binary @- "))
        #expect(bodyCommand.hasSuffix("# placeholder, pipe in on standard input: the body (a stream)"))
        let formCommand = try provider.curlCommand(for: formRoute)
        #expect(formCommand.contains(#"-F 'upload=@-;filename="s.txt";type=text/plain'"#))
        #expect(formCommand.hasSuffix(#"# placeholder, pipe in on standard input: form part "upload" (a stream)"#))

        for (route, command, isForm) in [(body, bodyCommand, false), (formRoute, formCommand, true)] {
            let fromCurl = try JSONDecoder().decode(
                JSONValue.self, from: try await CurlCommandTests.run(command, input: bytes))
            let fromCurlew = try await provider.request(route).json()
            Self.expectSameEcho(fromCurl, fromCurlew, command, isForm: isForm, isStream: true)
        }
    }
}
