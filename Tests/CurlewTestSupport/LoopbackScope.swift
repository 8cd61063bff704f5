public import CurlewLoopbackServer

/// Runs `body` against a fresh ``CurlewLoopbackServer/LoopbackServer`` and always shuts it down,
/// so a failing test cannot leak the server's event loop threads.
public func withLoopbackServer<T>(
    threads: Int = 1,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (LoopbackServer) async throws -> T
) async throws -> T {
    try await withStartedServer(
        start: { try await LoopbackServer.start(threads: threads) }, shutdown: { try await $0.shutdown() }, body)
}

/// The scoped-server shape every `with…Server` helper shares: start, run `body`, and shut the server down
/// whether `body` returned or threw (a shutdown failure after a thrown error is dropped, the error is not).
public func withStartedServer<Server, T>(
    isolation: isolated (any Actor)? = #isolation,
    start: () async throws -> Server,
    shutdown: (Server) async throws -> Void,
    _ body: (Server) async throws -> T
) async throws -> T {
    let server = try await start()
    let result: T
    do {
        result = try await body(server)
    } catch {
        try? await shutdown(server)
        throw error
    }
    try await shutdown(server)
    return result
}
