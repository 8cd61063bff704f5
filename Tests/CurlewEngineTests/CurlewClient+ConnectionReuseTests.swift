import CurlewEngine
import CurlewTestSupport
import Foundation
import HTTPTypes
import Testing

/// Pooled connections that servers close, reset or leave bytes on: the next request gets its own response from
/// the server, on a fresh connection when it must, and never a failure it could have avoided.
@Suite("Connection reuse against servers that misbehave")
struct CurlewClientConnectionReuseTests {
    /// A complete response no request asked for: a desync would hand it to the next request.
    static let strayResponse = WireStep.responseText(body: "wrong")

    enum StrayTiming: String, CaseIterable, CustomTestStringConvertible {
        case sameSegment, laterSegment, after300Milliseconds
        var testDescription: String { rawValue }
    }

    /// Answers `/first` with a body plus stray bytes (timed as asked), everything else with its own path.
    static func strayScript(_ timing: StrayTiming) -> @Sendable (WireRequest) -> [WireStep] {
        { request in
            guard request.target == "/first" else { return [.response(body: "own:\(request.target)")] }
            let mark = WireStep.mark("stray-\(request.connection)-\(request.indexOnConnection)")
            switch timing {
            case .sameSegment:
                return [.send(Array((WireStep.responseText(body: "first") + strayResponse).utf8)), mark]
            case .laterSegment:
                return [.response(body: "first"), .wait(milliseconds: 20), .send(Array(strayResponse.utf8)), mark]
            case .after300Milliseconds:
                return [.response(body: "first"), .wait(milliseconds: 300), .send(Array(strayResponse.utf8)), mark]
            }
        }
    }

    @Test(arguments: allLoops, StrayTiming.allCases)
    func bytesAfterABodyNeverAnswerTheNextRequest(
        loop: CurlewClient.Configuration.EventLoopKind, timing: StrayTiming
    ) async throws {
        try await withWireScriptServer(Self.strayScript(timing)) { server in
            try await withClient(loop) { client in
                try await Self.expectEachNextRequestGetsItsOwnAnswer(client, server, baseURL: server.baseURL, timing)
            }
            Self.expectEachNextRequestReachedTheServerOnce(server)
        }
    }

    /// Five rounds of `/first` (answered with stray bytes behind it) then `/next-N`, which must get its own answer.
    static func expectEachNextRequestGetsItsOwnAnswer(
        _ client: CurlewClient, _ server: WireScriptServer, baseURL: String, _ timing: StrayTiming
    ) async throws {
        for round in 0..<5 {
            let first = try await client.execute(try CurlewRequest(url: "\(baseURL)/first"))
            #expect(first.text == "first", "round \(round)")
            // The stray bytes are on the wire before the next request is submitted (server-side mark).
            let last = try #require(server.requests.last)
            try await server.waitForMark("stray-\(last.connection)-\(last.indexOnConnection)")
            let next = try await client.execute(try CurlewRequest(url: "\(baseURL)/next-\(round)"))
            #expect(next.text == "own:/next-\(round)", "round \(round): \(timing)")
            #expect(next.status == .ok)
        }
    }

    /// Counted by the server: every next request arrived, each once.
    static func expectEachNextRequestReachedTheServerOnce(_ server: WireScriptServer) {
        #expect(server.requests.map(\.target).filter { $0.hasPrefix("/next-") }.count == 5)
    }

    /// The same over a Unix domain socket. Every connection to one socket looks alike to libcurl's pre-request
    /// callback (a path, no ports), so on libcurl 7.x, where the engine must find a reused connection's socket to
    /// check it, a request there never goes out on a pooled connection; libcurl 8 checks pooled connections itself.
    @Test(arguments: allLoops, StrayTiming.allCases)
    func bytesAfterABodyOverAUnixSocketNeverAnswerTheNextRequest(
        loop: CurlewClient.Configuration.EventLoopKind, timing: StrayTiming
    ) async throws {
        let socketPath =
            FileManager.default.temporaryDirectory.path + "/curlew-wire-\(UUID().uuidString.prefix(8)).sock"
        defer { try? FileManager.default.removeItem(atPath: socketPath) }
        try await withWireScriptServer(unixSocketPath: socketPath, Self.strayScript(timing)) { server in
            try await withClient(loop, configure: { $0.unixSocketPath = socketPath }) { client in
                try await Self.expectEachNextRequestGetsItsOwnAnswer(
                    client, server, baseURL: "http://localhost", timing)
            }
            Self.expectEachNextRequestReachedTheServerOnce(server)
        }
    }

    /// The same on https, where a request allows HTTP/2 (the client's default) and the server's ALPN chose HTTP/1.1,
    /// as most https servers that do not speak HTTP/2 do: the pooled connection is checked as any HTTP/1 one is. Before,
    /// on libcurl 7.x, only requests that could be nothing but HTTP/1 were, and the fake answered the next request.
    @Test(arguments: allLoops)
    func bytesAfterABodyOnAnHTTPSConnectionThatTurnedOutHTTP1NeverAnswerTheNextRequest(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withTLSStrayServer { server in
            try await withClient(loop, configure: { $0.tls.caFile = server.caFile }) { client in
                for round in 0..<5 {
                    let first = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/first"))
                    #expect(first.text == "first", "round \(round)")
                    #expect(first.metrics.httpVersion == .http1_1)
                    let last = try #require(server.requests.last)
                    try await server.waitForStray(after: last)
                    let next = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/next-\(round)"))
                    #expect(next.text == "own:/next-\(round)", "round \(round)")
                }
            }
            // Counted by the server: every next request arrived once, first on a connection of its own.
            let nexts = server.requests.filter { $0.target.hasPrefix("/next-") }
            #expect(nexts.count == 5)
            #expect(nexts.allSatisfy { $0.indexOnConnection == 0 }, "\(nexts)")
        }
    }

    /// libcurl hands a finished transfer's connection to a transfer waiting for one within the same perform, before
    /// the loop reads the first one's completion: the connection must be known to speak HTTP/1 by then (the status
    /// line of its response says so). One connection allowed; the second request waits for it while the server holds
    /// the first, then answers the first with a fake response right behind it, in a TLS record of its own.
    @Test(arguments: allLoops)
    func aRequestWaitingForAnHTTPSConnectionThatTurnedOutHTTP1IsNeverAnsweredByItsStrayBytes(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withTLSStrayServer { server in
            try await withClient(
                loop,
                configure: {
                    $0.tls.caFile = server.caFile
                    $0.loopCount = 1
                    $0.maxConnectionsPerHost = 1
                    // The second request waits for the connection however slow a loaded machine makes the first.
                    $0.timeouts.connect = .seconds(300)
                }
            ) { client in
                let firstRequest = try CurlewRequest(url: "\(server.baseURL)/held-first")
                let nextRequest = try CurlewRequest(url: "\(server.baseURL)/next")
                let first = Task { try await client.execute(firstRequest).text }
                try await waitUntil(timeout: .seconds(10)) {
                    server.requests.contains { $0.target == "/held-first" }
                }
                let next = Task { try await client.execute(nextRequest).text }
                try await waitUntil(timeout: .seconds(10)) {
                    await client.poolStatistics().total.transfersWaitingForConnection == 1
                }
                server.release()
                let answers = [try await first.value, try await next.value]
                #expect(answers == ["first", "own:/next"])
            }
            // Counted by the server: the second request arrived once, first on a connection of its own.
            let nexts = server.requests.filter { $0.target == "/next" }
            #expect(nexts.count == 1)
            #expect(nexts.first?.indexOnConnection == 0, "\(server.requests)")
        }
    }

    /// How soon the next request follows the response whose connection carries the fake one.
    enum ReuseGap: String, CaseIterable, CustomTestStringConvertible {
        /// At once: the request is submitted as soon as the server has written (microseconds).
        case immediate
        /// After the connection sat in the pool for a while.
        case afterIdleGap
        var testDescription: String { rawValue }
    }

    /// Response-queue poisoning, the shape request smuggling takes through a proxy: the server writes a
    /// `Content-Length: 10` response and, in a second write right after it, a complete fake response. On the reused
    /// connection that fake must never become the next request's answer, however soon the next request follows.
    @Test(arguments: allLoops, ReuseGap.allCases)
    func aBackToBackFakeResponseNeverAnswersTheNextRequest(
        loop: CurlewClient.Configuration.EventLoopKind, gap: ReuseGap
    ) async throws {
        let poison = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Poisoned: yes\r\n\r\nPOISON"
        let script: @Sendable (WireRequest) -> [WireStep] = { request in
            guard request.target == "/first" else { return [.response(body: "own:\(request.target)")] }
            return [
                .response(body: "0123456789"), .send(Array(poison.utf8)),
                .mark("poisoned-\(request.connection)-\(request.indexOnConnection)"),
            ]
        }
        let rounds = 10
        try await withWireScriptServer(script) { server in
            try await withClient(loop) { client in
                for round in 0..<rounds {
                    let first = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/first"))
                    #expect(first.text == "0123456789", "round \(round)")
                    // Both writes are on the wire before the next request is submitted (server-side mark, set
                    // right after the second write; it is set by the time the client has read the first).
                    let last = try #require(server.requests.last)
                    try await server.waitForMark("poisoned-\(last.connection)-\(last.indexOnConnection)")
                    if gap == .afterIdleGap { try await Task.sleep(for: .milliseconds(50)) }
                    let next = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/next-\(round)"))
                    #expect(next.text == "own:/next-\(round)", "round \(round), \(gap): \(next.text)")
                    #expect(next.headerFields[HTTPField.Name("X-Poisoned")!] == nil, "round \(round), \(gap)")
                }
            }
            // Counted by the server: every next request arrived once, and first on a connection of its own: none was
            // written on a connection that carried a fake response.
            let nexts = server.requests.filter { $0.target.hasPrefix("/next-") }
            #expect(nexts.count == rounds)
            #expect(nexts.allSatisfy { $0.indexOnConnection == 0 }, "\(nexts.map(\.indexOnConnection))")
        }
    }

    /// Found by `make soak`: with requests in flight on one loop, libcurl pools a finished transfer's connection and
    /// hands it to a waiting transfer within the same `curl_multi_perform`, before the loop has read the first one's
    /// completion. The check for unread bytes must not depend on the loop having seen that completion: a fake
    /// response left on the connection then answered the next request, and every request after it on the connection
    /// got the answer of the one before.
    @Test(arguments: allLoops)
    func aFakeResponseNeverAnswersARequestThatReusesTheConnectionAtOnce(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let poison = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Poisoned: yes\r\n\r\nPOISON"
        // A body longer than libcurl's first read: libcurl reads the rest only up to the announced length, so the
        // fake response stays on the socket (in one read with the head, libcurl would see it and close).
        let padding = String(repeating: ".", count: 100_000)
        let script: @Sendable (WireRequest) -> [WireStep] = { request in
            [.send(Array((WireStep.responseText(body: "own:\(request.target)" + padding) + poison).utf8))]
        }
        let workers = 16
        let requestsPerWorker = 50
        try await withWireScriptServer(script) { server in
            try await withClient(loop, configure: { $0.loopCount = 1 }) { client in
                let wrong = try await withThrowingTaskGroup(of: [String].self) { group in
                    for worker in 0..<workers {
                        group.addTask {
                            var wrong: [String] = []
                            for index in 0..<requestsPerWorker {
                                let path = "/w\(worker)-\(index)"
                                let response = try await client.execute(try CurlewRequest(url: server.baseURL + path))
                                if response.text != "own:\(path)" + padding {
                                    wrong.append("\(path): \(response.text.prefix(40))")
                                }
                            }
                            return wrong
                        }
                    }
                    return try await group.reduce(into: []) { $0 += $1 }
                }
                #expect(wrong.isEmpty, "\(wrong.count) requests got another answer: \(wrong.prefix(5))")
            }
        }
    }

    @Test(arguments: allLoops)
    func aConnectionWithUnreadBytesIsReplacedBeforeTheRequestIsWritten(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withWireScriptServer(Self.strayScript(.after300Milliseconds)) { server in
            try await withClient(loop) { client in
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/first"))
                try await server.waitForMark("stray-0-0")
                // Not idempotent: goes out again only because nothing was written on the refused connection.
                let post = try CurlewRequest(method: .post, url: "\(server.baseURL)/post", body: .bytes([1, 2, 3]))
                let response = try await client.execute(post)
                #expect(response.text == "own:/post")
                #expect(!response.metrics.reusedConnection)
                // Who refuses the connection depends on the libcurl (docs/design/0016-libcurl-versions.md): 8.x
                // itself, when it picks the connection (no attempt on it, so no retry); on 7.x the engine's check
                // before the request is written, and the request goes out again on a fresh connection.
                let libcurlRefuses = LibcurlVersion.running.refusesPooledConnectionsWithPendingInput
                #expect(response.metrics.freshConnectionRetries == (libcurlRefuses ? 0 : 1))
            }
            // The refused connection saw no second request; the POST arrived once, on connection 1.
            let posts = server.requests.filter { $0.target == "/post" }
            #expect(posts.count == 1)
            #expect(posts.first?.connection == 1)
        }
    }

    enum BetweenRequests: String, CaseIterable, CustomTestStringConvertible {
        case close, reset
        var testDescription: String { rawValue }
    }

    @Test(arguments: allLoops, BetweenRequests.allCases)
    func connectionsClosedOrResetBetweenRequestsCostNoRequest(
        loop: CurlewClient.Configuration.EventLoopKind, ending: BetweenRequests
    ) async throws {
        let script: @Sendable (WireRequest) -> [WireStep] = { request in
            let mark = WireStep.mark("ended-\(request.connection)")
            // The client reads the response before the connection ends (a reset would discard unread bytes).
            return [
                .response(body: "own:\(request.target)"), .wait(milliseconds: 30), mark,
                ending == .close ? .close : .reset,
            ]
        }
        try await withWireScriptServer(script) { server in
            try await withClient(loop) { client in
                for round in 0..<4 {
                    let method: HTTPRequest.Method = round % 2 == 0 ? .get : .post
                    let request = try CurlewRequest(
                        method: method, url: "\(server.baseURL)/r\(round)", body: method == .post ? .bytes([7]) : nil)
                    let response = try await client.execute(request)
                    #expect(response.text == "own:/r\(round)", "\(method) round \(round)")
                    try await server.waitForMark("ended-\(server.connectionCount - 1)")
                }
            }
            #expect(server.requests.count == 4, "each request reached the server exactly once")
        }
    }

    @Test(arguments: allLoops)
    func conflictingContentLengthsFailAsInvalidResponseAndTheConnectionIsNotReused(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let script: @Sendable (WireRequest) -> [WireStep] = { request in
            switch request.target {
            case "/conflicting":
                [.send(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello, world".utf8))]
            case "/both":
                [
                    .send(
                        Array(
                            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                                .utf8))
                ]
            case "/both-split":
                // A field whose name starts like a status line is a field to libcurl: it starts no new head.
                [
                    .send(
                        Array(
                            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nHTTP/1.1: 200\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                                .utf8))
                ]
            case "/list":
                [.send(Array("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello".utf8))]
            default:
                [.response(body: "own:\(request.target)")]
            }
        }
        try await withWireScriptServer(script) { server in
            try await withClient(loop) { client in
                for path in ["/conflicting", "/both", "/both-split"] {
                    let error = await caughtError {
                        _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)\(path)"))
                    }
                    let curlewError = try #require(error as? CurlewError, "\(path): \(String(describing: error))")
                    #expect(curlewError.code == .invalidResponse, "\(path): \(curlewError)")
                    let connectionsBefore = server.connectionCount
                    let next = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/after"))
                    #expect(next.text == "own:/after")
                    #expect(server.connectionCount == connectionsBefore + 1, "\(path): the connection was closed")
                }
                // A list of the same length is one length (RFC 9110 §8.6).
                #expect(try await client.execute(try CurlewRequest(url: "\(server.baseURL)/list")).text == "hello")
            }
        }
    }

    /// A redirect's head ends where libcurl ends it, and its body may end in trailers that no empty line follows:
    /// the next hop's status line still starts a head of its own, whose framing and fields are the final response's
    /// alone.
    @Test(arguments: allLoops)
    func theHeadAfterARedirectWithTrailersOrAnOddEndIsTheFinalResponsesOwn(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let script: @Sendable (WireRequest) -> [WireStep] = { request in
            switch request.target {
            case "/trailers":
                [
                    .send(
                        Array(
                            "HTTP/1.1 302 Found\r\nLocation: /final\r\nTransfer-Encoding: chunked\r\nX-Hop: 1\r\n\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n"
                                .utf8))
                ]
            case "/odd-end":
                // libcurl ends a head at any line led by CR.
                [.send(Array("HTTP/1.1 302 Found\r\nLocation: /final\r\nContent-Length: 0\r\nX-Hop: 1\r\n\rX\n".utf8))]
            default:
                [.send(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8))]
            }
        }
        try await withWireScriptServer(script) { server in
            try await withClient(loop) { client in
                for path in ["/trailers", "/odd-end"] {
                    let response = try await client.execute(try CurlewRequest(url: "\(server.baseURL)\(path)"))
                    #expect(response.status == .ok && response.text == "ok", "\(path)")
                    let names = response.headerFields.map(\.name.rawName)
                    #expect(names == ["Content-Length"], "\(path): \(names)")
                }
            }
            #expect(server.requests.map(\.target) == ["/trailers", "/final", "/odd-end", "/final"])
        }
    }
}

/// The engine's credential rule over every redirect status: credentials reach only the request's origin.
@Suite("Credentials across redirects")
struct CurlewClientCredentialRedirectTests {
    static let redirectCodes = [301, 302, 303, 307, 308]

    static func credentialRequest(url: String) throws -> CurlewRequest {
        var request = try CurlewRequest(url: url)
        request.headerFields[.authorization] = "Bearer secret-token"
        request.headerFields[.cookie] = "session=secret-cookie"
        request.headerFields[.proxyAuthorization] = "Basic c2VjcmV0"
        var apiKey = HTTPField(name: HTTPField.Name("X-Api-Key")!, value: "secret-key")
        apiKey.indexingStrategy = .disallow
        request.headerFields.append(apiKey)
        // S3's session token, a credential by name (not marked).
        request.headerFields[HTTPField.Name("X-Amz-Security-Token")!] = "secret-session"
        request.headerFields[HTTPField.Name("X-Trace")!] = "kept"
        return request
    }

    /// Every credential the request carries; `Proxy-Authorization` goes to proxies only, never to a server.
    static let secretNames = ["authorization", "cookie", "proxy-authorization", "x-api-key", "x-amz-security-token"]
    /// The credentials its origin gets.
    static let originSecretNames = secretNames.filter { $0 != "proxy-authorization" }

    /// Redirects `/go-CODE` to `TARGET/landed` (TARGET "" for the same origin), answers `/landed` itself.
    static func redirector(to target: @escaping @Sendable () -> String) -> @Sendable (WireRequest) -> [WireStep] {
        { request in
            if request.target.hasPrefix("/go-"), let code = Int(request.target.dropFirst(4)) {
                return [.response(status: code, headers: [("Location", "\(target())/landed")], body: "")]
            }
            return [.response(body: "landed")]
        }
    }

    enum Destination: String, CaseIterable, CustomTestStringConvertible {
        case otherHost, otherPort
        var testDescription: String { rawValue }
    }

    @Test(arguments: allLoops, Destination.allCases)
    func credentialsReachOnlyTheRequestsOrigin(
        loop: CurlewClient.Configuration.EventLoopKind, destination: Destination
    ) async throws {
        // Linux answers on all of 127.0.0.0/8: another address is another host without any setup.
        let landingHost = destination == .otherHost ? "127.0.0.2" : "127.0.0.1"
        try await withWireScriptServer(host: landingHost, { _ in [.response(body: "landed")] }) { landing in
            let origin = try await WireScriptServer.start(Self.redirector { landing.baseURL })
            defer { Task { try? await origin.shutdown() } }
            try await withClient(loop) { client in
                for code in Self.redirectCodes {
                    let request = try Self.credentialRequest(url: "\(origin.baseURL)/go-\(code)")
                    let response = try await client.execute(request)
                    #expect(response.status == .ok, "\(code)")
                    #expect(response.metrics.redirectCount == 1, "\(code)")
                }
            }
            let landed = landing.requests
            #expect(landed.count == Self.redirectCodes.count)
            for request in landed {
                for name in Self.secretNames {
                    #expect(request.header(name) == nil, "\(name) crossed to \(destination)")
                }
                #expect(request.header("x-trace") == "kept")
            }
            // The origin itself got every credential.
            for request in origin.requests {
                for name in Self.originSecretNames { #expect(request.header(name) != nil, "\(name) at the origin") }
                #expect(request.header("proxy-authorization") == nil)
            }
        }
    }

    /// A request started over from its origin after a hop to another origin (the next hop's pooled connection had
    /// bytes waiting, so the engine refused it before writing and began again) carries its credentials again, also
    /// when every field it had was one and the list without them was empty.
    @Test(arguments: allLoops)
    func aRequestStartedOverAfterAHopToAnotherOriginCarriesItsCredentialsAgain(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let stray = CurlewClientConnectionReuseTests.strayScript(.after300Milliseconds)
        try await withWireScriptServer(host: "127.0.0.3", stray) { last in
            let middle = try await WireScriptServer.start(host: "127.0.0.2", Self.redirector { last.baseURL })
            defer { Task { try? await middle.shutdown() } }
            let origin = try await WireScriptServer.start { _ in
                [.response(status: 302, headers: [("Location", "\(middle.baseURL)/go-302")], body: "")]
            }
            defer { Task { try? await origin.shutdown() } }
            // libcurl 8 refuses the connection itself when it picks it: no attempt on it, nothing started over.
            let startsOver = !LibcurlVersion.running.refusesPooledConnectionsWithPendingInput
            try await withClient(loop, configure: { $0.loopCount = 1 }) { client in
                _ = try await client.execute(try CurlewRequest(url: "\(last.baseURL)/first"))
                try await last.waitForMark("stray-0-0")
                var request = try CurlewRequest(url: "\(origin.baseURL)/start")
                request.headerFields[.authorization] = "Bearer secret-token"
                let response = try await client.execute(request)
                #expect(response.text == "own:/landed")
                #expect(response.metrics.freshConnectionRetries == (startsOver ? 1 : 0))
            }
            let atOrigin = origin.requests
            #expect(atOrigin.count == (startsOver ? 2 : 1))
            for request in atOrigin { #expect(request.header("authorization") == "Bearer secret-token") }
            for request in middle.requests + last.requests { #expect(request.header("authorization") == nil) }
        }
    }

    /// A POST without a body goes to another origin without its credentials and, as at its origin, without the form
    /// type libcurl would give it.
    @Test(arguments: allLoops)
    func aPostWithoutABodyKeepsNoContentTypeOnAHopToAnotherOrigin(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withWireScriptServer(host: "127.0.0.2", { _ in [.response(body: "landed")] }) { landing in
            let origin = try await WireScriptServer.start(Self.redirector { landing.baseURL })
            defer { Task { try? await origin.shutdown() } }
            try await withClient(loop) { client in
                for code in [307, 308] {
                    var request = try CurlewRequest(method: .post, url: "\(origin.baseURL)/go-\(code)")
                    request.headerFields[.authorization] = "Bearer secret-token"
                    let response = try await client.execute(request)
                    #expect(response.text == "landed", "\(code)")
                }
            }
            let landed = landing.requests
            #expect(landed.count == 2)
            for request in landed + origin.requests {
                #expect(request.method == "POST")
                #expect(request.header("content-type") == nil, "\(request.target)")
                #expect(request.header("content-length") == "0")
            }
            for request in landed { #expect(request.header("authorization") == nil) }
        }
    }

    @Test(arguments: allLoops)
    func credentialsStayWithTheOriginOnASameOriginRedirect(loop: CurlewClient.Configuration.EventLoopKind) async throws
    {
        // A relative Location: the origin's own /landed.
        let server = try await WireScriptServer.start(Self.redirector { "" })
        defer { Task { try? await server.shutdown() } }
        try await withClient(loop) { client in
            for code in Self.redirectCodes {
                let response = try await client.execute(try Self.credentialRequest(url: "\(server.baseURL)/go-\(code)"))
                #expect(response.text == "landed", "\(code)")
            }
        }
        let landed = server.requests.filter { $0.target == "/landed" }
        #expect(landed.count == Self.redirectCodes.count)
        for request in landed {
            for name in Self.originSecretNames {
                #expect(request.header(name) != nil, "\(name) dropped on the same origin")
            }
            #expect(request.header("proxy-authorization") == nil)
        }
    }

    @Test(arguments: allLoops)
    func cookiePairsGoOutAsOneCookieLine(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ _ in [.response(body: "ok")] }) { server in
            try await withClient(loop) { client in
                var request = try CurlewRequest(url: "\(server.baseURL)/cookies")
                // http-types splits a Cookie value into one field per pair.
                request.headerFields[.cookie] = "a=1; b=2"
                request.headerFields.append(HTTPField(name: .cookie, value: "c=3"))
                _ = try await client.execute(request)
            }
            let cookies = try #require(server.requests.first).headers.filter { $0.name.lowercased() == "cookie" }
            #expect(cookies.map(\.value) == ["a=1; b=2; c=3"])
        }
    }

    @Test(arguments: allLoops)
    func noCredentialGoesOverHTTPAfterHTTPS(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()
        try await withWireScriptServer({ _ in [.response(body: "landed")] }) { landing in
            try await withClient(loop, configure: { $0.tls.caFile = nginx.caFile }) { client in
                for code in Self.redirectCodes {
                    let target = "127.0.0.1:\(landing.port)"
                    let request = try Self.credentialRequest(
                        url: "\(nginx.httpsBaseURL)/redirect-\(code)?target=\(target)")
                    let response = try await client.execute(request)
                    #expect(response.text == "landed", "\(code)")
                }
            }
            #expect(landing.requests.count == Self.redirectCodes.count)
            for request in landing.requests {
                for name in Self.secretNames { #expect(request.header(name) == nil, "\(name) went over http") }
                #expect(request.header("x-trace") == "kept")
            }
        }
    }
}
