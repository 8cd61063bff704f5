import CurlewEngine
import Foundation
import Testing

/// Both event loops run every live test.
let allLoops: [CurlewClient.Configuration.EventLoopKind] = [.thread, .thread(driver: .socketAction), .dispatch]

/// Runs `body` with a fresh client on the given loop and always shuts it down.
///
/// The pooled-connection idle age is raised from the default 4 s to 120 s before `configure` runs: a loaded CI
/// machine has left a test process unscheduled for longer than 4 s between two requests, retiring the connection
/// a test meant to reuse (seen in the logging and unread-bytes tests). Tests of the age policy set their own.
func withClient<T>(
    _ loop: CurlewClient.Configuration.EventLoopKind,
    configure: (inout CurlewClient.Configuration) -> Void = { _ in },
    _ body: (CurlewClient) async throws -> T
) async throws -> T {
    var configuration = CurlewClient.Configuration()
    configuration.eventLoop = loop
    configuration.maxConnectionIdleAge = .seconds(120)
    configure(&configuration)
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

/// The error's code, or nil when `body` succeeded or threw something else.
func curlewErrorCode(_ body: () async throws -> Void) async -> CurlewError.Code? {
    do {
        try await body()
        return nil
    } catch let error as CurlewError {
        return error.code
    } catch {
        return nil
    }
}

/// Runs `workers` concurrent tasks, each sending `requests` in order; returns how many responses were 200 OK.
func okResponses(_ client: CurlewClient, workers: Int, each requests: [CurlewRequest]) async throws -> Int {
    try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<workers {
            group.addTask {
                var succeeded = 0
                for request in requests {
                    if try await client.execute(request).status == .ok { succeeded += 1 }
                }
                return succeeded
            }
        }
        return try await group.reduce(0, +)
    }
}

/// The thrown error itself, for tests that look at more than the code.
func caughtError(_ body: () async throws -> Void) async -> (any Error)? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}

extension CurlewResponse {
    /// The body as a JSON object (httpbin's echo format).
    func json() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(body))
        guard let dictionary = object as? [String: Any] else {
            throw CurlewError(code: .invalidResponse, detail: "not a JSON object")
        }
        return dictionary
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
