import CurlewEngine

/// The protocol a soak request speaks: HTTP/1.1 in cleartext, or HTTP/2 over TLS (ALPN), where libcurl 7.88 also
/// reuses and multiplexes connections (its cleartext HTTP/2 gets a connection per request, see
/// `docs/design/0003-h2c.md`).
enum SoakProtocol: String, CaseIterable, Sendable, Codable {
    case http1 = "HTTP/1.1"
    case http2 = "HTTP/2"

    /// `"http1"` or `"http2"`: for `--protocols` and request ids.
    var tag: String {
        switch self {
        case .http1: "http1"
        case .http2: "http2"
        }
    }

    var engineVersion: CurlewClient.HTTPVersion {
        switch self {
        case .http1: .http1_1
        case .http2: .http2
        }
    }

    var negotiatedVersion: TransferMetrics.HTTPVersion {
        switch self {
        case .http1: .http1_1
        case .http2: .http2
        }
    }
}

/// One route of the fault server (`Tests/servers/fault_server.py` describes what each does on the wire).
struct SoakRoute: Sendable {
    /// The path's first segment, as the fault server knows it.
    let kind: String
    /// Whether the server sends a complete, correct response. A faulted route never does, so the request must fail
    /// with a ``CurlewError``; a normal route's request must succeed with the exact body, or fail with one (a
    /// fault on another stream of the same HTTP/2 connection can take it down too).
    let isFault: Bool
    /// The protocols the route exists for.
    let protocols: Set<SoakProtocol>
    /// Relative frequency in the mix.
    let weight: Int

    /// The mix: about four requests in five are normal ones, the rest faults. Stalls and unanswered requests cost a
    /// worker a whole idle timeout each, so they are rarer than the faults that end at once.
    static let all: [SoakRoute] = [
        SoakRoute(kind: "ok", isFault: false, protocols: [.http1, .http2], weight: 40),
        SoakRoute(kind: "chunked", isFault: false, protocols: [.http1, .http2], weight: 10),
        SoakRoute(kind: "slow", isFault: false, protocols: [.http1, .http2], weight: 3),
        SoakRoute(kind: "stray", isFault: false, protocols: [.http1, .http2], weight: 6),
        SoakRoute(kind: "idle-close", isFault: false, protocols: [.http1, .http2], weight: 6),
        SoakRoute(kind: "goaway", isFault: false, protocols: [.http2], weight: 6),
        SoakRoute(kind: "reset", isFault: true, protocols: [.http1, .http2], weight: 3),
        SoakRoute(kind: "rst-no-error", isFault: true, protocols: [.http2], weight: 2),
        SoakRoute(kind: "close-mid-body", isFault: true, protocols: [.http1, .http2], weight: 2),
        SoakRoute(kind: "short-length", isFault: true, protocols: [.http1, .http2], weight: 3),
        SoakRoute(kind: "chunked-truncated", isFault: true, protocols: [.http1], weight: 3),
        SoakRoute(kind: "stall", isFault: true, protocols: [.http1, .http2], weight: 1),
        SoakRoute(kind: "never-answer", isFault: true, protocols: [.http1, .http2], weight: 1),
        SoakRoute(kind: "malformed", isFault: true, protocols: [.http1, .http2], weight: 2),
        SoakRoute(kind: "empty-reply", isFault: true, protocols: [.http1], weight: 2),
        SoakRoute(kind: "goaway-abrupt", isFault: true, protocols: [.http2], weight: 1),
        // Content-encoded bodies the engine decodes itself, whole or cut inside their coding.
        SoakRoute(kind: "gzip", isFault: false, protocols: [.http1, .http2], weight: 4),
        SoakRoute(kind: "gzip-members", isFault: false, protocols: [.http1, .http2], weight: 1),
        SoakRoute(kind: "br", isFault: false, protocols: [.http1, .http2], weight: 1),
        SoakRoute(kind: "gzip-cut", isFault: true, protocols: [.http1, .http2], weight: 2),
        SoakRoute(kind: "br-cut", isFault: true, protocols: [.http1, .http2], weight: 1),
        SoakRoute(kind: "gzip-trailing", isFault: true, protocols: [.http1, .http2], weight: 1),
    ]

    /// A route for `version`, drawn by weight from those in `routes`.
    static func random(
        for version: SoakProtocol, from routes: [SoakRoute], using generator: inout some RandomNumberGenerator
    ) -> SoakRoute {
        let candidates = routes.filter { $0.protocols.contains(version) }
        var pick = Int.random(in: 0..<candidates.reduce(0) { $0 + $1.weight }, using: &generator)
        for route in candidates {
            if pick < route.weight { return route }
            pick -= route.weight
        }
        return candidates[candidates.count - 1]
    }

    /// Body sizes of normal requests: empty, tiny, one libcurl buffer and a bit, HTTP/2's initial window, and a body
    /// of many frames and reads. Faults send half a body (or one byte short), so theirs are never empty.
    static let normalSizes = [0, 1, 137, 4_096, 16_385, 65_536, 300_000]
    static let faultSizes = [1_000, 16_385, 65_536, 300_000]
}
