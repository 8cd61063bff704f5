/// The connection limits one libcurl multi handle is set up with (`CURLMOPT_*`; 0 means none).
struct MultiLimits: Equatable {
    var hostConnections: Int
    var totalConnections: Int
    var cachedConnections: Int
    var concurrentStreams: Int
}

/// How a loop of the socket-action driver spreads HTTP/1 transfers over several libcurl multi handles ("parts"),
/// and the limits of each. Pure: no libcurl call, tested synchronously.
///
/// libcurl 7.88 walks every connection of a multi handle's cache on each `curl_multi_remove_handle` (it looks
/// for a connect-only connection to close) and every connection to the host when it picks one for a new request,
/// so each request costs time in proportion to the connections open: at 4,000 connections, raw libcurl spends
/// over 40 % of its CPU in those two walks. Each multi handle has a cache of its own, so a loop that keeps at most
/// ``transfersPerPart`` transfers in each multi handle pays for at most that many connections per request
/// (`docs/design/0011-socket-action-loop.md`).
///
/// Parts fill in order: a transfer goes to the first part with fewer than ``transfersPerPart`` in flight, a new
/// part is opened when all are full, and a transfer whose part just finished one takes its place (and its idle
/// connection). Only transfers that can only use HTTP/1 are spread; a request that may multiplex stays in part 0,
/// where one connection carries many (its host's bundle stays short). With the client's connection limits no
/// larger than one part, a loop has one part, as before. The price: once a loop has several parts, part 0 holds
/// one part's slice of the limits, so requests that may multiplex (HTTPS with ``CurlewClient/HTTPVersion/http2``)
/// get at most 64 connections per host per loop, which an HTTPS server that only speaks HTTP/1.1 then feels.
struct MultiPartPlan: Equatable {
    /// The most transfers in flight per part before the next part is used. The connection walks cost about
    /// 20 ns per connection; 64 keeps them near 1 µs of a request's ~25 µs (measured in the design note).
    static let transfersPerPart = 64
    /// The most parts a loop opens when its connections have no limit (64 × 128 = 8,192 transfers in flight).
    static let maximumParts = 128

    /// How many parts the loop may open.
    let partCount: Int
    /// The loop's share of the per-host and total limits (0: none).
    private let hostConnections: Int
    private let totalConnections: Int
    private let cachedConnections: Int
    private let concurrentStreams: Int

    /// One loop's share of a client's connection limit: an equal share, rounded up (nil: no limit).
    static func loopShare(of limit: Int?, loopCount: Int) -> Int? {
        let loops = max(loopCount, 1)
        return limit.map { ($0 + loops - 1) / loops }
    }

    /// The plan of one of `loopCount` loops: each loop gets an equal share of the client's limits, rounded up.
    /// `spreadsTransfers` is false for drivers that drive one multi handle (poll, Dispatch).
    init(settings: ClientSettings, loopCount: Int, spreadsTransfers: Bool) {
        hostConnections = Self.loopShare(of: settings.maxConnectionsPerHost, loopCount: loopCount) ?? 0
        totalConnections = Self.loopShare(of: settings.maxConnectionsTotal, loopCount: loopCount) ?? 0
        cachedConnections = max(settings.maxCachedConnectionsPerLoop, 1)
        concurrentStreams = max(settings.maxConcurrentStreamsPerConnection, 1)
        guard spreadsTransfers else {
            partCount = 1
            return
        }
        // The tighter of the two limits bounds the connections, and so the parts worth opening.
        let limits = [hostConnections, totalConnections].filter { $0 > 0 }
        if let tightest = limits.min() {
            partCount = min((tightest + Self.transfersPerPart - 1) / Self.transfersPerPart, Self.maximumParts)
        } else {
            partCount = Self.maximumParts
        }
    }

    /// The limits of part `index`. One part has the loop's whole share. With several, each has one part's worth of
    /// the limits (the last what remains), so together they keep the loop's share; each caches as many connections
    /// as it runs transfers, since libcurl 7.88 counts busy connections against the cache and closes one after
    /// nearly every request when the cache is smaller than the connections in use.
    func limits(ofPart index: Int) -> MultiLimits {
        guard partCount > 1 else {
            return MultiLimits(
                hostConnections: hostConnections, totalConnections: totalConnections,
                cachedConnections: cachedConnections, concurrentStreams: concurrentStreams)
        }
        func slice(_ limit: Int) -> Int {
            limit == 0 ? 0 : max(min(Self.transfersPerPart, limit - index * Self.transfersPerPart), 1)
        }
        let cached = max(Self.transfersPerPart, (cachedConnections + partCount - 1) / partCount)
        return MultiLimits(
            hostConnections: slice(hostConnections), totalConnections: slice(totalConnections),
            cachedConnections: cached, concurrentStreams: concurrentStreams)
    }

    /// Where a transfer goes.
    enum Choice: Equatable {
        /// An open part, by index.
        case part(Int)
        /// A new part, which gets the next index.
        case openPart
    }

    /// How many transfers part `index` takes before the next part is used: ``transfersPerPart``, or fewer when its
    /// slice of the connection limits is smaller (the last part's may be), so none waits for a connection there
    /// while another part has room.
    func capacity(ofPart index: Int) -> Int {
        guard partCount > 1 else { return .max }
        let limits = limits(ofPart: index)
        return [Self.transfersPerPart, limits.hostConnections, limits.totalConnections].filter { $0 > 0 }.min()!
    }

    /// Chooses the part of a new transfer, given how many transfers each open part runs (`inFlight(i)` for
    /// `i < openParts`): the first part with room; a new part when all are full and the plan allows one; else the
    /// least loaded. A transfer that may multiplex (`http1Only` false) always goes to part 0.
    func choosePart(http1Only: Bool, openParts: Int, inFlight: (Int) -> Int) -> Choice {
        guard http1Only, partCount > 1 else { return .part(0) }
        var leastLoaded = 0
        var leastCount = Int.max
        for index in 0..<openParts {
            let count = inFlight(index)
            // Only the last part's slice can be smaller than a full part.
            let room = index == partCount - 1 ? capacity(ofPart: index) : Self.transfersPerPart
            if count < room { return .part(index) }
            if count < leastCount { (leastLoaded, leastCount) = (index, count) }
        }
        return openParts < partCount ? .openPart : .part(leastLoaded)
    }
}
