import NIOHTTP1

/// What a request asked for, decided from its head alone so the body can be routed to the
/// right sink while it streams in.
enum LoopbackRoute: Equatable {
    case small
    case json
    case bytes(Int)
    case echo
    case upload
    case headers
    case status(Int)
    case delay(milliseconds: Int64)
    /// `/freeze/MS?every_ms=PERIOD`: the server freezes for the first MS of every PERIOD milliseconds (of its
    /// monotonic clock, shared by every connection); a request that arrives during a freeze is answered when it ends,
    /// any other at once. At a constant arrival rate the latency percentiles are known: the q-quantile is
    /// `MS - (1 - q) × PERIOD` where that is positive, so a load generator's accuracy can be checked against them.
    case freeze(milliseconds: Int64, periodMilliseconds: Int64)
    /// `/events/N?interval_ms=MS`: N server-sent events (`text/event-stream`), one every MS milliseconds.
    case events(count: Int, intervalMilliseconds: Int64)
    case proxied(String)
    case fault(LoopbackFault)
    case notFound
    case methodNotAllowed(allow: String)
    case badRequest(String)

    /// Upper bounds keep `TimeAmount` arithmetic (nanoseconds in an `Int64`) far from overflow,
    /// since the server must survive any input.
    static let maximumDelayMilliseconds = 3_600_000
    static let maximumSlowChunks = 10_000_000

    init(head: HTTPRequestHead) {
        let uri = head.uri
        let lowered = uri.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            self = .proxied(uri)
            return
        }

        let path: Substring
        let query: Substring
        if let mark = uri.firstIndex(of: "?") {
            path = uri[..<mark]
            query = uri[uri.index(after: mark)...]
        } else {
            path = uri[...]
            query = ""
        }
        let method = head.method
        let isRead = method == .GET || method == .HEAD
        let isWrite = method == .POST || method == .PUT

        func readOnly(_ route: LoopbackRoute) -> LoopbackRoute {
            isRead ? route : .methodNotAllowed(allow: "GET, HEAD")
        }
        func writeOnly(_ route: LoopbackRoute) -> LoopbackRoute {
            isWrite ? route : .methodNotAllowed(allow: "POST, PUT")
        }

        switch path {
        case "/small": self = readOnly(.small)
        case "/json": self = readOnly(.json)
        case "/echo": self = writeOnly(.echo)
        case "/upload": self = writeOnly(.upload)
        case "/headers": self = .headers
        default:
            if let rest = path.dropPrefix("/bytes/") {
                guard let count = Int(rest), count >= 0 else {
                    self = .badRequest("/bytes/N needs a non-negative integer N")
                    return
                }
                self = readOnly(.bytes(count))
            } else if let rest = path.dropPrefix("/status/") {
                // 1xx cannot be a final response, so it is refused rather than sent.
                guard let code = Int(rest), (200...999).contains(code) else {
                    self = .badRequest("/status/N needs N in 200...999")
                    return
                }
                self = .status(code)
            } else if path.hasPrefix("/files/") {
                // `curlew upload` with no URL PUTs each file to /files/<relative path>; answered like /upload.
                self = writeOnly(.upload)
            } else if let rest = path.dropPrefix("/delay/") {
                guard let delay = Int(rest), (0...Self.maximumDelayMilliseconds).contains(delay) else {
                    self = .badRequest("/delay/MS needs MS in 0...\(Self.maximumDelayMilliseconds)")
                    return
                }
                self = readOnly(.delay(milliseconds: Int64(delay)))
            } else if let rest = path.dropPrefix("/freeze/") {
                let period = LoopbackFault.parse(query: query)["every_ms"].flatMap { Int($0) }
                guard let freeze = Int(rest), let period, 0 < freeze, freeze <= period,
                    period <= Self.maximumDelayMilliseconds
                else {
                    self = .badRequest(
                        "/freeze/MS?every_ms=PERIOD needs 0 < MS <= PERIOD <= \(Self.maximumDelayMilliseconds)")
                    return
                }
                self = readOnly(.freeze(milliseconds: Int64(freeze), periodMilliseconds: Int64(period)))
            } else if let rest = path.dropPrefix("/events/") {
                let interval = LoopbackFault.parse(query: query)["interval_ms"].flatMap { Int($0) } ?? 10
                guard let count = Int(rest), (0...Self.maximumSlowChunks).contains(count),
                    (0...Self.maximumDelayMilliseconds).contains(interval)
                else {
                    self = .badRequest(
                        "/events/N?interval_ms=MS needs N in 0...\(Self.maximumSlowChunks), MS in 0...\(Self.maximumDelayMilliseconds)"
                    )
                    return
                }
                self = readOnly(.events(count: count, intervalMilliseconds: Int64(interval)))
            } else if let rest = path.dropPrefix("/fault/") {
                // Faults accept any method so upload paths can be tested against them too.
                self = LoopbackFault(name: rest, query: query).map { .fault($0) } ?? .notFound
            } else {
                self = .notFound
            }
        }
    }

    /// How long a `/freeze/` request that arrived at `uptime` waits: until the freeze it arrived in ends, or not at all
    /// between freezes.
    static func freezeWait(
        atUptimeNanoseconds uptime: UInt64, freezeMilliseconds: Int64, periodMilliseconds: Int64
    ) -> Int64 {
        let phase = Int64(uptime % UInt64(periodMilliseconds * 1_000_000))
        return max(freezeMilliseconds * 1_000_000 - phase, 0)
    }

    /// Routes whose body is kept or checksummed; everything else is only counted.
    var collectsBody: Bool { self == .echo }
    var checksumsBody: Bool { self == .upload }

    /// Faults must do exactly what they promise on the wire, so no interim `100 Continue`.
    var mayAnswerExpectContinue: Bool {
        if case .fault = self { return false }
        return true
    }
}

/// Deliberate protocol violations and stalls served under `/fault/`.
enum LoopbackFault: Equatable {
    case closeMidBody
    case shortContentLength
    case resetAfterHeaders
    case neverAnswer
    case slowBody(chunks: Int, intervalMilliseconds: Int64)
    case malformed
    case emptyReply
    case chunkedTruncated

    init?(name: Substring, query: Substring) {
        switch name {
        case "close-mid-body": self = .closeMidBody
        case "short-content-length": self = .shortContentLength
        case "reset-after-headers": self = .resetAfterHeaders
        case "never-answer": self = .neverAnswer
        case "malformed": self = .malformed
        case "empty-reply": self = .emptyReply
        case "chunked-truncated": self = .chunkedTruncated
        case "slow-body":
            let parameters = Self.parse(query: query)
            let chunks = parameters["chunks"].flatMap { Int($0) } ?? 10
            let interval = parameters["interval_ms"].flatMap { Int($0) } ?? 100
            guard (0...LoopbackRoute.maximumSlowChunks).contains(chunks),
                (0...LoopbackRoute.maximumDelayMilliseconds).contains(interval)
            else { return nil }
            self = .slowBody(chunks: chunks, intervalMilliseconds: Int64(interval))
        default: return nil
        }
    }

    static func parse(query: Substring) -> [Substring: Substring] {
        var result: [Substring: Substring] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            result[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return result
    }
}

extension Substring {
    fileprivate func dropPrefix(_ prefix: String) -> Substring? {
        self.hasPrefix(prefix) ? self.dropFirst(prefix.count) : nil
    }
}
