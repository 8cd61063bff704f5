import CurlewEngine
import Synchronization

/// Validated requests by URL, so a route called again skips the engine's URL validation (two URL parsers, a few
/// microseconds: most of what the layer would otherwise add to a small request).
///
/// Bounded: when full it starts over, so a process that calls endless distinct URLs (ids in paths, queries) keeps
/// a constant footprint and pays validation as it would without the cache.
enum ValidatedRequestCache {
    private static let capacity = 512
    private static let entries = Mutex<[String: CurlewRequest]>([:])

    /// A GET request for `url` with no header fields or body, validated now or earlier.
    static func request(for url: String) throws -> CurlewRequest {
        if let cached = entries.withLock({ $0[url] }) { return cached }
        let request = try CurlewRequest(url: url)
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[url] = request
        }
        return request
    }
}
