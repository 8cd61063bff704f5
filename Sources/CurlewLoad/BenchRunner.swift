package import CurlewEngine
package import CurlewSharding
import Foundation
package import Histogram
package import Synchronization

/// Latencies in microseconds, 3 significant digits, growing its range as needed.
package typealias LatencyHistogram = Histogram<UInt64>

package struct BenchPlan: Sendable {
    package enum Stop: Sendable, Equatable {
        /// Exactly this many requests.
        case count(Int)
        /// No request scheduled (or, without a schedule, started) after this long.
        case duration(Duration)
        /// When the `--stages` arrival schedule has sent its last request.
        case schedule
    }

    /// What to send: one request, or a targets file's requests (picked per request by `targetOrder`).
    package let targets: [CurlewRequest]
    package let targetOrder: LoadTargetOrder
    /// Workers, each with at most one request in flight.
    package let connections: Int
    package let stop: Stop
    /// Open model (`--rate`, `--stages …rps`): when each request is due; nil sends the next request as soon as a
    /// worker is free.
    package let arrivals: ArrivalSchedule?
    /// Closed model (`--stages …c`): how many workers may send at each moment.
    package let concurrency: ConcurrencySchedule?
    /// `--rate`, for the summary.
    package let rate: Double?
    /// The part of the run this process does. Request numbers, worker numbers and therefore target choice, intended
    /// send times and closed-model levels are the whole run's: this shard takes every `count`-th of them.
    package var shard: ShardAssignment = .whole
    /// Assertions on each response (at most 64: their results travel as one bit mask per response).
    package var checks: [LoadCheck] = []
    /// Requests made anew for each ticket from a template (`--data`, placeholders); nil sends `targets`.
    package var template: LoadRequestTemplate?
    /// Whether the summary counts each target apart (a targets file's). False when `targets` are a template's
    /// requests made up front, one per data row: those are one request, as a template is.
    package var countsEachTarget = true
    /// The whole run's requests end at this number (a template's rows used once, made up front); nil: no limit
    /// beyond `stop`.
    package var runRequestLimit: Int?

    /// The number of targets the tallies count apart: 1 when they are not counted apart.
    package var countedTargets: Int { countsEachTarget ? targets.count : 1 }

    /// Whether latency counts from each request's intended send time rather than from its actual one.
    package var latencyFromIntendedTime: Bool { arrivals != nil }

    package init(
        targets: [CurlewRequest], targetOrder: LoadTargetOrder, connections: Int, stop: Stop,
        arrivals: ArrivalSchedule?, concurrency: ConcurrencySchedule?, rate: Double?
    ) {
        self.targets = targets
        self.targetOrder = targetOrder
        self.connections = connections
        self.stop = stop
        self.arrivals = arrivals
        self.concurrency = concurrency
        self.rate = rate
    }
}

/// What the workers of one event loop saw, added up at the end.
///
/// One per loop rather than one per worker: a histogram with 3 significant digits is about 140 KiB once it
/// covers a minute, and growing 64 small ones value by value cost more CPU than the requests' own bookkeeping.
package struct BenchTally: Sendable {
    package var histogram: LatencyHistogram = emptyHistogram()
    package var succeeded = 0
    package var failures: [String: Int] = [:]
    /// Indexed by status code (100...999): an array add per response instead of a dictionary update.
    package var statusCounts = [Int](repeating: 0, count: 1000)
    package var bytesSent: Int64 = 0
    package var bytesReceived: Int64 = 0
    package var connectionsOpened = 0
    /// Requests the engine sent once more on a fresh connection because the pooled one was dead or dirty.
    package var freshConnectionRetries = 0
    /// Requests and failures per target, indexed like the plan's targets; empty with a single target (whose counts
    /// are the totals), so the default run does no per-target work.
    package var targetRequests: [Int] = []
    package var targetFailures: [Int] = []
    /// Responses the checks were evaluated on (transport failures have none), and how many passed each check,
    /// indexed like the plan's checks; empty without checks.
    package var checkedResponses = 0
    package var checkPasses: [Int] = []
    /// Open model: requests sent after their scheduled time because every connection was busy then (the generator,
    /// not the server, held them back; their latency still counts from the schedule), and the most any of them was
    /// late by, in microseconds.
    package var lateRequests = 0
    package var maxLatenessMicroseconds: UInt64 = 0

    package init(targetCount: Int = 1) {
        if targetCount > 1 {
            targetRequests = [Int](repeating: 0, count: targetCount)
            targetFailures = targetRequests
        }
    }

    /// Sized for latencies up to a minute up front; slower requests still grow it.
    package static func emptyHistogram() -> LatencyHistogram {
        var histogram = LatencyHistogram(
            lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        histogram.autoResize = true
        return histogram
    }

    package var requests: Int { Int(histogram.totalCount) }
    package var failed: Int { requests - succeeded }

    package mutating func add(_ other: BenchTally) {
        histogram.add(other.histogram)
        succeeded += other.succeeded
        failures.merge(other.failures, uniquingKeysWith: +)
        for code in statusCounts.indices { statusCounts[code] += other.statusCounts[code] }
        bytesSent += other.bytesSent
        bytesReceived += other.bytesReceived
        connectionsOpened += other.connectionsOpened
        freshConnectionRetries += other.freshConnectionRetries
        checkedResponses += other.checkedResponses
        lateRequests += other.lateRequests
        maxLatenessMicroseconds = max(maxLatenessMicroseconds, other.maxLatenessMicroseconds)
        if checkPasses.count < other.checkPasses.count {
            checkPasses += [Int](repeating: 0, count: other.checkPasses.count - checkPasses.count)
        }
        for index in other.checkPasses.indices { checkPasses[index] += other.checkPasses[index] }
        if targetRequests.isEmpty {
            targetRequests = other.targetRequests
            targetFailures = other.targetFailures
            return
        }
        for index in targetRequests.indices where index < other.targetRequests.count {
            targetRequests[index] += other.targetRequests[index]
            targetFailures[index] += other.targetFailures[index]
        }
    }

    /// What `self` counted beyond `previous`, where `self` is `previous` plus more requests (two snapshots of one
    /// run): the counts of the time between them, for intervals and live metrics.
    package func subtracting(_ previous: BenchTally) -> BenchTally {
        func before(_ counts: [Int], _ index: Int) -> Int { counts.indices.contains(index) ? counts[index] : 0 }
        var delta = BenchTally()
        delta.histogram = BenchIntervalSampler.difference(histogram, minus: previous.histogram)
        delta.succeeded = succeeded - previous.succeeded
        for (kind, count) in failures where count != previous.failures[kind, default: 0] {
            delta.failures[kind] = count - previous.failures[kind, default: 0]
        }
        for code in statusCounts.indices { delta.statusCounts[code] = statusCounts[code] - previous.statusCounts[code] }
        delta.bytesSent = bytesSent - previous.bytesSent
        delta.bytesReceived = bytesReceived - previous.bytesReceived
        delta.connectionsOpened = connectionsOpened - previous.connectionsOpened
        delta.freshConnectionRetries = freshConnectionRetries - previous.freshConnectionRetries
        delta.checkedResponses = checkedResponses - previous.checkedResponses
        delta.lateRequests = lateRequests - previous.lateRequests
        // The most since the start: a maximum does not subtract.
        delta.maxLatenessMicroseconds = maxLatenessMicroseconds
        delta.checkPasses = checkPasses.indices.map { checkPasses[$0] - before(previous.checkPasses, $0) }
        delta.targetRequests = targetRequests.indices.map { targetRequests[$0] - before(previous.targetRequests, $0) }
        delta.targetFailures = targetFailures.indices.map { targetFailures[$0] - before(previous.targetFailures, $0) }
        return delta
    }

    mutating func record(_ response: RepeatedResponse) {
        statusCounts[min(max(response.status, 0), 999)] += 1
        bytesSent += response.bytesSent
        bytesReceived += response.bytesReceived + Int64(response.headerBytesReceived)
        if !response.reusedConnection { connectionsOpened += 1 }
        freshConnectionRetries += response.freshConnectionRetries
        if response.status < 400 {
            succeeded += 1
        } else {
            failures["http\(response.status / 100)xx", default: 0] += 1
        }
    }

    /// Counts one request's outcome (and its target's, when the run has several); returns whether it failed.
    @discardableResult
    mutating func record(_ outcome: Result<RepeatedResponse, any Error>, target: Int?) -> Bool {
        let requestFailed: Bool
        switch outcome {
        case .success(let response):
            record(response)
            requestFailed = response.status >= 400
        case .failure(let error):
            record(error)
            requestFailed = true
        }
        if let target {
            targetRequests[target] += 1
            if requestFailed { targetFailures[target] += 1 }
        }
        return requestFailed
    }

    /// Counts one response's check results: bit `i` of `passed` set when check `i` of `count` held.
    mutating func recordChecks(passed: UInt64, count: Int) {
        if checkPasses.count < count { checkPasses += [Int](repeating: 0, count: count - checkPasses.count) }
        checkedResponses += 1
        var remaining = passed
        while remaining != 0 {
            checkPasses[remaining.trailingZeroBitCount] += 1
            remaining &= remaining - 1
        }
    }

    /// Counts one request sent `microseconds` after its scheduled time for want of a free connection.
    mutating func recordLate(microseconds: UInt64) {
        lateRequests += 1
        maxLatenessMicroseconds = max(maxLatenessMicroseconds, microseconds)
    }

    mutating func record(_ error: any Error) {
        guard let error = error as? CurlewError else {
            failures["cancelled", default: 0] += 1
            return
        }
        failures[error.code.name, default: 0] += 1
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
package final class SharedTally: Sendable {
    package let state: Mutex<BenchTally>

    init(targetCount: Int) {
        state = Mutex(BenchTally(targetCount: targetCount))
    }

    /// A copy of the counts so far (copy-on-write: the loop's next record pays for the copy, once per sample).
    package var snapshot: BenchTally { state.withLock { $0 } }
}

package struct BenchResult: Sendable {
    package var tally: BenchTally
    package var elapsed: Duration
    package var histogram: LatencyHistogram { tally.histogram }

    package init(tally: BenchTally, elapsed: Duration) {
        self.tally = tally
        self.elapsed = elapsed
    }
}

package final class BenchRunner: Sendable {
    private let client: CurlewClient
    let plan: BenchPlan
    /// Next request number to claim: with -n, claims beyond the count stop the worker, which is what makes
    /// the number sent exact.
    private let nextTicket = Atomic<Int>(0)
    private let stopRequested = Atomic<Bool>(false)
    /// Open model: the workers that have claimed a request. Until every one has, a connection may still be free while
    /// a due request is claimed by a worker that started early, so no request is counted late.
    private let workersThatClaimed = Atomic<Int>(0)
    /// `monotonicNanoseconds()` at the start, 0 before.
    private let startNanoseconds = Atomic<UInt64>(0)
    /// Set when the run has ended: progress sequences end with it.
    private let finished = Atomic<Bool>(false)
    /// Ends each progress sequence (its continuation's `finish`).
    private let progressEnds = Mutex<[@Sendable () -> Void]>([])
    /// One per event loop, created up front so samplers can read them while the run goes on.
    package let tallies: [SharedTally]

    package init(client: CurlewClient, plan: BenchPlan) {
        self.client = client
        self.plan = plan
        self.tallies = (0..<max(client.executors.count, 1)).map { _ in SharedTally(targetCount: plan.countedTargets) }
    }

    /// Stops claiming new requests (Ctrl-C); those in flight finish and are counted.
    package func requestStop() {
        stopRequested.store(true, ordering: .relaxed)
    }

    /// The counts of every loop so far, added up.
    package func snapshot() -> BenchTally {
        var total = BenchTally(targetCount: plan.countedTargets)
        for tally in tallies { total.add(tally.snapshot) }
        return total
    }

    /// Requests claimed so far: sent, in flight, or (open model) waiting for their scheduled time; at most the run's
    /// `-n`. One relaxed load of the counter the workers claim requests from: nothing is added to their path.
    package var claimedRequests: Int {
        let claimed = nextTicket.load(ordering: .relaxed)
        if case .count(let count) = plan.stop { return min(claimed, count) }
        return claimed
    }

    /// Whether ``run()`` has returned its result: the tallies hold the run's final counts.
    package var hasFinished: Bool { finished.load(ordering: .relaxed) }

    /// Seconds since the run started (0 before).
    package var elapsedSeconds: Double {
        let start = startNanoseconds.load(ordering: .relaxed)
        return start == 0 ? 0 : Double(monotonicNanoseconds() &- start) / 1e9
    }

    package func run() async -> BenchResult {
        let clock = ContinuousClock()
        let start = clock.now
        let startNanoseconds = monotonicNanoseconds()
        self.startNanoseconds.store(startNanoseconds, ordering: .relaxed)
        let executors = client.executors
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<plan.connections {
                let tally = tallies[worker % tallies.count]
                // On the loops' own executors a finished transfer resumes its worker on the loop thread, whose next
                // request then enters libcurl without a thread hop (docs/design/0001-event-loop.md).
                let backToBack = sendsBackToBack
                if executors.isEmpty {
                    group.addTask {
                        if backToBack {
                            await self.workBackToBack(start: startNanoseconds, tally: tally)
                        } else {
                            await self.work(worker: worker, start: startNanoseconds, tally: tally)
                        }
                    }
                } else {
                    group.addTask(executorPreference: executors[worker % executors.count]) {
                        if backToBack {
                            await self.workBackToBack(start: startNanoseconds, tally: tally)
                        } else {
                            await self.work(worker: worker, start: startNanoseconds, tally: tally)
                        }
                    }
                }
            }
        }
        var total = BenchTally(targetCount: plan.countedTargets)
        for tally in tallies { tally.state.withLock { total.add($0) } }
        let elapsed = clock.now - start
        let progressEnds = progressEnds.withLock { ends in
            finished.store(true, ordering: .relaxed)
            defer { ends = [] }
            return ends
        }
        for end in progressEnds { end() }
        return BenchResult(tally: total, elapsed: elapsed)
    }

    /// Sleeps until `deadline` (monotonic nanoseconds) in slices, so Ctrl-C wakes a worker that waits for its
    /// stage. Returns false when the run is stopping.
    nonisolated(nonsending) private func sleep(until deadline: UInt64) async -> Bool {
        while true {
            let now = monotonicNanoseconds()
            guard deadline > now else { return true }
            if stopRequested.load(ordering: .relaxed) { return false }
            do { try await Task.sleep(nanoseconds: min(deadline - now, 100_000_000)) } catch { return false }
        }
    }

    /// One connection's worth of requests. The workers of a loop share its tally; they take turns on the loop's
    /// thread, so its lock is never contended there.
    nonisolated(nonsending) private func work(worker: Int, start: UInt64, tally: SharedTally) async {
        let targets = plan.targets
        let targetOrder = plan.targetOrder
        let severalTargets = targets.count > 1
        let countsTargets = severalTargets && plan.countsEachTarget
        // A template's rows used once end the run where they run out: a ticket past them is not claimed as late.
        let runRequestLimit = plan.runRequestLimit ?? plan.template?.rowLimit
        let deadline: UInt64? =
            if case .duration(let duration) = plan.stop { instant(start, after: duration) } else { nil }
        let limit: Int? = if case .count(let count) = plan.stop { count } else { nil }
        let arrivals = plan.arrivals
        let concurrency = plan.concurrency
        let shard = plan.shard
        let checks = plan.checks
        let template = plan.template
        // Bodies are read only for checks that look at them; headers are parsed once per response for all checks.
        let checksReadBody = checks.contains { $0.needsBody }
        let checksReadHeaders = checks.contains { $0.needsHeaders }
        let checksReadJSON = checks.contains { $0.needsJSON }
        // The worker's number in the whole run: a closed-model stage lets workers below its level send.
        let runWorker = shard.globalNumber(ofLocal: worker)
        // Open model: whether this worker has claimed a request before. No request is late until every worker has
        // (`workersThatClaimed`): a request due at the start, or claimed by a worker that started early while another
        // has yet to start, had a free connection.
        var claimedBefore = false
        while !stopRequested.load(ordering: .relaxed) {
            if let concurrency {
                // Closed model: wait while the stage allows fewer workers than this one's number.
                let now = monotonicNanoseconds()
                guard
                    let active = concurrency.nextActiveSeconds(worker: runWorker, atOrAfter: Double(now &- start) / 1e9)
                else { break }
                let wake = instant(start, afterSeconds: active)
                if let deadline, wake >= deadline { break }
                if wake > now {
                    guard await sleep(until: wake) else { break }
                }
            }
            let ticket = nextTicket.wrappingAdd(1, ordering: .relaxed).oldValue
            if let limit, ticket >= limit { break }
            let runTicket = shard.globalNumber(ofLocal: ticket)
            if let runRequestLimit, runTicket >= runRequestLimit { break }
            let intended: UInt64
            if let arrivals {
                // The schedule is fixed in advance: a late request keeps its intended time, so its wait for a free
                // worker counts as latency.
                guard let offset = arrivals.intendedSeconds(ofRequest: runTicket) else { break }
                intended = instant(start, afterSeconds: offset)
                if let deadline, intended >= deadline { break }
                let now = monotonicNanoseconds()
                let everyWorkerClaimed: Bool
                if claimedBefore {
                    everyWorkerClaimed = workersThatClaimed.load(ordering: .relaxed) >= plan.connections
                } else {
                    workersThatClaimed.wrappingAdd(1, ordering: .relaxed)
                    claimedBefore = true
                    everyWorkerClaimed = false
                }
                if intended > now {
                    guard await sleep(until: intended) else { break }
                } else if everyWorkerClaimed {
                    // Claimed after its time by a worker that was busy until then, once every worker has started:
                    // tickets are claimed in order by whichever worker is free, so at its scheduled time every
                    // connection was busy (-c capped the requests in flight). Counted here, off the closed model's
                    // path, and only when late.
                    let lateness = (now &- intended) / 1_000
                    tally.state.withLock { $0.recordLate(microseconds: lateness) }
                }
            } else {
                // Without a schedule a request is timed from when its worker is ready to send it, after it counted
                // and checked the last one: a check's parse of a large body is the client's time, not the server's.
                intended = monotonicNanoseconds()
                if let deadline, intended >= deadline { break }
            }
            let targetIndex =
                severalTargets ? targetOrder.targetIndex(ofRequest: runTicket, targetCount: targets.count) : 0
            var outcome: Result<CurlewResponse, any Error>
            if let template {
                // A templated request is made for its ticket: the whole run's number picks its row and `{{seq}}`.
                guard let made = template.request(ticket: runTicket) else { break }
                switch made {
                case .success(let request):
                    do {
                        outcome =
                            checksReadBody
                            ? .success(try await client.execute(request))
                            : .success(try await client.executeDiscardingBody(request))
                    } catch {
                        outcome = .failure(error)
                    }
                case .failure(let error): outcome = .failure(error)
                }
            } else {
                do {
                    // Bodies are counted, never kept: a load generator has no use for them. The request is passed
                    // straight from the array (borrowed), so choosing a target copies nothing.
                    outcome =
                        checksReadBody
                        ? .success(try await client.execute(targets[targetIndex]))
                        : .success(try await client.executeDiscardingBody(targets[targetIndex]))
                } catch {
                    outcome = .failure(error)
                }
            }
            let latency = (monotonicNanoseconds() &- intended) / 1_000
            var checksPassed: UInt64 = 0
            if !checks.isEmpty, case .success(let response) = outcome {
                let fields = checksReadHeaders ? response.headerFields : nil
                let json = checksReadJSON ? LoadCheck.document(of: response.body) : nil
                for index in checks.indices where checks[index].holds(for: response, fields: fields, json: json) {
                    checksPassed |= 1 << UInt64(index)
                }
            }
            tally.state.withLock { tally in
                tally.record(outcome.map(RepeatedResponse.init), target: countsTargets ? targetIndex : nil)
                if !checks.isEmpty, case .success = outcome {
                    tally.recordChecks(passed: checksPassed, count: checks.count)
                }
                tally.histogram.record(latency)
            }
        }
    }

    /// Whether workers can hand their requests to the engine as one repeated transfer: the closed model with no
    /// stages, where each request starts as soon as the last one ended, and no checks (which read whole
    /// responses). A template's requests are made on the loop for each request number, when making one cannot
    /// fail (its URLs need no parsing once its rows were validated); otherwise each worker makes and sends them one
    /// by one, so that a request that cannot be made is counted as a failure.
    private var sendsBackToBack: Bool {
        plan.arrivals == nil && plan.concurrency == nil && plan.checks.isEmpty
            && (plan.template?.fillsWithoutParsing ?? true)
    }

    /// One connection's worth of requests sent back to back, as ``work(worker:start:tally:)`` sends them, on one
    /// repeated transfer (`CurlewClient.executeRepeatedly`): each request is counted, and the next one chosen, on
    /// the loop's thread as the last one ends, with no task switch between them.
    nonisolated(nonsending) private func workBackToBack(start: UInt64, tally: SharedTally) async {
        let chooser = BackToBackChooser(runner: self, start: start, tally: tally)
        guard !stopRequested.load(ordering: .relaxed), let first = chooser.claim(at: monotonicNanoseconds())
        else { return }
        if let template = plan.template {
            // Each request is made for its number on the loop, as the last one ends.
            await client.executeRepeatedly(
                making: { runTicket in
                    if case .success(let request) = template.request(ticket: runTicket) { request } else { nil }
                }, startingAt: first
            ) { outcome in
                chooser.requestEnded(outcome)
            }
        } else {
            await client.executeRepeatedly(plan.targets, startingAt: first) { outcome in
                chooser.requestEnded(outcome)
            }
        }
    }

    /// Claims the next ticket of the run and returns its number in the whole run, or nil when the run is over
    /// (stop, count, duration or rows reached).
    fileprivate func claimRunTicket(intendedAt intended: UInt64, start: UInt64) -> Int? {
        if stopRequested.load(ordering: .relaxed) { return nil }
        if case .duration(let duration) = plan.stop, intended >= instant(start, after: duration) { return nil }
        let ticket = nextTicket.wrappingAdd(1, ordering: .relaxed).oldValue
        if case .count(let count) = plan.stop, ticket >= count { return nil }
        let runTicket = plan.shard.globalNumber(ofLocal: ticket)
        if let limit = plan.runRequestLimit, runTicket >= limit { return nil }
        return runTicket
    }

    /// Claims the next ticket of the run and names its target, or nil when the run is over.
    fileprivate func claimTarget(intendedAt intended: UInt64, start: UInt64) -> Int? {
        guard let runTicket = claimRunTicket(intendedAt: intended, start: start) else { return nil }
        guard plan.targets.count > 1 else { return 0 }
        return plan.targetOrder.targetIndex(ofRequest: runTicket, targetCount: plan.targets.count)
    }

    /// Intervals of the run every `interval` while it goes on (progress), each transformed off the workers' path;
    /// the sequence ends when the run does, or when its consumer stops iterating.
    ///
    /// Cut from snapshots of the tallies, like ``BenchIntervalRecorder``: no work per request. A consumer slower
    /// than the interval sees only the newest intervals. When the run ends, the last interval (from the one before
    /// to the end) comes before the sequence ends, so its running totals are the run's whatever the interval and
    /// however busy the machine was: a run shorter than one interval still reports once.
    package func progress<Element: Sendable>(
        every interval: Duration, _ transform: @escaping @Sendable (BenchInterval) -> Element
    ) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(1))
        // Asked for after the run: nothing to report.
        guard !hasFinished else {
            continuation.finish()
            return stream
        }
        let sampling = Task {
            var intervals = BenchIntervalSampler(start: snapshot())
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { break }
                continuation.yield(transform(intervals.next(snapshot(), at: elapsedSeconds)))
            }
            // Cancelled by the run's end (then the tallies hold its final counts) or by the consumer (then the yield
            // goes nowhere).
            if hasFinished { continuation.yield(transform(intervals.next(snapshot(), at: elapsedSeconds))) }
            continuation.finish()
        }
        continuation.onTermination = { _ in sampling.cancel() }
        let registered = progressEnds.withLock { ends in
            guard !finished.load(ordering: .relaxed) else { return false }
            ends.append { sampling.cancel() }
            return true
        }
        // The run ended since the check above: the sampler reports its end once.
        if !registered { sampling.cancel() }
        return stream
    }
}

/// A back-to-back worker's state between its requests, touched only by the loop that runs its repeated transfer (one
/// request at a time), hence `@unchecked Sendable`.
private final class BackToBackChooser: @unchecked Sendable {
    let runner: BenchRunner
    let start: UInt64
    let tally: SharedTally
    let countsTargets: Bool
    /// Whether requests are made from a template: `claim` then names the request's number in the whole run.
    let makesRequests: Bool
    /// When the request under way was meant to start: when the last one ended (one clock read per request).
    var intended: UInt64 = 0
    var target = 0

    init(runner: BenchRunner, start: UInt64, tally: SharedTally) {
        self.runner = runner
        self.start = start
        self.tally = tally
        countsTargets = runner.plan.targets.count > 1 && runner.plan.countsEachTarget
        makesRequests = runner.plan.template != nil
    }

    /// The next request: its target's index, or with a template its number in the whole run; nil when the run
    /// is over.
    func claim(at now: UInt64) -> Int? {
        intended = now
        if makesRequests { return runner.claimRunTicket(intendedAt: now, start: start) }
        guard let target = runner.claimTarget(intendedAt: now, start: start) else { return nil }
        self.target = target
        return target
    }

    /// Counts the request that ended and chooses the next one.
    func requestEnded(_ outcome: Result<RepeatedResponse, any Error>) -> Int? {
        let end = monotonicNanoseconds()
        let latency = (end &- intended) / 1_000
        let target = countsTargets ? target : nil
        tally.state.withLock { tally in
            tally.record(outcome, target: target)
            tally.histogram.record(latency)
        }
        return claim(at: end)
    }
}

/// `start` on ``monotonicNanoseconds()`` plus `seconds`, saturating at `UInt64.max`: a moment past the clock's range
/// is one the run never reaches, not a trap. At `--rate 1e-11` request 1 is due in 3,000 years, which the
/// conversion to nanoseconds trapped on as the second worker claimed it.
private func instant(_ start: UInt64, afterSeconds seconds: Double) -> UInt64 {
    let nanoseconds = seconds * 1e9
    // 2^64 is the first double past `UInt64.max`; NaN fails the comparison too.
    guard nanoseconds < 0x1p64 else { return .max }
    return instant(start, afterNanoseconds: UInt64(max(nanoseconds, 0)))
}

/// `start` plus `duration`, saturating like ``instant(_:afterSeconds:)``: a plan's duration may be any `Duration`.
private func instant(_ start: UInt64, after duration: Duration) -> UInt64 {
    instant(start, afterNanoseconds: duration.nanoseconds)
}

private func instant(_ start: UInt64, afterNanoseconds nanoseconds: UInt64) -> UInt64 {
    let (sum, overflow) = start.addingReportingOverflow(nanoseconds)
    return overflow ? .max : sum
}
