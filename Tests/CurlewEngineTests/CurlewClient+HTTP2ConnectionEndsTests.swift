import CurlewEngine
import CurlewTestSupport
import Synchronization
import Testing

/// hypercorn ends HTTP/2 connections on its own: a GOAWAY after 1,000 requests, a close after an idle gap.
/// Neither may cost a request.
@Suite("HTTP/2 connections the server ends (hypercorn)", .serialized)
struct CurlewClientHTTP2ConnectionEndsTests {
    static func configure(_ hypercorn: HypercornServer) -> (inout CurlewClient.Configuration) -> Void {
        { configuration in
            configuration.tls.caFile = hypercorn.caFile
            configuration.timeouts.idle = .seconds(10)
        }
    }

    @Test(arguments: allLoops)
    func fiveThousandSequentialRequestsCrossFourGOAWAYsWithoutAFailure(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let hypercorn = try await HypercornServer.shared()
        let servedBefore = hypercorn.requestsServed()
        var failures: [String] = []
        var connections = Set<Int>()
        var retried = 0
        try await withClient(loop, configure: Self.configure(hypercorn)) { client in
            let request = try CurlewRequest(url: "\(hypercorn.httpsBaseURL)/sequential")
            for index in 0..<5000 {
                do {
                    let response = try await client.execute(request)
                    #expect(response.metrics.httpVersion == .http2)
                    if response.text != "hypercorn:GET /sequential 0" { failures.append("\(index): \(response.text)") }
                    connections.insert(response.metrics.localPort)
                    retried += response.metrics.freshConnectionRetries
                } catch {
                    failures.append("\(index): \(error)")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failed: \(failures.prefix(5))")
        // 1,000 requests a connection: five connections, four GOAWAYs crossed.
        #expect(connections.count >= 5, "connections: \(connections.count), retried: \(retried)")
        // Counted server-side: every request answered (the log is shared with the other tests of the suite, which
        // run one after another).
        try? await waitUntil(timeout: .seconds(30)) { hypercorn.requestsServed() - servedBefore >= 5000 }
        #expect(
            hypercorn.requestsServed() - servedBefore >= 5000, "served \(hypercorn.requestsServed() - servedBefore)")
    }

    @Test(arguments: allLoops)
    func concurrentRequestsCrossAGOAWAYWithoutAFailure(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let hypercorn = try await HypercornServer.shared()
        let tally = Tally()
        try await withClient(
            loop,
            configure: { configuration in
                Self.configure(hypercorn)(&configuration)
                configuration.timeouts.idle = .seconds(60)
                // One loop, one connection: its 1,000th request is crossed.
                configuration.loopCount = 1
            }
        ) { client in
            let request = try CurlewRequest(url: "\(hypercorn.httpsBaseURL)/concurrent")
            try await withThrowingTaskGroup(of: Void.self) { group in
                // 64 in flight at a time.
                for worker in 0..<64 {
                    group.addTask {
                        // One GOAWAY crossed with 64 streams in flight. hypercorn drops the streams past its
                        // 1,000th request that its GOAWAY said it would serve, and closes the connection only when
                        // its TLS shutdown times out (up to 30 s): those requests wait for that close and then go
                        // out again on a fresh connection (docs/design/0007), so the idle timeout must outlast it.
                        for index in stride(from: worker, to: 1100, by: 64) {
                            do {
                                let response = try await client.execute(request)
                                if response.text != "hypercorn:GET /concurrent 0" {
                                    tally.fail("\(index): \(response.text)")
                                }
                                tally.connected(
                                    response.metrics.localPort, retried: response.metrics.freshConnectionRetries)
                            } catch {
                                let metrics = (error as? CurlewError)?.metrics
                                tally.fail(
                                    "\(index): \(error) [reused \(metrics?.reusedConnection ?? false), "
                                        + "retries \(metrics?.freshConnectionRetries ?? 0), port \(metrics?.localPort ?? 0), "
                                        + "sent \(metrics?.bytesSent ?? 0), received \(metrics?.bytesReceived ?? 0)]")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let (failed, connections, retried) = tally.state.withLock { ($0.failures, $0.connections, $0.retried) }
        #expect(failed.isEmpty, "\(failed.count) failed: \(failed.prefix(5))")
        #expect(connections.count >= 2)
        #expect(retried > 0, "the dropped streams went out again on a fresh connection")
    }

    @Test(arguments: allLoops)
    func cleartextHTTP2RequestsCrossGOAWAYsWithoutAFailure(loop: CurlewClient.Configuration.EventLoopKind) async throws
    {
        let hypercorn = try await HypercornServer.shared()
        var failures: [String] = []
        try await withClient(loop, configure: Self.configure(hypercorn)) { client in
            var request = try CurlewRequest(url: "\(hypercorn.h2cBaseURL)/h2c")
            request.httpVersion = .http2PriorKnowledge
            for index in 0..<1200 {
                do {
                    let response = try await client.execute(request)
                    if response.text != "hypercorn:GET /h2c 0" { failures.append("\(index): \(response.text)") }
                } catch {
                    failures.append("\(index): \(error)")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failed: \(failures.prefix(5))")
    }

    @Test(arguments: allLoops)
    func idempotentRequestsAfterTheServerClosedAnIdleConnectionSucceed(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let hypercorn = try await HypercornServer.shared()
        try await withClient(
            loop,
            configure: { configuration in
                Self.configure(hypercorn)(&configuration)
                // Longer than the server's keep-alive: the pooled connection is offered after the server closed it.
                configuration.maxConnectionIdleAge = .seconds(60)
            }
        ) { client in
            let get = try CurlewRequest(url: "\(hypercorn.httpsBaseURL)/before-gap")
            let warm = try await client.execute(get)
            #expect(warm.metrics.httpVersion == .http2)
            // The scenario itself: an idle gap longer than the server's keep-alive timeout.
            try await Task.sleep(for: .seconds(HypercornServer.keepAliveTimeoutSeconds + 1))
            let afterGap = try await client.execute(try CurlewRequest(url: "\(hypercorn.httpsBaseURL)/after-gap"))
            #expect(afterGap.text == "hypercorn:GET /after-gap 0")
            try await Task.sleep(for: .seconds(HypercornServer.keepAliveTimeoutSeconds + 1))
            let put = try CurlewRequest(
                method: .put, url: "\(hypercorn.httpsBaseURL)/put-after-gap", body: .bytes([1, 2, 3]))
            let putResponse = try await client.execute(put)
            #expect(putResponse.text == "hypercorn:PUT /put-after-gap 3")
        }
    }
}

/// Failures and connections seen by concurrent requests.
private final class Tally: Sendable {
    struct State {
        var failures: [String] = []
        var connections: Set<Int> = []
        var retried = 0
    }
    let state = Mutex(State())

    func fail(_ description: String) { state.withLock { $0.failures.append(description) } }
    func connected(_ localPort: Int, retried: Int) {
        state.withLock {
            $0.connections.insert(localPort)
            $0.retried += retried
        }
    }
}

/// A stream the server resets before its end: RST_STREAM with NO_ERROR closes a response only after END_STREAM
/// (RFC 9113, 8.1); before it, the response is cut short, as a reset with any other code cuts it.
@Suite("HTTP/2 streams reset before their end (fault server)")
struct CurlewClientHTTP2StreamResetTests {
    @Test(arguments: allLoops)
    func aStreamResetWithNoErrorBeforeItsEndNeverPassesForTheWholeBody(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let server = try await FaultServer.start()
        defer { server.stop() }
        let expected = FaultServer.body(requestID: "reset-no-error", size: 65_536)
        try await withClient(loop, configure: { $0.tls.caFile = server.caFile }) { client in
            // Half the body without content-length, then RST_STREAM NO_ERROR and no END_STREAM.
            let request = try CurlewRequest(url: "\(server.http2BaseURL)/rst-no-error/reset-no-error/65536")
            let outcome: Result<CurlewResponse, any Error>
            do {
                outcome = .success(try await client.execute(request))
            } catch {
                outcome = .failure(error)
            }
            switch outcome {
            case .success(let response):
                // What libcurl 7.88 does (curl issue 6015, seen by `make soak`): the cut body as if whole. The
                // engine cannot tell, since libcurl does not say how a stream ended; the bytes at least are the
                // response's own.
                #expect(response.body.count < expected.count && expected.starts(with: response.body))
                withKnownIssue(
                    "libcurl reports a stream reset with NO_ERROR before END_STREAM as a complete response (curl 6015)",
                    isIntermittent: true
                ) {
                    Issue.record("a response cut by RST_STREAM NO_ERROR succeeded with \(response.body.count) bytes")
                }
            case .failure(let error):
                #expect(error is CurlewError, "\(error)")
            }
        }
    }
}
