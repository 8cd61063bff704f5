import Synchronization

/// A process-wide value started on first use: concurrent callers share one start, and a failed start is
/// remembered and rethrown to every later caller, so a missing package fails every test that needs it fast and
/// with the same message instead of retrying each time.
final class StartOnce<Value: Sendable>: Sendable {
    private let task = Mutex<Task<Value, any Error>?>(nil)
    private let start: @Sendable () async throws -> Value

    init(_ start: @escaping @Sendable () async throws -> Value) {
        self.start = start
    }

    var value: Value {
        get async throws {
            let task = self.task.withLock { task in
                if let task { return task }
                let started = Task.detached(operation: start)
                task = started
                return started
            }
            return try await task.value
        }
    }
}
