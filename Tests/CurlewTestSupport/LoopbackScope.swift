public import CurlewLoopbackServer

/// Runs `body` against a fresh ``CurlewLoopbackServer/LoopbackServer`` and always shuts it down,
/// so a failing test cannot leak the server's event loop threads.
public func withLoopbackServer<T>(
    threads: Int = 1,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (LoopbackServer) async throws -> T
) async throws -> T {
    let server = try await LoopbackServer.start(threads: threads)
    let result: T
    do {
        result = try await body(server)
    } catch {
        try? await server.shutdown()
        throw error
    }
    try await server.shutdown()
    return result
}
