import CurlewEngine
import Foundation
import Histogram
import Synchronization

/// Latencies in microseconds, 3 significant digits, growing its range as needed.
typealias LatencyHistogram = Histogram<UInt64>

struct BenchPlan: Sendable {
    enum Stop: Sendable {
        /// Exactly this many requests.
        case count(Int)
        /// No request scheduled (or, without a rate, started) after this long.
        case duration(Duration)
    }

    let request: CurlewRequest
    let connections: Int
    let stop: Stop
    /// Requests per second in total; nil sends the next request as soon as a worker is free.
    let rate: Double?
}

/// What the workers of one event loop saw, added up at the end.
///
/// One per loop rather than one per worker: a histogram with 3 significant digits is about 140 KiB once it
/// covers a minute, and growing 64 small ones value by value cost more CPU than the requests' own bookkeeping.
struct BenchTally: Sendable {
    var histogram: LatencyHistogram = {
        // Sized for latencies up to a minute up front; slower requests still grow it.
        var histogram = LatencyHistogram(
            lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        histogram.autoResize = true
        return histogram
    }()
    var succeeded = 0
    var failures: [String: Int] = [:]
    /// Indexed by status code (100...999): an array add per response instead of a dictionary update.
    var statusCounts = [Int](repeating: 0, count: 1000)
    var bytesSent: Int64 = 0
    var bytesReceived: Int64 = 0
    var connectionsOpened = 0
    /// Requests the engine sent once more on a fresh connection because the pooled one was dead or dirty.
    var freshConnectionRetries = 0

    var requests: Int { Int(histogram.totalCount) }

    mutating func add(_ other: BenchTally) {
        histogram.add(other.histogram)
        succeeded += other.succeeded
        failures.merge(other.failures, uniquingKeysWith: +)
        for code in statusCounts.indices { statusCounts[code] += other.statusCounts[code] }
        bytesSent += other.bytesSent
        bytesReceived += other.bytesReceived
        connectionsOpened += other.connectionsOpened
        freshConnectionRetries += other.freshConnectionRetries
    }

    mutating func record(_ response: CurlewResponse) {
        let metrics = response.metrics
        statusCounts[min(max(response.status.code, 0), 999)] += 1
        bytesSent += metrics.bytesSent
        bytesReceived += metrics.bytesReceived + Int64(metrics.headerBytesReceived)
        if !metrics.reusedConnection { connectionsOpened += 1 }
        freshConnectionRetries += metrics.freshConnectionRetries
        if response.status.code < 400 {
            succeeded += 1
        } else {
            failures["http\(response.status.code / 100)xx", default: 0] += 1
        }
    }

    mutating func record(_ error: any Error) {
        guard let error = error as? CurlewError else {
            failures["cancelled", default: 0] += 1
            return
        }
        failures[error.code.reportName, default: 0] += 1
        if let metrics = error.metrics {
            // A failed request may still have opened a connection and moved bytes.
            bytesSent += metrics.bytesSent
            bytesReceived += metrics.bytesReceived + Int64(metrics.headerBytesReceived)
            if !metrics.reusedConnection && metrics.localPort != 0 { connectionsOpened += 1 }
            freshConnectionRetries += metrics.freshConnectionRetries
        }
    }
}

/// The tally of one loop's workers.
final class SharedTally: Sendable {
    let state = Mutex(BenchTally())
}

struct BenchResult: Sendable {
    var tally: BenchTally
    var elapsed: Duration
    var histogram: LatencyHistogram { tally.histogram }
}

final class BenchRunner: Sendable {
    private let client: CurlewClient
    private let plan: BenchPlan
    /// Next request number to claim: with -n, claims beyond the count stop the worker, which is what makes
    /// the number sent exact.
    private let nextTicket = Atomic<Int>(0)
    private let completed = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let stopRequested = Atomic<Bool>(false)
    private let startedAt = Mutex<ContinuousClock.Instant?>(nil)

    init(client: CurlewClient, plan: BenchPlan) {
        self.client = client
        self.plan = plan
    }

    /// Stops claiming new requests (Ctrl-C); those in flight finish and are counted.
    func requestStop() {
        stopRequested.store(true, ordering: .relaxed)
    }

    func run() async -> BenchResult {
        let clock = ContinuousClock()
        let start = clock.now
        startedAt.withLock { $0 = start }
        let startNanoseconds = monotonicNanoseconds()
        let executors = client.executors
        let tallies = (0..<max(executors.count, 1)).map { _ in SharedTally() }
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<plan.connections {
                let tally = tallies[worker % tallies.count]
                // On the loops' own executors a finished transfer resumes its worker on the loop thread, whose next
                // request then enters libcurl without a thread hop (docs/design/0001-event-loop.md).
                if executors.isEmpty {
                    group.addTask { await self.work(start: startNanoseconds, tally: tally) }
                } else {
                    group.addTask(executorPreference: executors[worker % executors.count]) {
                        await self.work(start: startNanoseconds, tally: tally)
                    }
                }
            }
        }
        var total = BenchTally()
        for tally in tallies { tally.state.withLock { total.add($0) } }
        return BenchResult(tally: total, elapsed: clock.now - start)
    }

    /// One connection's worth of requests. The workers of a loop share its tally; they take turns on the loop's
    /// thread, so its lock is never contended there.
    nonisolated(nonsending) private func work(start: UInt64, tally: SharedTally) async {
        let request = plan.request
        let deadline: UInt64? =
            if case .duration(let duration) = plan.stop { start + duration.nanoseconds } else { nil }
        let limit: Int? = if case .count(let count) = plan.stop { count } else { nil }
        let nanosecondsPerRequest = plan.rate.map { 1e9 / $0 }
        // Without a rate a worker sends its next request as soon as it has counted the last one: the time that
        // request ended is when this one was meant to start (one clock read per request instead of two).
        var previousEnd = monotonicNanoseconds()
        while !stopRequested.load(ordering: .relaxed) {
            let ticket = nextTicket.wrappingAdd(1, ordering: .relaxed).oldValue
            if let limit, ticket >= limit { break }
            let intended: UInt64
            if let nanosecondsPerRequest {
                // The schedule is fixed in advance: a late request keeps its intended time, so its wait for a free
                // worker counts as latency.
                intended = start + UInt64(Double(ticket) * nanosecondsPerRequest)
                if let deadline, intended >= deadline { break }
                let now = monotonicNanoseconds()
                if intended > now {
                    do { try await Task.sleep(nanoseconds: intended - now) } catch { break }
                }
            } else {
                intended = previousEnd
                if let deadline, intended >= deadline { break }
            }
            let outcome: Result<CurlewResponse, any Error>
            do {
                // Bodies are counted, never kept: a load generator has no use for them.
                outcome = .success(try await client.executeDiscardingBody(request))
            } catch {
                outcome = .failure(error)
            }
            previousEnd = monotonicNanoseconds()
            let latency = (previousEnd &- intended) / 1_000
            tally.state.withLock { tally in
                switch outcome {
                case .success(let response):
                    tally.record(response)
                    if response.status.code >= 400 { failed.add(1, ordering: .relaxed) }
                case .failure(let error):
                    tally.record(error)
                    failed.add(1, ordering: .relaxed)
                }
                tally.histogram.record(latency)
            }
            completed.add(1, ordering: .relaxed)
        }
    }

    /// Reports progress until cancelled.
    func reportProgress(every interval: Duration, to output: ProgressOutput) async {
        guard output.enabled else { return }
        let clock = ContinuousClock()
        var previousCount = 0
        var previousTime = clock.now
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let now = clock.now
            let count = completed.load(ordering: .relaxed)
            let errors = failed.load(ordering: .relaxed)
            let currentRate = Double(count - previousCount) / (now - previousTime).seconds
            let elapsed = startedAt.withLock { $0.map { now - $0 } } ?? .zero
            var line = "\(formatCount(count)) requests"
            if case .count(let total) = plan.stop { line += " of \(formatCount(total))" }
            line += String(format: ", %.0f req/s, %d errors, %.1f s", currentRate, errors, elapsed.seconds)
            output.update(line)
            previousCount = count
            previousTime = now
        }
    }
}
