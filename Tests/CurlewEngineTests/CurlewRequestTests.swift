import HTTPTypes
import Testing

@testable import CurlewEngine

@Suite("Request validation")
struct CurlewRequestTests {
    @Test(arguments: [
        "file:///etc/passwd", "gopher://127.0.0.1/", "ftp://127.0.0.1/", "dict://127.0.0.1/", "ldap://127.0.0.1/",
        "smb://127.0.0.1/share",
    ])
    func schemesOtherThanHTTPAreRejected(url: String) {
        #expect(throws: CurlewError.self) { try CurlewRequest(url: url) }
        do {
            _ = try CurlewRequest(url: url)
        } catch let error as CurlewError {
            #expect(error.code == .protocolNotAllowed)
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test(arguments: [
        "unix:///tmp/a.sock", "ftp+unix://%2Ftmp%2Fa.sock/", "http+unixx://%2Ftmp%2Fa.sock/", "ws+unix://x/",
    ])
    func unixSchemesOtherThanHTTPAndHTTPSAreRejected(url: String) {
        #expect(errorCode { try CurlewRequest(url: url) } == .protocolNotAllowed)
    }

    @Test func anHTTPUnixURLBecomesARequestToLocalhostOverItsSocket() throws {
        let plain = try CurlewRequest(url: "http+unix://%2Ftmp%2Fapp.sock/a/b?c=d")
        #expect(plain.url == "http+unix://%2Ftmp%2Fapp.sock/a/b?c=d")
        #expect(plain.transferURL == "http://localhost/a/b?c=d")
        #expect(plain.effectiveUnixSocketPath(clientDefault: "/elsewhere") == "/tmp/app.sock")
        let tls = try CurlewRequest(url: "HTTPS+UNIX://%2Fvar%2Frun%2Fapp.sock")
        #expect(tls.transferURL == "https://localhost")
        #expect(tls.effectiveUnixSocketPath(clientDefault: nil) == "/var/run/app.sock")
    }

    @Test func aRequestsSocketPathOverridesTheClientsAndPlainURLsUseTCPByDefault() throws {
        var request = try CurlewRequest(url: "http://127.0.0.1:8080/x")
        #expect(request.transferURL == request.url)
        #expect(request.effectiveUnixSocketPath(clientDefault: nil) == nil)
        #expect(request.effectiveUnixSocketPath(clientDefault: "/client.sock") == "/client.sock")
        request.unixSocketPath = "/request.sock"
        #expect(request.effectiveUnixSocketPath(clientDefault: "/client.sock") == "/request.sock")
        #expect(!request.usesClientDefaultsForPlainGET)
    }

    @Test(arguments: [
        "http+unix:///path", "http+unix://", "https+unix://%2Ftmp%2F%0Aa.sock/", "http+unix://%zz/",
        "http+unix://%2F" + String(repeating: "a", count: 107) + "/",
    ])
    func unixURLsWithoutAUsableSocketPathAreInvalidRequests(url: String) {
        #expect(errorCode { try CurlewRequest(url: url) } == .invalidRequest)
    }

    @Test(arguments: [
        "", "not a url", "http://", "http://exa mple.com/", "http://example.com/\r\nX-Injected: 1",
        "http://example.com/\u{0}", "http:///path-only",
    ])
    func malformedURLsAreInvalidRequests(url: String) {
        #expect(errorCode { try CurlewRequest(url: url) } == .invalidRequest)
    }

    @Test(arguments: [
        // A host with a broken escape; a password with a raw `/`, where no parser finds the user-info.
        "https://user:hunter2@exa%zzmple.com/p?api_key=k1&page=2", "https://user:hun/ter2@example.com/p?api_key=k1",
    ])
    func aMalformedURLsErrorDoesNotRepeatItsPasswordOrKeys(url: String) throws {
        do {
            _ = try CurlewRequest(url: url)
            Issue.record("\(url) should be refused")
        } catch let error as CurlewError {
            #expect(error.code == .invalidRequest)
            #expect(error.detail.contains("malformed URL"))
            #expect(!error.description.contains("ter2") && !error.description.contains("k1"), "\(error)")
        }
    }

    @Test(arguments: [
        // libcurl reads these IPv4 shorthands as 127.0.0.1 while Swift keeps the literal: a caller's allowlist
        // check on Swift's host would pass while libcurl connects elsewhere (SSRF).
        "http://0x7f.1/", "http://127.1/", "http://2130706433/",
        // Hosts one parser rejects and the other accepts.
        "http://a@b@c.example/", "http://127.0.0.1;evil.example/",
    ])
    func hostsTheParsersDisagreeOnAreRejected(url: String) {
        #expect(errorCode { try CurlewRequest(url: url) } == .invalidRequest)
    }

    @Test(arguments: [
        "http://127.0.0.1:8080/path?q=1#frag", "https://example.com", "HTTP://EXAMPLE.COM/", "http://[::1]:8080/",
        "http://user:pass@127.0.0.1/",
    ])
    func wellFormedURLsAreAccepted(url: String) throws {
        let request = try CurlewRequest(url: url)
        #expect(request.url == url)
        #expect(request.method == .get)
    }

    @Test(arguments: [
        ("X-Test", "a\r\nInjected: yes"), ("X-Test", "a\nb"), ("X-Test", "nul\u{0}"), ("Bad Name", "v"),
        ("X-Test\r\n", "v"), ("", "v"),
    ])
    func headersWithControlCharactersAreRejected(name: String, value: String) throws {
        var request = try CurlewRequest(url: "http://127.0.0.1/")
        #expect(errorCode { try request.addHeader(name, value) } == .invalidRequest)
        #expect(errorCode { try request.setHeader(name, value) } == .invalidRequest)
        #expect(request.headerFields.isEmpty)
        #expect(errorCode { try CurlewRequest(url: "http://127.0.0.1/", headers: [(name, value)]) } == .invalidRequest)
    }

    @Test func validHeadersAreKeptInOrderAndSetReplaces() throws {
        var request = try CurlewRequest(url: "http://127.0.0.1/", headers: [("X-A", "1"), ("X-B", "2")])
        try request.addHeader("X-A", "3")
        #expect(request.headerFields.map(\.value) == ["1", "2", "3"])
        try request.setHeader("x-a", "4")
        #expect(request.headerFields[values: HTTPField.Name("X-A")!] == ["4"])
    }

    private func errorCode(_ body: () throws -> Any) -> CurlewError.Code? {
        do {
            _ = try body()
            return nil
        } catch let error as CurlewError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test func everyBodyFactoryIsReadBackThroughItsOwnPropertyOnly() {
        var form = MultipartForm()
        form.append(value: "v", forKey: "k")
        let stream = RequestBodyStream(AsyncStream<[UInt8]> { $0.finish() }, length: 5)
        let bodies: [CurlewRequest.Body] = [
            .bytes([1, 2, 3]), .file(.path("/tmp/x", offset: 2, length: 4)), .stream(stream), .multipart(form),
        ]
        #expect(bodies.map { $0.bytes != nil } == [true, false, false, false])
        #expect(bodies.map { $0.file != nil } == [false, true, false, false])
        #expect(bodies.map { $0.stream != nil } == [false, false, true, false])
        #expect(bodies.map { $0.multipart != nil } == [false, false, false, true])
        #expect(bodies[0].bytes == [1, 2, 3])
        #expect(bodies[1].file == .path("/tmp/x", offset: 2, length: 4))
        #expect(bodies[2].stream?.length == 5)
        #expect(bodies[3].multipart?.boundary == form.boundary)
        #expect(bodies.map(\.isReplayable) == [true, true, false, true])
        #expect(bodies[0].knownLength == 3)
        #expect(bodies[2].knownLength == 5)
    }
}
