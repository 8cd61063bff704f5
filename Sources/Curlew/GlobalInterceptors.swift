import Synchronization

/// Interceptors applied to every request of every provider in the process, closest to the wire
/// (BothamNetworking's `globalRequestInterceptors` and `globalResponseInterceptors`, made thread-safe).
///
/// ```swift
/// GlobalInterceptors.append(LoggingInterceptor(logger: Logger(label: "http")))
/// ```
public enum GlobalInterceptors {
    private static let storage = Mutex<[any Interceptor]>([])

    /// The interceptors, in the order they were appended.
    public static var all: [any Interceptor] {
        storage.withLock { $0 }
    }

    /// Adds an interceptor after the others.
    public static func append(_ interceptor: any Interceptor) {
        storage.withLock { $0.append(interceptor) }
    }

    /// Removes every global interceptor.
    public static func removeAll() {
        storage.withLock { $0.removeAll() }
    }
}
