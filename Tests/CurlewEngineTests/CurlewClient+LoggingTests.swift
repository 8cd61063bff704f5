import CurlewLoopbackServer
import CurlewTestSupport
import InMemoryLogging
import Logging
import Testing

@testable import CurlewEngine

/// Per-client and per-request loggers: debug events with a request id, redirects and timeouts, credentials never
/// logged, nothing at all without a logger or above debug level. Redirects come from a real server's 302s.
@Suite("Request logging")
struct CurlewClientLoggingTests {
    @Test
    func eachRequestsEventsCarryItsOwnRequestID() async throws {
        let handler = InMemoryLogHandler()
        try await withLoopbackServer { server in
            try await withClient(.thread, configure: { $0.logger = debugLogger(handler) }) { client in
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            }
        }
        let entries = handler.entries
        #expect(
            entries.map(\.message.description) == [
                "sending request", "received response", "sending request", "received response",
            ])
        let ids = entries.map { $0.metadata["curlew-request-id"]?.description }
        #expect(ids[0] != nil && ids[0] == ids[1])
        #expect(ids[2] != nil && ids[2] == ids[3] && ids[2] != ids[0])
        #expect(entries[1].metadata["http.response.status_code"] == "200")
        // The second request went over the first one's connection.
        #expect(entries[3].metadata["curlew.connection.reused"] == "true")
        #expect(entries.allSatisfy { $0.level == .debug })
    }

    @Test
    func aRequestsOwnLoggerOverridesTheClientsAndRedirectsAreLogged() async throws {
        let clientHandler = InMemoryLogHandler()
        let requestHandler = InMemoryLogHandler()
        try await withScriptedServer({ request in
            request.path == "/old" ? ScriptedResponse(status: 302, headers: [("Location", "/new")]) : ScriptedResponse()
        }) { server in
            try await withClient(.thread, configure: { $0.logger = debugLogger(clientHandler) }) { client in
                var request = try CurlewRequest(url: "\(server.baseURL)/old")
                request.logger = debugLogger(requestHandler)
                let response = try await client.execute(request)
                #expect(response.url.hasSuffix("/new"))
            }
            #expect(server.requestCount == 2)
        }
        #expect(clientHandler.entries.isEmpty)
        let redirect = try #require(requestHandler.entries.first { $0.message.description == "followed redirects" })
        #expect(redirect.metadata["curlew.redirect.count"] == "1")
        #expect(redirect.metadata["url.final"]?.description.hasSuffix("/new") == true)
    }

    @Test
    func timeoutsAreLoggedWithTheirKindAndCredentialsNever() async throws {
        let handler = InMemoryLogHandler()
        try await withLoopbackServer { server in
            try await withClient(.thread, configure: { $0.logger = debugLogger(handler) }) { client in
                var request = try CurlewRequest(url: "http://user:s3cr3t@127.0.0.1:\(server.port)/delay/60000")
                request.timeouts = .init(connect: .seconds(5), total: .milliseconds(200))
                await #expect(throws: CurlewError.self) { _ = try await client.execute(request) }
            }
        }
        let entries = handler.entries
        #expect(entries.last?.message.description == "request timed out")
        #expect(entries.last?.metadata["curlew.timeout"] == "total")
        #expect(!entries.contains { "\($0.metadata)".contains("s3cr3t") })
        #expect(entries.first?.metadata["url.full"]?.description.contains("REDACTED") == true)
    }

    /// The engine's own refusal of a dirty pooled connection, which only libcurl 7.x leaves to it (8.x refuses such a
    /// connection itself when it picks it, with no attempt to retry).
    @Test(.enabled(if: !LibcurlVersion.running.refusesPooledConnectionsWithPendingInput))
    func aRetryOnAFreshConnectionIsLogged() async throws {
        let handler = InMemoryLogHandler()
        try await withWireScriptServer(CurlewClientConnectionReuseTests.strayScript(.after300Milliseconds)) { server in
            try await withClient(.thread, configure: { $0.logger = debugLogger(handler) }) { client in
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/first"))
                try await server.waitForMark("stray-0-0")
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/next"))
            }
        }
        let retry = try #require(handler.entries.first { $0.message.description == "retried on a fresh connection" })
        #expect(retry.metadata["curlew.connection.fresh_retries"] == "1")
        #expect(retry.metadata["curlew-request-id"] != nil)
    }

    @Test
    func nothingIsLoggedWithoutALoggerOrAboveDebug() async throws {
        let handler = InMemoryLogHandler()
        var infoLogger = Logger(label: "curlew.tests", factory: { _ in handler })
        infoLogger.logLevel = .info
        try await withLoopbackServer { server in
            try await withClient(.thread, configure: { $0.logger = infoLogger }) { client in
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            }
            try await withClient(.thread) { client in
                #expect(client.logger == nil)
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            }
        }
        #expect(handler.entries.isEmpty)
    }
}

private func debugLogger(_ handler: InMemoryLogHandler) -> Logger {
    var logger = Logger(label: "curlew.tests", factory: { _ in handler })
    logger.logLevel = .debug
    return logger
}
