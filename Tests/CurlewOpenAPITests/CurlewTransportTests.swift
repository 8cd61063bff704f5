import CurlewEngine
import CurlewLoopbackServer
import CurlewOpenAPI
import CurlewTestSupport
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing

/// The transport against real servers: the scenarios of swift-openapi-urlsession's and
/// swift-openapi-async-http-client's transport tests (conversion both ways, basic GET and POST, redirects with
/// one-shot and replayable bodies, cancellation at every point, bidirectional and download streaming), written
/// for Curlew, plus what is particular to it (Content-Length, HEAD, timeouts, error mapping).
@Suite("CurlewTransport")
struct CurlewTransportTests {
    // MARK: - Conversion

    @Test
    func aRequestJoinsTheBaseURLWithTheEncodedPathAndQueryAndKeepsItsFields() async throws {
        try await withStreamingEchoServer { server in
            try await withClient { client in
                var request = HTTPRequest(
                    method: .post, scheme: nil, authority: nil,
                    path: "/hello%20world/Maria?greeting=Howdy")
                request.headerFields[.contentType] = "application/json"
                request.headerFields[HTTPField.Name("x-mumble2")!] = "mumble, mumble"
                request.headerFields[.cookie] = "uid=1; theme=dark"
                let (response, body) = try await CurlewTransport(client: client).send(
                    request, body: HTTPBody("{}"), baseURL: URL(string: "\(server.baseURL)/api/v1/")!,
                    operationID: "greet")
                #expect(response.status == .ok)
                #expect(
                    response.headerFields[HTTPField.Name("x-echo-uri")!] == "/api/v1/hello%20world/Maria?greeting=Howdy"
                )
                #expect(response.headerFields[HTTPField.Name("x-echo-method")!] == "POST")
                #expect(try await String(collecting: try #require(body), upTo: 1024) == "{}")
            }
        }
    }

    @Test
    func theServerSeesTheRequestsHeaderFieldsAsGiven() async throws {
        try await withLoopbackServer { server in
            try await withClient { client in
                var request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/headers")
                request.headerFields[HTTPField.Name("x-mumble2")!] = "mumble, mumble"
                // http-types splits a Cookie value into one field per pair; HTTP/1.1 allows one Cookie line.
                request.headerFields[.cookie] = "uid=1; theme=dark"
                #expect(request.headerFields[fields: .cookie].count == 2)
                let (response, body) = try await CurlewTransport(client: client).send(
                    request, body: nil, baseURL: URL(string: server.baseURL)!, operationID: "headers")
                #expect(response.status == .ok)
                let seen = try JSONDecoder().decode(
                    [String: String].self, from: Data(try await collect(try #require(body))))
                #expect(seen["x-mumble2"] == "mumble, mumble")
                #expect(seen["cookie"] == "uid=1; theme=dark")
                #expect(seen["_method"] == "GET")
            }
        }
    }

    @Test
    func aResponseKeepsItsStatusFieldsAndBodyWithItsAnnouncedLength() async throws {
        try await withLoopbackServer { server in
            try await withClient { client in
                let (response, body) = try await CurlewTransport(client: client).send(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/json"), body: nil,
                    baseURL: URL(string: server.baseURL)!, operationID: "json")
                #expect(response.status == .ok)
                #expect(response.headerFields[.contentType] == "application/json")
                let responseBody = try #require(body)
                #expect(responseBody.length == .known(Int64(LoopbackServer.jsonBody.utf8.count)))
                #expect(responseBody.iterationBehavior == .single)
                #expect(try await String(collecting: responseBody, upTo: 1 << 20) == LoopbackServer.jsonBody)
            }
        }
    }

    @Test
    func aHeadResponseHasNoBody() async throws {
        try await withLoopbackServer { server in
            try await withClient { client in
                let (response, body) = try await CurlewTransport(client: client).send(
                    HTTPRequest(method: .head, scheme: nil, authority: nil, path: "/small"), body: nil,
                    baseURL: URL(string: server.baseURL)!, operationID: "head")
                #expect(response.status == .ok)
                #expect(response.headerFields[.contentLength] == String(LoopbackServer.smallBody.utf8.count))
                #expect(body == nil)
            }
        }
    }

    // MARK: - Basic GET and POST, checked by the server

    @Test
    func aBasicGETReturnsTheServersBody() async throws {
        try await withLoopbackServer { server in
            try await withClient { client in
                let served = server.requestsServed
                let (response, body) = try await CurlewTransport(client: client).send(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/small"), body: nil,
                    baseURL: URL(string: server.baseURL)!, operationID: "small")
                #expect(response.status == .ok)
                #expect(try await String(collecting: try #require(body), upTo: 1024) == LoopbackServer.smallBody)
                #expect(server.requestsServed == served + 1)
            }
        }
    }

    @Test(arguments: [IterationBehavior.single, .multiple], [true, false])
    func aBasicPOSTSendsTheWholeBodyWithContentLengthWhenKnown(
        iteration: IterationBehavior, lengthKnown: Bool
    ) async throws {
        let payload = patternBytes(300_001)
        try await withStreamingEchoServer { server in
            try await withClient { client in
                let body = HTTPBody(
                    chunked(payload, size: 65_536), length: lengthKnown ? .known(Int64(payload.count)) : .unknown,
                    iterationBehavior: iteration)
                let (response, echoed) = try await CurlewTransport(client: client).send(
                    HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/upload"), body: body,
                    baseURL: URL(string: server.baseURL)!, operationID: "upload")
                #expect(response.status == .ok)
                // A small `.multiple` body is kept in memory to be replayable, so its length is known too.
                let announcesLength = lengthKnown || iteration == .multiple
                #expect(
                    response.headerFields[HTTPField.Name("x-echo-content-length")!]
                        == (announcesLength ? String(payload.count) : nil))
                #expect(try await collect(try #require(echoed)) == payload)
                #expect(server.bytesReceived == payload.count)
            }
        }
    }

    /// A body whose bytes do not add up to its known length fails the same way whether it streams (`.single`,
    /// which the engine checks) or is read into memory first (`.multiple`, which used to go out with its real
    /// count and succeed).
    @Test(arguments: [
        (IterationBehavior.single, 1000), (.multiple, 1000), (.single, 3000), (.multiple, 3000),
    ])
    func aBodyShorterOrLongerThanItsDeclaredLengthFailsInsteadOfGoingOutAsItIs(
        iterationBehavior: IterationBehavior, actualLength: Int
    ) async throws {
        try await withStreamingEchoServer { server in
            try await withClient { client in
                let body = HTTPBody(
                    chunked(patternBytes(actualLength), size: 100), length: .known(2000),
                    iterationBehavior: iterationBehavior)
                let error = await #expect(throws: CurlewError.self) {
                    let (_, echoed) = try await CurlewTransport(client: client).send(
                        HTTPRequest(method: .put, scheme: nil, authority: nil, path: "/short"), body: body,
                        baseURL: URL(string: server.baseURL)!, operationID: "short")
                    _ = try await collect(try #require(echoed))
                }
                #expect(error?.code == .requestBodyFailed)
                if iterationBehavior == .multiple {
                    // Read into memory first, it is found wrong before anything is sent.
                    #expect(server.bytesReceived == 0)
                }
            }
        }
    }

    // MARK: - Redirects and replay

    @Test
    func aReplayableBodyFollowsA307AndReachesTheTargetWhole() async throws {
        let received = Mutex<[String: [UInt8]]>([:])
        try await withScriptedServer({ request in
            received.withLock { $0[request.path] = request.body }
            return request.path == "/from"
                ? ScriptedResponse(status: 307, headers: [("Location", "/to")])
                : ScriptedResponse(status: 200, body: Array("done".utf8))
        }) { server in
            try await withClient { client in
                let (response, body) = try await CurlewTransport(client: client).send(
                    HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/from"),
                    body: HTTPBody(
                        chunked(Array("hello, ".utf8) + Array("redirect".utf8), size: 3),
                        length: .unknown, iterationBehavior: .multiple),
                    baseURL: URL(string: server.baseURL)!, operationID: "redirect")
                #expect(response.status == .ok)
                #expect(try await String(collecting: try #require(body), upTo: 64) == "done")
                #expect(received.withLock { $0["/to"] } == Array("hello, redirect".utf8))
                #expect(server.requestCount == 2)
            }
        }
    }

    @Test
    func aOneShotBodyThatA307WouldResendFailsAsNotReplayable() async throws {
        try await withScriptedServer({ request in
            request.path == "/from"
                ? ScriptedResponse(status: 307, headers: [("Location", "/to")])
                : ScriptedResponse(status: 200)
        }) { server in
            try await withClient { client in
                let error = await #expect(throws: CurlewError.self) {
                    _ = try await CurlewTransport(client: client).send(
                        HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/from"),
                        body: HTTPBody(
                            chunked(Array("once only".utf8), size: 4), length: .unknown,
                            iterationBehavior: .single),
                        baseURL: URL(string: server.baseURL)!, operationID: "redirect")
                }
                #expect(error?.code == .requestBodyNotReplayable)
                #expect(server.requestCount == 1)
            }
        }
    }

    // MARK: - Cancellation

    enum CancellationPoint: CaseIterable, Sendable {
        case beforeSendingHead
        case partwayThroughSendingRequestBody
        case beforeConsumingResponseBody
        case partwayThroughConsumingResponseBody
        case afterConsumingResponseBody
    }

    @Test(arguments: CancellationPoint.allCases)
    func cancellingTheTaskStopsTheExchangeAtEveryPoint(_ point: CancellationPoint) async throws {
        let total = 8 * 1024 * 1024
        try await withLoopbackServer { server in
            try await withClient { client in
                let transport = CurlewTransport(configuration: .init(client: client, responseBufferLimit: 64 * 1024))
                let (uploadChunks, producer) = AsyncStream.makeStream(of: ArraySlice<UInt8>.self)
                let outcome = Task { () -> Result<Int, any Error> in
                    do {
                        if point == .beforeSendingHead { withUnsafeCurrentTask { $0?.cancel() } }
                        let uploads = point == .partwayThroughSendingRequestBody
                        var request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/bytes/\(total)")
                        if uploads {
                            request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/upload")
                        }
                        let body = uploads ? HTTPBody(uploadChunks, length: .unknown, iterationBehavior: .single) : nil
                        let (_, responseBody) = try await transport.send(
                            request, body: body, baseURL: URL(string: server.baseURL)!, operationID: "cancel")
                        if point == .beforeConsumingResponseBody { withUnsafeCurrentTask { $0?.cancel() } }
                        var received = 0
                        for try await chunk in try #require(responseBody) {
                            received += chunk.count
                            if point == .partwayThroughConsumingResponseBody, received >= 1024 * 1024 {
                                withUnsafeCurrentTask { $0?.cancel() }
                            }
                        }
                        if point == .afterConsumingResponseBody { withUnsafeCurrentTask { $0?.cancel() } }
                        return .success(received)
                    } catch {
                        return .failure(error)
                    }
                }
                if point == .partwayThroughSendingRequestBody {
                    let bytesBefore = server.bytesReceived
                    producer.yield(ArraySlice(patternBytes(4096)))
                    // The server has read the first chunk: the body is on its way and not finished.
                    try await waitUntil(timeout: .seconds(30), "the first chunk at the server") {
                        server.bytesReceived - bytesBefore >= 4096
                    }
                    outcome.cancel()
                }
                let result = try await withTimeout(.seconds(60)) { await outcome.value }
                producer.finish()
                switch (point, result) {
                case (.afterConsumingResponseBody, .success(let received)):
                    #expect(received == total)
                case (_, .success(let received)):
                    Issue.record("cancelled at \(point) yet finished with \(received) bytes")
                case (_, .failure(let error)):
                    #expect(error is CancellationError, "cancelled at \(point): \(error)")
                }
            }
        }
    }

    // MARK: - Streaming both ways

    /// Sends a chunk only after the previous one came back: finishes only if the request body and the response
    /// body really stream at the same time (a buffering transport waits for the end of the body forever).
    @Test(arguments: [(1, 10), (10, 10), (4096, 10), (1 << 20, 10), (100_000, 100)])
    func aBidirectionalEchoRatchetsChunkByChunk(chunkSize: Int, chunkCount: Int) async throws {
        try await withStreamingEchoServer { server in
            try await withClient { client in
                let transport = CurlewTransport(
                    configuration: .init(
                        client: client, responseBufferLimit: 64 * 1024, requestBufferLimit: 16 * 1024))
                let (chunks, producer) = AsyncStream.makeStream(of: ArraySlice<UInt8>.self)
                // A hang fails at the bound; a slow run does not: 0.3 s alone, about 6 s in CI's main run of 12
                // tests at a time, 71 s when every test of the run started at once (each chunk's round trip waits
                // for a turn of the cooperative pool).
                try await withTimeout(.seconds(240)) {
                    let (response, body) = try await transport.send(
                        HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/echo"),
                        body: HTTPBody(chunks, length: .unknown, iterationBehavior: .single),
                        baseURL: URL(string: server.baseURL)!, operationID: "echo")
                    #expect(response.status == .ok)
                    var echoed = try #require(body).makeAsyncIterator()
                    var pending: [UInt8] = []
                    for index in 0..<chunkCount {
                        let chunk = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: chunkSize)
                        producer.yield(ArraySlice(chunk))
                        while pending.count < chunkSize {
                            guard let next = try await echoed.next() else { throw EchoEnded() }
                            pending += next
                        }
                        #expect(Array(pending.prefix(chunkSize)) == chunk)
                        pending.removeFirst(chunkSize)
                    }
                    producer.finish()
                    #expect(try await echoed.next() == nil)
                }
                #expect(server.bytesReceived == chunkSize * chunkCount)
            }
        }
    }

    @Test(arguments: [(1024, 100), (10 * 1024, 1000), (1 << 20, 10)])
    func aLargeDownloadStreamsThroughASmallBufferIntact(chunkSize: Int, chunkCount: Int) async throws {
        let total = chunkSize * chunkCount
        try await withLoopbackServer { server in
            try await withClient { client in
                let transport = CurlewTransport(configuration: .init(client: client, responseBufferLimit: chunkSize))
                let (_, maybeBody) = try await transport.send(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/bytes/\(total)"), body: nil,
                    baseURL: URL(string: server.baseURL)!, operationID: "download")
                let body = try #require(maybeBody)
                var received = 0
                var intact = true
                for try await chunk in body {
                    for (offset, byte) in chunk.enumerated()
                    where byte != LoopbackServer.patternByte(at: received + offset) {
                        intact = false
                    }
                    received += chunk.count
                }
                #expect(received == total)
                #expect(intact)
                // A response body is one-shot: reading it again is the runtime's typed error, not empty bytes.
                await #expect(throws: (any Error).self) { for try await _ in body {} }
            }
        }
    }

    // MARK: - Errors and timeouts

    @Test
    func aRefusedConnectionIsTheEnginesTypedError() async throws {
        let port = try FreePort.allocate()
        try await withClient { client in
            let error = await #expect(throws: CurlewError.self) {
                _ = try await CurlewTransport(client: client).send(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/"), body: nil,
                    baseURL: URL(string: "http://127.0.0.1:\(port)")!, operationID: "refused")
            }
            #expect(error?.code == .connectionRefused)
        }
    }

    @Test
    func aBaseURLWithAnotherSchemeIsRefusedBeforeAnythingIsSent() async throws {
        try await withClient { client in
            let error = await #expect(throws: CurlewError.self) {
                _ = try await CurlewTransport(client: client).send(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/etc/passwd"), body: nil,
                    baseURL: URL(string: "file:///")!, operationID: "file")
            }
            #expect(error?.code == .protocolNotAllowed)
        }
    }

    @Test
    func theTransportsTimeoutBoundsTheWholeRequest() async throws {
        try await withLoopbackServer { server in
            try await withClient { client in
                let clock = ContinuousClock()
                let started = clock.now
                let error = await #expect(throws: CurlewError.self) {
                    _ = try await CurlewTransport(client: client, timeout: .milliseconds(300)).send(
                        HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/delay/60000"), body: nil,
                        baseURL: URL(string: server.baseURL)!, operationID: "slow")
                }
                // The server answers after a minute: the timeout, not the answer, ended the request.
                #expect(error?.code == .timeout(.total))
                #expect(clock.now - started >= .milliseconds(300))
                #expect(clock.now - started < .seconds(30))
            }
        }
    }
}

struct EchoEnded: Error {}

/// A client of its own per test, always shut down.
func withClient<T>(
    isolation: isolated (any Actor)? = #isolation, _ body: (CurlewClient) async throws -> T
) async throws -> T {
    var configuration = CurlewClient.Configuration()
    configuration.loopCount = 1
    configuration.proxy = .none
    let client = CurlewClient(configuration: configuration)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}

/// The `/bytes/N` pattern of the loopback server.
func patternBytes(_ count: Int) -> [UInt8] {
    (0..<count).map { LoopbackServer.patternByte(at: $0) }
}

/// `bytes` as chunks of at most `size`, a sequence that can be iterated many times.
func chunked(_ bytes: [UInt8], size: Int) -> AsyncStreamOfChunks {
    AsyncStreamOfChunks(
        chunks: stride(from: 0, to: bytes.count, by: size).map {
            bytes[$0..<min($0 + size, bytes.count)]
        })
}

/// Chunks known up front, replayable: each iteration yields them all again.
struct AsyncStreamOfChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let chunks: [ArraySlice<UInt8>]

    struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: ArraySlice<ArraySlice<UInt8>>
        mutating func next() async -> ArraySlice<UInt8>? { remaining.popFirst() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: chunks[...]) }
}

func collect(_ body: HTTPBody) async throws -> [UInt8] {
    try await [UInt8](collecting: body, upTo: 64 * 1024 * 1024)
}
