import CurlewTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import CurlewEngine

/// `executeRepeatedly`: a load generator's worker as one transfer that the loop re-adds request after request.
/// Every request it chooses reaches the server once and is reported once, whatever ends it; the checks of a single
/// request still hold.
@Suite("Repeated requests on one transfer")
struct CurlewClientRepeatingTests {
    /// Records every outcome and chooses the next request from a fixed plan.
    final class Plan: Sendable {
        let order: [Int]
        let outcomes = Mutex<[Result<RepeatedResponse, any Error>]>([])

        init(_ order: [Int]) { self.order = order }

        /// The chooser `executeRepeatedly` calls: the plan's next index, nil after its last.
        func next(_ outcome: Result<RepeatedResponse, any Error>) -> Int? {
            outcomes.withLock { outcomes in
                outcomes.append(outcome)
                return outcomes.count < order.count ? order[outcomes.count] : nil
            }
        }

        var recorded: [Result<RepeatedResponse, any Error>] { outcomes.withLock { $0 } }
    }

    /// Answers every request with its own method, target and body length, so each answer's length names its request.
    static func echo(_ request: WireRequest) -> String {
        "own:\(request.method) \(request.target) \(request.header("Content-Length") ?? "-")"
    }

    @Test(arguments: allLoops)
    func everyChosenRequestReachesTheServerOnceInOrder(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ [.response(body: Self.echo($0))] }) { server in
            let requests = [
                try CurlewRequest(url: "\(server.baseURL)/plain"),
                try CurlewRequest(
                    method: .post, url: "\(server.baseURL)/post", body: .bytes(Array("twelve bytes".utf8))),
                try CurlewRequest(url: "\(server.baseURL)/with-header", headerFields: [.accept: "text/plain"]),
            ]
            // Repeats of one request (the handle re-added as it is) and changes between all three.
            let order = [0, 0, 0, 1, 1, 0, 2, 2, 1, 0, 2, 0, 0, 1] + Array(repeating: 0, count: 50)
            let plan = Plan(order)
            try await withClient(loop) { client in
                await client.executeRepeatedly(requests, startingAt: order[0], next: plan.next)
            }
            let expectedTargets = order.map { ["/plain", "/post", "/with-header"][$0] }
            #expect(server.requests.map(\.target) == expectedTargets)
            #expect(server.requests.filter { $0.target == "/post" }.allSatisfy { $0.header("Content-Length") == "12" })
            #expect(
                server.requests.filter { $0.target == "/with-header" }.allSatisfy {
                    $0.header("Accept") == "text/plain"
                })
            #expect(
                server.requests.filter { $0.target != "/with-header" }.allSatisfy {
                    $0.header("Accept") != "text/plain"
                })
            #expect(server.connectionCount == 1)
            let outcomes = plan.recorded
            #expect(outcomes.count == order.count)
            for (index, outcome) in outcomes.enumerated() {
                let response = try outcome.get()
                let answer = Self.echo(server.requests[index])
                #expect(response.status == 200)
                #expect(response.bytesReceived == Int64(answer.utf8.count), "request \(index)")
                #expect(response.bytesSent == (order[index] == 1 ? 12 : 0), "request \(index)")
                #expect(response.reusedConnection == (index > 0), "request \(index)")
            }
        }
    }

    /// Requests made for each number the chooser returns (a template's): every one reaches the server once, in
    /// order, with its own target and header; a request with a body that can be read only once ends the repeat
    /// instead of going out, and so does the maker's nil.
    @Test(arguments: allLoops)
    func madeRequestsGoOutOneByOneUntilTheMakerHasNone(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ [.response(body: Self.echo($0))] }) { server in
            let baseURL = server.baseURL
            let numbers = [7, 8, 9, 100, 101, 3]
            let plan = Plan(numbers)
            @Sendable func make(_ number: Int) -> CurlewRequest? {
                guard number < 1000 else { return nil }
                var request = try? CurlewRequest(method: .get, filledURL: "\(baseURL)/n/\(number)")
                try? request?.addHeader("X-Number", String(number))
                if number == 3 { request?.body = .stream(RequestBodyStream(AsyncStream<[UInt8]> { $0.finish() })) }
                return request
            }
            try await withClient(loop) { client in
                await client.executeRepeatedly(making: make, startingAt: numbers[0], next: plan.next)
            }
            // The last number's request has a one-shot body: it never went out, and the repeat ended.
            #expect(server.requests.map(\.target) == numbers.dropLast().map { "/n/\($0)" })
            #expect(server.requests.map { $0.header("X-Number") } == numbers.dropLast().map(String.init))
            #expect(server.connectionCount == 1)
            #expect(plan.recorded.count == numbers.count - 1)
            #expect(try plan.recorded.allSatisfy { try $0.get().status == 200 })
        }
    }

    /// The response-queue poisoning of `CurlewClientConnectionReuseTests`, on a repeated transfer, which reuses the
    /// connection as soon as the last response ends: a complete fake response behind a real one (on the socket when
    /// the real one ends: one write, and a body longer than libcurl's first read) never answers the next request.
    @Test(arguments: allLoops)
    func aFakeResponseBehindARealOneNeverAnswersTheNextRequest(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let poison = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Poisoned: yes\r\n\r\nPOISON"
        let padding = String(repeating: ".", count: 100_000)
        try await withWireScriptServer({ request in
            guard request.target == "/first" else { return [.response(body: Self.echo(request))] }
            return [.send(Array((WireStep.responseText(body: padding) + poison).utf8))]
        }) { server in
            let requests = [
                try CurlewRequest(url: "\(server.baseURL)/first"), try CurlewRequest(url: "\(server.baseURL)/next"),
            ]
            let order = Array([0, 1].repeated(20).joined())
            let plan = Plan(order)
            try await withClient(loop) { client in
                await client.executeRepeatedly(requests, startingAt: 0, next: plan.next)
            }
            // Each request reached the server, and every /next went out on a connection of its own: none was answered
            // by the fake.
            #expect(server.requests.map(\.target) == order.map { $0 == 0 ? "/first" : "/next" })
            #expect(server.requests.filter { $0.target == "/next" }.allSatisfy { $0.indexOnConnection == 0 })
            for (index, outcome) in plan.recorded.enumerated() {
                let expected = order[index] == 0 ? padding.utf8.count : Self.echo(server.requests[index]).utf8.count
                #expect((try? outcome.get())?.bytesReceived == Int64(expected), "request \(index): \(outcome)")
            }
        }
    }

    /// Every answer closes its connection, so each request opens a new one, after its handle was configured again
    /// for a different request: the loop still opens those sockets itself (close-on-exec; on the Dispatch loop, the
    /// sockets it watches), as for a first request.
    @Test(arguments: allLoops)
    func connectionsOpenedAfterAReconfigurationAreTheLoopsOwn(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withWireScriptServer({ request in
            if request.target == "/stall" { return [.mark("stalled"), .wait(milliseconds: 30_000)] }
            return [.response(headers: [("Connection", "close")], body: Self.echo(request)), .close]
        }) { server in
            let requests = [
                try CurlewRequest(url: "\(server.baseURL)/a"),
                try CurlewRequest(method: .put, url: "\(server.baseURL)/b", body: .bytes(Array("body".utf8))),
                try CurlewRequest(url: "\(server.baseURL)/stall"),
            ]
            let order = Array([0, 1, 1, 0].repeated(5).joined()) + [2]
            let plan = Plan(order)
            try await withClient(loop) { client in
                let worker = Task { await client.executeRepeatedly(requests, startingAt: 0, next: plan.next) }
                try await server.waitForMark("stalled")
                // The stalled request's socket, opened after the handle was configured again for it.
                let sockets = try SocketDescriptors.connected(toPort: server.port)
                // The Dispatch loop may still hold the last closed connection's socket, whose source it cancels first.
                #expect(!sockets.isEmpty)
                #expect(sockets.allSatisfy { $0.isCloseOnExec }, "\(sockets)")
                worker.cancel()
                await worker.value
            }
            #expect(server.requests.map(\.target) == order.map { ["/a", "/b", "/stall"][$0] })
            #expect(server.connectionCount == order.count)
            let answered = plan.recorded.dropLast()
            #expect(answered.allSatisfy { (try? $0.get())?.reusedConnection == false })
            #expect(answered.allSatisfy { (try? $0.get())?.status == 200 })
        }
    }

    /// A repeated transfer keeps no response head, except for the check a decoded-size limit needs: a gzip body past
    /// the limit fails every time, while the same client's uncompressed body of that size does not.
    @Test(arguments: allLoops)
    func aDecodedSizeLimitHoldsOnEveryRepeat(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let httpbin = try await HTTPBinServer.shared()
        try await withClient(loop, configure: { $0.decompression = .enabledWithLimit(64) }) { client in
            let requests = [
                try CurlewRequest(url: "\(httpbin.baseURL)/gzip"),
                try CurlewRequest(url: "\(httpbin.baseURL)/bytes/1000"),
            ]
            let order = [0, 0, 1, 1, 0, 1, 0, 0]
            let plan = Plan(order)
            await client.executeRepeatedly(requests, startingAt: 0, next: plan.next)
            let outcomes = plan.recorded
            try #require(outcomes.count == order.count)
            for (index, outcome) in outcomes.enumerated() {
                if order[index] == 0 {
                    #expect((outcome.failure as? CurlewError)?.code == .bodyTooLarge, "request \(index): \(outcome)")
                } else {
                    #expect((try? outcome.get())?.bytesReceived == 1000, "request \(index): \(outcome)")
                }
            }
        }
    }

    /// The same request repeated has its own deadlines each time: its setup is moved to each new submission, not
    /// kept, so every repeat reaches the server and gets its whole total timeout, and none fails before it starts.
    @Test(arguments: allLoops)
    func eachRepeatOfTheSameRequestGetsItsWholeTimeout(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ request in
            request.target == "/stall"
                ? [.wait(milliseconds: 3_000), .response(body: "late")] : [.response(body: Self.echo(request))]
        }) { server in
            var stall = try CurlewRequest(url: "\(server.baseURL)/stall")
            stall.timeouts.total = .milliseconds(300)
            let requests = [try CurlewRequest(url: "\(server.baseURL)/ok"), stall]
            let order = [1, 1, 1, 0]
            let plan = Plan(order)
            try await withClient(loop) { client in
                await client.executeRepeatedly(requests, startingAt: order[0], next: plan.next)
            }
            let outcomes = plan.recorded
            try #require(outcomes.count == order.count)
            for index in 0..<3 {
                #expect(
                    (outcomes[index].failure as? CurlewError)?.code == .timeout(.total),
                    "request \(index): \(outcomes[index])")
            }
            #expect((try? outcomes[3].get())?.status == 200)
            #expect(server.requests.map(\.target) == ["/stall", "/stall", "/stall", "/ok"])
        }
    }

    /// A request whose total timeout is zero fails before it starts, first or repeated, the same request again or
    /// another: `next` hears of every one, and the repeat goes on.
    @Test(arguments: allLoops)
    func aRequestThatFailsBeforeItStartsIsReportedFirstOrRepeated(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withWireScriptServer({ [.response(body: Self.echo($0))] }) { server in
            var expired = try CurlewRequest(url: "\(server.baseURL)/expired")
            expired.timeouts.total = .zero
            let requests = [expired, try CurlewRequest(url: "\(server.baseURL)/ok")]
            let order = [0, 1, 0, 0, 1]
            let plan = Plan(order)
            try await withClient(loop) { client in
                await client.executeRepeatedly(requests, startingAt: order[0], next: plan.next)
            }
            let outcomes = plan.recorded
            try #require(outcomes.count == order.count)
            for index in [0, 2, 3] {
                let error = outcomes[index].failure as? CurlewError
                #expect(error?.code == .timeout(.total), "request \(index): \(outcomes[index])")
                // The handle still holds the last request's figures; a request libcurl never had has none.
                #expect(error?.metrics == nil, "request \(index): \(String(describing: error?.metrics))")
            }
            for index in [1, 4] { #expect((try? outcomes[index].get())?.status == 200, "request \(index)") }
            #expect(server.requests.map(\.target) == ["/ok", "/ok"])
        }
    }

    /// A request whose configuration fails part-way (its body file is missing) resets the handle and leaves it
    /// half-configured. Chosen again, or followed by a plain GET, it must be configured in full, never re-added as
    /// it was: the half-configured request would go out as a GET without its body or the client's options.
    @Test(arguments: allLoops)
    func aRequestThatCannotBeConfiguredNeverGoesOutOnTheHandleItLeft(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withWireScriptServer({ [.response(body: Self.echo($0))] }) { server in
            let missing = FileManager.default.temporaryDirectory.appendingPathComponent("curlew-missing-\(UUID())")
            let upload = try CurlewRequest(
                method: .post, url: "\(server.baseURL)/upload", body: .file(.path(missing.path)))
            let requests = [try CurlewRequest(url: "\(server.baseURL)/plain"), upload]
            let order = [0, 1, 1, 0, 1, 0]
            let plan = Plan(order)
            try await withClient(loop) { client in
                await client.executeRepeatedly(requests, startingAt: order[0], next: plan.next)
            }
            let outcomes = plan.recorded
            try #require(outcomes.count == order.count)
            for (index, chosen) in order.enumerated() {
                if chosen == 0 {
                    #expect((try? outcomes[index].get())?.status == 200, "request \(index): \(outcomes[index])")
                } else {
                    #expect(outcomes[index].failure != nil, "request \(index) went out: \(outcomes[index])")
                }
            }
            #expect(server.requests.map(\.target) == ["/plain", "/plain", "/plain"])
        }
    }

    @Test(arguments: allLoops)
    func aFailedRequestIsReportedAndTheNextOneGoesOut(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ request in
            switch request.target {
            // Answered only once the test has seen the outcomes: a 3 s wait once ended in a stall of the test
            // process on CI, before the idle timeout was acted on.
            case "/stall": [.mark("stalled"), .waitForRelease("stalled"), .response(body: "late")]
            case "/reset": [.reset]
            default: [.response(body: Self.echo(request))]
            }
        }) { server in
            // Once the outcomes are in (or the test failed), so that no script is left waiting.
            defer { server.release("stalled") }
            var stall = try CurlewRequest(url: "\(server.baseURL)/stall")
            stall.timeouts.idle = .milliseconds(300)
            let requests = [
                try CurlewRequest(url: "\(server.baseURL)/ok"), stall,
                try CurlewRequest(url: "\(server.baseURL)/reset"),
            ]
            let order = [0, 1, 0, 2, 0, 0]
            let plan = Plan(order)
            try await withClient(loop) { client in
                await client.executeRepeatedly(requests, startingAt: 0, next: plan.next)
            }
            let outcomes = plan.recorded
            try #require(outcomes.count == order.count)
            #expect(((outcomes[1].failure as? CurlewError)?.code) == .timeout(.idle))
            #expect(outcomes[3].failure is CurlewError)
            for index in [0, 2, 4, 5] { #expect((try? outcomes[index].get())?.status == 200, "request \(index)") }
            // The requests after each failure reached the server.
            #expect(server.requests.filter { $0.target == "/ok" }.count == 4)
        }
    }

    @Test(arguments: allLoops)
    func cancellingTheCallerEndsTheRepeatAndReportsTheRequestInFlight(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await Self.expectCancellingTheCallerEndsTheRepeat(loop: loop)
    }

    /// Two requests, then one that stalls; the caller is cancelled while it stalls and `next` would go on choosing:
    /// `next` hears of the request in flight as cancelled, and nothing it chooses afterwards goes out or is reported.
    static func expectCancellingTheCallerEndsTheRepeat(
        loop: CurlewClient.Configuration.EventLoopKind,
        configure: (inout CurlewClient.Configuration) -> Void = { _ in }
    ) async throws {
        try await withWireScriptServer({ request in
            request.target == "/stall" ? [.mark("stalled"), .wait(milliseconds: 30_000)] : [.response(body: "ok")]
        }) { server in
            let requests = [
                try CurlewRequest(url: "\(server.baseURL)/ok"), try CurlewRequest(url: "\(server.baseURL)/stall"),
            ]
            let plan = Plan([0, 0, 1] + Array(repeating: 0, count: 10))
            try await withClient(loop, configure: configure) { client in
                let worker = Task { await client.executeRepeatedly(requests, startingAt: 0, next: plan.next) }
                try await server.waitForMark("stalled")
                worker.cancel()
                await worker.value
            }
            let outcomes = plan.recorded
            #expect(outcomes.count == 3)
            #expect(outcomes.last?.failure is CancellationError)
            #expect(server.requests.count == 3)
        }
    }

    @Test(arguments: allLoops)
    func shuttingTheClientDownEndsTheRepeat(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withWireScriptServer({ request in
            request.target == "/stall" ? [.mark("stalled"), .wait(milliseconds: 30_000)] : [.response(body: "ok")]
        }) { server in
            let requests = [try CurlewRequest(url: "\(server.baseURL)/stall")]
            let plan = Plan(Array(repeating: 0, count: 10))
            var configuration = CurlewClient.Configuration()
            configuration.eventLoop = loop
            let client = CurlewClient(configuration: configuration)
            let worker = Task { await client.executeRepeatedly(requests, startingAt: 0, next: plan.next) }
            try await server.waitForMark("stalled")
            await client.shutdown()
            await worker.value
            #expect(plan.recorded.count == 1)
            #expect(((plan.recorded.first?.failure as? CurlewError)?.code) == .cancelled)
        }
    }

    /// One request at a time (a logger here) ends on a cancelled caller as the loop's repeat does.
    @Test func withALoggerCancellingTheCallerEndsTheRepeat() async throws {
        try await Self.expectCancellingTheCallerEndsTheRepeat(
            loop: .thread, configure: { $0.logger = Logger(label: "repeat-test") })
    }

    /// A logger (or tracer) wants each request on its own: the same choices, one request at a time.
    @Test func withALoggerEachRequestRunsOnItsOwnWithTheSameChoices() async throws {
        try await withWireScriptServer({ [.response(body: Self.echo($0))] }) { server in
            let requests = [
                try CurlewRequest(url: "\(server.baseURL)/a"), try CurlewRequest(url: "\(server.baseURL)/b"),
            ]
            let order = [0, 1, 1, 0, 1]
            let plan = Plan(order)
            try await withClient(.thread, configure: { $0.logger = Logger(label: "repeat-test") }) { client in
                await client.executeRepeatedly(requests, startingAt: 0, next: plan.next)
            }
            #expect(server.requests.map(\.target) == ["/a", "/b", "/b", "/a", "/b"])
            #expect(plan.recorded.allSatisfy { (try? $0.get())?.status == 200 })
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let failure) = self { failure } else { nil }
    }
}

extension Array {
    fileprivate func repeated(_ count: Int) -> [[Element]] { [[Element]](repeating: self, count: count) }
}

/// This process's sockets connected to a port, and whether they are close-on-exec (`fcntl`).
enum SocketDescriptors {
    struct Descriptor: CustomStringConvertible {
        let number: Int32
        let isCloseOnExec: Bool
        var description: String { "fd \(number)\(isCloseOnExec ? "" : " without FD_CLOEXEC")" }
    }

    /// The open descriptors whose peer is a TCP port `port` (IPv4 or IPv6).
    static func connected(toPort port: Int) throws -> [Descriptor] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { entry in
            guard let number = Int32(entry), peerPort(of: number) == port else { return nil }
            return Descriptor(number: number, isCloseOnExec: fcntl(number, F_GETFD) & FD_CLOEXEC != 0)
        }
    }

    private static func peerPort(of descriptor: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        guard status == 0 else { return nil }
        // sin_port and sin6_port are both right after the family.
        guard Int32(storage.ss_family) == AF_INET || Int32(storage.ss_family) == AF_INET6 else { return nil }
        return withUnsafeBytes(of: storage) { Int(UInt16(bigEndian: $0.load(fromByteOffset: 2, as: UInt16.self))) }
    }
}
