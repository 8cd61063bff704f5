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

/// What one worker saw; workers keep their own and they are added up at the end, so the hot loop shares
/// nothing but two relaxed counters.
struct BenchTally: Sendable {
    var histogram = LatencyHistogram(numberOfSignificantValueDigits: .three)
    var succeeded = 0
    var failures: [String: Int] = [:]
    /// Indexed by status code (100...999): an array add per response instead of a dictionary update.
    var statusCounts = [Int](repeating: 0, count: 1000)
    var bytesSent: Int64 = 0
    var bytesReceived: Int64 = 0
    var connectionsOpened = 0

    var requests: Int { Int(histogram.totalCount) }

    mutating func add(_ other: BenchTally) {
        histogram.add(other.histogram)
        succeeded += other.succeeded
        failures.merge(other.failures, uniquingKeysWith: +)
        for code in statusCounts.indices { statusCounts[code] += other.statusCounts[code] }
        bytesSent += other.bytesSent
        bytesReceived += other.bytesReceived
        connectionsOpened += other.connectionsOpened
    }
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
        let executors = client.executors
        let tally = await withTaskGroup(of: BenchTally.self) { group in
            for worker in 0..<plan.connections {
                // On the loops' own executors a finished transfer resumes its worker on the loop thread, whose next
                // request then enters libcurl without a thread hop (docs/design/0001-event-loop.md).
                if executors.isEmpty {
                    group.addTask { await self.work(start: start) }
                } else {
                    group.addTask(executorPreference: executors[worker % executors.count]) {
                        await self.work(start: start)
                    }
                }
            }
            var total = BenchTally()
            for await tally in group { total.add(tally) }
            return total
        }
        return BenchResult(tally: tally, elapsed: clock.now - start)
    }

    private func work(start: ContinuousClock.Instant) async -> BenchTally {
        let clock = ContinuousClock()
        let request = plan.request
        var tally = BenchTally()
        let deadline: ContinuousClock.Instant? =
            if case .duration(let duration) = plan.stop { start + duration } else { nil }
        let limit: Int? = if case .count(let count) = plan.stop { count } else { nil }
        let nanosecondsPerRequest = plan.rate.map { 1e9 / $0 }
        while !stopRequested.load(ordering: .relaxed) {
            let ticket = nextTicket.wrappingAdd(1, ordering: .relaxed).oldValue
            if let limit, ticket >= limit { break }
            let intended: ContinuousClock.Instant
            if let nanosecondsPerRequest {
                // The schedule is fixed in advance: a late request keeps its intended time, so its wait for a free
                // worker counts as latency.
                intended = start + .nanoseconds(Int64(Double(ticket) * nanosecondsPerRequest))
                if let deadline, intended >= deadline { break }
                if intended > clock.now {
                    do { try await Task.sleep(until: intended, clock: clock) } catch { break }
                }
            } else {
                intended = clock.now
                if let deadline, intended >= deadline { break }
            }
            do {
                // Bodies are counted, never kept: a load generator has no use for them.
                let response = try await client.executeDiscardingBody(request)
                let metrics = response.metrics
                tally.statusCounts[min(max(response.status.code, 0), 999)] += 1
                tally.bytesSent += metrics.bytesSent
                tally.bytesReceived += metrics.bytesReceived + Int64(metrics.headerBytesReceived)
                if !metrics.reusedConnection { tally.connectionsOpened += 1 }
                if response.status.code < 400 {
                    tally.succeeded += 1
                } else {
                    tally.failures["http\(response.status.code / 100)xx", default: 0] += 1
                    failed.add(1, ordering: .relaxed)
                }
            } catch let error as CurlewError {
                tally.failures[error.code.reportName, default: 0] += 1
                if let metrics = error.metrics {
                    // A failed request may still have opened a connection and moved bytes.
                    tally.bytesSent += metrics.bytesSent
                    tally.bytesReceived += metrics.bytesReceived + Int64(metrics.headerBytesReceived)
                    if !metrics.reusedConnection && metrics.localPort != 0 { tally.connectionsOpened += 1 }
                }
                failed.add(1, ordering: .relaxed)
            } catch {
                tally.failures["cancelled", default: 0] += 1
                failed.add(1, ordering: .relaxed)
            }
            tally.histogram.record((clock.now - intended).microseconds)
            completed.add(1, ordering: .relaxed)
        }
        return tally
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
