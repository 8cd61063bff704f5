import Foundation
import Synchronization

/// What the soak counts, shared by every worker. Each update takes the lock briefly; the soak is paced by its faults
/// (and by the Python server), not by this lock.
final class SoakTally: Sendable {
    /// The counts of one loop and protocol.
    struct Cell: Sendable, Codable {
        var requests = 0
        var succeeded = 0
        var wrongBodies = 0
        /// Requests that neither returned nor threw within their total timeout plus the margin.
        var hung = 0
        /// Faulted HTTP/2 requests ended by RST_STREAM NO_ERROR before END_STREAM, without content-length, that
        /// libcurl reported as complete, their body an exact prefix of the right one (curl issue 6015): a known
        /// libcurl limitation, counted apart so that any other wrong body still fails the soak.
        var libcurlTruncations = 0
        /// Errors other than `CurlewError` (the engine promises that one type, and `CancellationError`).
        var untypedErrors = 0
        /// Normal requests that failed (allowed, with a typed error: an HTTP/2 connection a fault takes down ends
        /// its other streams too, and a stray fault can kill a reused HTTP/1.1 connection).
        var normalFailed = 0
        /// Successful requests that went out more than once because the connection they reused was dead.
        var freshConnectionRetries = 0
        var reusedConnections = 0
    }

    /// A wrong body, kept (the first few) for the report.
    struct WrongBody: Sendable, Codable {
        var cell: String
        var route: String
        var requestID: String
        var status: Int
        var expectedBytes: Int
        var receivedBytes: Int
        var firstDifference: Int?
        var receivedExcerpt: String
        /// Which connection the response came on (its local port), whether it was a pooled one, and how often the
        /// request went out again on a fresh one.
        var localPort: Int
        var reusedConnection: Bool
        var freshConnectionRetries: Int
    }

    private struct State {
        var cells: [String: Cell] = [:]
        /// "route: error code" → count, over every cell.
        var failuresByCause: [String: Int] = [:]
        var wrongBodies: [WrongBody] = []
        var untyped: [String] = []
    }

    private let state = Mutex(State())

    func update(_ cell: String, _ body: (inout Cell) -> Void) {
        state.withLock { body(&$0.cells[cell, default: Cell()]) }
    }

    func failed(_ cell: String, route: SoakRoute, version: SoakProtocol, code: String) {
        state.withLock { state in
            state.failuresByCause["\(route.kind) \(version.rawValue): \(code)", default: 0] += 1
            if !route.isFault { state.cells[cell, default: Cell()].normalFailed += 1 }
        }
    }

    func wrongBody(_ record: WrongBody) {
        state.withLock { state in
            state.cells[record.cell, default: Cell()].wrongBodies += 1
            if state.wrongBodies.count < 20 { state.wrongBodies.append(record) }
        }
    }

    func untyped(_ cell: String, _ description: String) {
        state.withLock { state in
            state.cells[cell, default: Cell()].untypedErrors += 1
            if state.untyped.count < 20 { state.untyped.append(description) }
        }
    }

    var cells: [String: Cell] { state.withLock { $0.cells } }
    var failuresByCause: [String: Int] { state.withLock { $0.failuresByCause } }
    var wrongBodyRecords: [WrongBody] { state.withLock { $0.wrongBodies } }
    var untypedRecords: [String] { state.withLock { $0.untyped } }

    /// The sum over every cell.
    var total: Cell {
        cells.values.reduce(into: Cell()) { sum, cell in
            sum.requests += cell.requests
            sum.succeeded += cell.succeeded
            sum.wrongBodies += cell.wrongBodies
            sum.libcurlTruncations += cell.libcurlTruncations
            sum.hung += cell.hung
            sum.untypedErrors += cell.untypedErrors
            sum.normalFailed += cell.normalFailed
            sum.freshConnectionRetries += cell.freshConnectionRetries
            sum.reusedConnections += cell.reusedConnections
        }
    }
}

/// Requests on their way, with when each started, so that one that never returns is noticed while the soak runs
/// (and the soak can end with a report instead of hanging with it).
final class InFlightRequests: Sendable {
    private struct Entry {
        var cell: String
        var description: String
        var started: ContinuousClock.Instant
        var reported = false
    }

    private let entries = Mutex<[UInt64: Entry]>([:])

    func begin(_ id: UInt64, cell: String, description: String) {
        entries.withLock { $0[id] = Entry(cell: cell, description: description, started: .now) }
    }

    /// Removes the request; returns whether it had been reported as hung already.
    func end(_ id: UInt64) -> Bool {
        entries.withLock { $0.removeValue(forKey: id)?.reported ?? false }
    }

    /// The requests older than `limit` not reported before, each with its cell; marks them reported.
    func overdue(limit: Duration) -> [(cell: String, description: String)] {
        let now = ContinuousClock.now
        return entries.withLock { entries in
            var found: [(cell: String, description: String)] = []
            for (id, entry) in entries where !entry.reported && now - entry.started > limit {
                entries[id]?.reported = true
                found.append((entry.cell, entry.description))
            }
            return found
        }
    }

    var count: Int { entries.withLock { $0.count } }
}

/// The process's resident set size over time, from `/proc/self/status`.
final class RSSSamples: Sendable {
    struct Sample: Sendable, Codable {
        /// Seconds since the soak started.
        var seconds: Double
        var kibibytes: Int
    }

    private let samples = Mutex<[Sample]>([])

    /// `VmRSS` in KiB, or nil where `/proc` is not there.
    static func currentKiB() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    func record(at seconds: Double) {
        guard let kibibytes = Self.currentKiB() else { return }
        samples.withLock { $0.append(Sample(seconds: seconds, kibibytes: kibibytes)) }
    }

    var all: [Sample] { samples.withLock { $0 } }
}

/// Request serials, unique over every worker: part of each request id.
final class SerialNumbers: Sendable {
    private let last = Atomic<UInt64>(0)

    func next() -> UInt64 { last.wrappingAdd(1, ordering: .relaxed).newValue }
}

/// Set once every worker has returned, read by the watchdog thread.
final class DoneFlag: Sendable {
    private let done = Atomic<Bool>(false)

    func set() { done.store(true, ordering: .releasing) }
    var isSet: Bool { done.load(ordering: .acquiring) }
}
