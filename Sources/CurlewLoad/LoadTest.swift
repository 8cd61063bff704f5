public import CurlewEngine
public import CurlewSharding
import Synchronization

/// A load test that cannot start: a plan that asks for nothing (no requests, no connections), or a run started
/// twice. The message says what to change.
public struct LoadTestError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, in words.
    public let description: String

    package init(_ description: String) {
        self.description = description
    }
}

/// How much load a test sends and when: the length of the run and its model.
///
/// Closed model (``requests(_:)``, ``duration(_:)``, stages in connections): each connection sends its next request
/// as soon as the last one ended, so a slow server slows the load down. Open model (``rate(perSecond:for:)``,
/// ``rate(perSecond:requests:)``, stages in requests per second): requests are due at fixed times and latency
/// counts from each request's intended send time, so a stalled server shows in the percentiles instead of hiding
/// (no coordinated omission).
public struct LoadShape: Sendable, Equatable {
    /// Stages that could not be read; the message names the stage and the accepted grammar.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        /// What is wrong, and the grammar of stages.
        public let description: String
    }

    package let stop: BenchPlan.Stop
    package let arrivals: ArrivalSchedule?
    package let concurrency: ConcurrencySchedule?
    /// The constant rate of ``rate(perSecond:for:)`` and ``rate(perSecond:requests:)``.
    package let rate: Double?

    private init(
        stop: BenchPlan.Stop, arrivals: ArrivalSchedule? = nil, concurrency: ConcurrencySchedule? = nil,
        rate: Double? = nil
    ) {
        self.stop = stop
        self.arrivals = arrivals
        self.concurrency = concurrency
        self.rate = rate
    }

    /// Exactly `count` requests, each connection sending as fast as the server answers (closed model).
    public static func requests(_ count: Int) -> LoadShape { LoadShape(stop: .count(count)) }

    /// As many requests as the connections get answered in `duration` (closed model).
    public static func duration(_ duration: Duration) -> LoadShape { LoadShape(stop: .duration(duration)) }

    /// `rate` requests per second in total for `duration`, on a fixed schedule (open model). The plan's
    /// connections cap the requests in flight.
    public static func rate(perSecond rate: Double, for duration: Duration) -> LoadShape {
        LoadShape(stop: .duration(duration), arrivals: ArrivalSchedule(constantRate: rate), rate: rate)
    }

    /// Exactly `count` requests at `rate` per second in total, on a fixed schedule (open model).
    public static func rate(perSecond rate: Double, requests count: Int) -> LoadShape {
        LoadShape(stop: .count(count), arrivals: ArrivalSchedule(constantRate: rate), rate: rate)
    }

    /// Stages that ramp linearly from the previous stage's level (the first from 0) to their own:
    /// `30s:100rps,2m:500rps,30s:0rps` (open model, requests per second) or `1m:16c,1m:256c` (closed model,
    /// connections). The run ends with the last stage.
    ///
    /// - Throws: ``ParseError`` for a stage that is not `DURATION:LEVEL`, mixed units, stages that last no time or
    ///   1e9 s (31 years) or more, 0 connections throughout, or rates that plan no request (`2s:0rps`).
    public init(stages: String) throws(ParseError) {
        let parsed: BenchStages
        do {
            parsed = try BenchStages.parse(stages)
        } catch {
            throw ParseError(description: error.description)
        }
        self.init(parsed)
    }

    package init(_ stages: BenchStages) {
        switch stages {
        case .arrivals(let schedule): self.init(stop: .schedule, arrivals: schedule)
        case .concurrency(let schedule):
            // `parse` keeps stages under 1e9 s (1e18 ns); saturating all the same, as `Int64(_:)` of a larger
            // double traps.
            let nanoseconds = schedule.totalSeconds * 1e9
            self.init(
                stop: .duration(.nanoseconds(nanoseconds < 0x1p63 ? Int64(nanoseconds) : .max)), concurrency: schedule)
        }
    }

    /// Whether requests are due at fixed times (open model), so latency counts from each request's intended send
    /// time rather than from when it was sent.
    public var isOpenModel: Bool { arrivals != nil }
}

/// What a load test sends, how much and what it must meet.
public struct LoadPlan: Sendable {
    /// The requests to send; with several, ``order`` picks one for each request of the run. A ``template``
    /// replaces them.
    public var requests: [CurlewRequest]
    /// Requests made anew for each request of the run, with placeholders filled from data rows and generators.
    /// With ``LoadDataRows/once`` the run ends when the rows run out (or earlier, at its count or duration).
    public var template: LoadRequestTemplate?
    /// Which of ``requests`` each request of the run sends.
    public var order: LoadTargetOrder = .roundRobin
    /// How much load, and when.
    public var shape: LoadShape
    /// Requests in flight at most (one per connection), over every shard; a shard's share is at most
    /// ``maximumConnections``. Stages in connections set their own. In the open model a request due while every
    /// connection is busy is sent as one frees, and counted (``LoadSummary/lateRequests``).
    public var connections: Int = 16

    /// The most connections one process of a load test opens (its shard's share of ``connections``), and the
    /// highest level stages in connections may reach: the client's pool, the runner's workers and their share per
    /// loop are sized from a process's connections, and past Int's range that arithmetic overflowed.
    public static let maximumConnections = 100_000
    /// Rules the summary evaluates; ``LoadSummary/passed`` is false when one fails. A rule on ``checks`` (`checks`,
    /// `check2`) needs the checks it measures, and one on late requests (`late<1%`) an open-model ``shape``.
    public var thresholds: [LoadThreshold] = []
    /// Assertions on each response, counted apart from transport failures (at most 64). A check on the body makes
    /// the run read bodies, each up to ``checkBodyLimit`` bytes (a larger one fails as
    /// ``CurlewError/Code/bodyTooLarge``); without one, bodies are discarded.
    public var checks: [LoadCheck] = []
    /// The largest body a body check reads, in bytes.
    public var checkBodyLimit: Int = LoadPlan.defaultCheckBodyLimit
    /// 1 MiB: JSON API responses fit; a load test of large downloads has no use for body checks.
    public static let defaultCheckBodyLimit = 1 << 20
    /// This process's part of a run shared by several processes: it sends every `count`-th request of the whole
    /// run and runs its share of the connections.
    public var shard: ShardAssignment = .whole
    /// How often ``LoadTest/progress`` reports an interval; nil reports none (and samples nothing).
    public var progressInterval: Duration? = .seconds(1)

    /// A plan sending `requests` with the load of `shape`.
    public init(requests: [CurlewRequest], shape: LoadShape) {
        self.requests = requests
        self.shape = shape
    }

    /// A plan sending requests made from `template` with the load of `shape`.
    public init(template: LoadRequestTemplate, shape: LoadShape) {
        // `requests` holds the first request (a valid one: the template filled every row when it was made) for
        // the summary's method and URL.
        let first: CurlewRequest? = if case .success(let request) = template.request(ticket: 0) { request } else { nil }
        self.init(requests: first.map { [$0] } ?? [], shape: shape)
        self.template = template
    }

    /// A plan sending `GET url` with the load of `shape`.
    ///
    /// - Throws: ``LoadTestError`` when `url` is not an http or https URL.
    public init(target url: String, shape: LoadShape) throws(LoadTestError) {
        let request: CurlewRequest
        do {
            request = try CurlewRequest(url: url)
        } catch let error as CurlewError {
            throw LoadTestError("cannot send to \(URLRedaction.messages.naming(url)): \(error.detail)")
        } catch {
            throw LoadTestError("cannot send to \(URLRedaction.messages.naming(url)): \(error)")
        }
        self.init(requests: [request], shape: shape)
    }

    /// The connections this process opens: its shard's share of ``connections`` or of the highest level of
    /// stages in connections.
    public var connectionsThisProcess: Int {
        shard.share(of: shape.concurrency?.maxConcurrency ?? connections)
    }

    /// `configuration` with room for this plan's connections: a load test whose client queues requests for a
    /// connection measures the queue.
    public func clientConfiguration(
        _ configuration: CurlewClient.Configuration = CurlewClient.Configuration()
    ) -> CurlewClient.Configuration {
        var configuration = configuration
        let workers = connectionsThisProcess
        configuration.maxConnectionsPerHost = workers
        // libcurl 7.88 counts busy connections against its cache size too: a cache smaller than the connections in
        // flight closes one after nearly every request (at -c 1000, 29,444 of 30,000 requests opened a connection).
        configuration.maxCachedConnectionsPerLoop = max(workers, configuration.maxCachedConnectionsPerLoop)
        return configuration
    }

    /// The runner's plan for this process, or why there is none.
    package func runnerPlan() throws(LoadTestError) -> BenchPlan {
        guard !requests.isEmpty else { throw LoadTestError("a load test needs at least one request") }
        if shape.concurrency == nil, connections < 1 { throw LoadTestError("connections must be at least 1") }
        if let error = Self.connectionShareError(
            connections: shape.concurrency?.maxConcurrency ?? connections, shard: shard)
        {
            throw LoadTestError(error.description)
        }
        if let rate = shape.rate, !(rate > 0 && rate.isFinite) {
            throw LoadTestError("the rate must be a positive number of requests per second")
        }
        switch shape.stop {
        case .count(let count) where count < 1: throw LoadTestError("the request count must be at least 1")
        case .duration(let duration) where duration <= .zero: throw LoadTestError("the duration must be longer than 0")
        default: break
        }
        if case .count(let count) = shape.stop, let error = Self.requestShareError(requests: count, shard: shard) {
            throw LoadTestError(error.description)
        }
        let workers = connectionsThisProcess
        if checks.count > 64 { throw LoadTestError("at most 64 checks, not \(checks.count)") }
        for threshold in thresholds {
            if let reason = threshold.missingCheck(among: checks.count)
                ?? threshold.missingSchedule(openModel: shape.isOpenModel)
            {
                throw LoadTestError("threshold \(threshold.text.debugDescription): \(reason)")
            }
        }
        if checkBodyLimit < 1 { throw LoadTestError("the check body limit must be at least 1 byte") }
        var requests = requests
        var template = template
        if checks.contains(where: \.needsBody) {
            for index in requests.indices {
                requests[index].maxResponseBodySize = min(requests[index].maxResponseBodySize ?? .max, checkBodyLimit)
            }
            if var bounded = template {
                bounded.maxResponseBodySize = min(bounded.maxResponseBodySize ?? .max, checkBodyLimit)
                template = bounded
            }
        }
        let stop: BenchPlan.Stop =
            if case .count(let count) = shape.stop { .count(shard.share(of: count)) } else { shape.stop }
        var plan = BenchPlan(
            targets: requests, targetOrder: order, connections: workers, stop: stop, arrivals: shape.arrivals,
            concurrency: shape.concurrency, rate: shape.rate)
        plan.shard = shard
        plan.checks = checks
        if let template, let made = template.requestsMadeUpFront() {
            // Each data row's request made once: the run sends them as a targets file's, by request number, on
            // the engine's repeated transfers (back to back, no task switch per request), so a template costs
            // what a fixed request does.
            plan = BenchPlan(
                targets: made, targetOrder: .roundRobin, connections: workers, stop: stop, arrivals: shape.arrivals,
                concurrency: shape.concurrency, rate: shape.rate)
            plan.shard = shard
            plan.checks = checks
            plan.countsEachTarget = false
            plan.runRequestLimit = template.rowLimit
        } else {
            plan.template = template
        }
        return plan
    }
}

/// A share of a load test that one process cannot take: past ``LoadPlan/maximumConnections``, or none of the run's
/// connections or requests. The rule is ``LoadPlan``'s; `curlew bench` names its options in its own words.
package enum LoadShareError: Error, Equatable, CustomStringConvertible {
    /// This process's share of the connections, past ``LoadPlan/maximumConnections``.
    case tooManyConnections(share: Int)
    /// The run's connections leave a shard of `shards` without one.
    case noConnections(connections: Int, shards: Int)
    /// The run's requests leave a shard of `shards` without one: it would send nothing and fail its thresholds for
    /// want of data.
    case noRequests(requests: Int, shards: Int)

    package var description: String {
        switch self {
        case .tooManyConnections(let share):
            "\(share) connections in one process: at most \(LoadPlan.maximumConnections) (shard the run)"
        case .noConnections(let connections, let shards):
            "\(connections) connections cannot be shared by \(shards) shards: give each at least one"
        case .noRequests(let requests, let shards):
            "\(requests) requests cannot be shared by \(shards) shards: give each at least one"
        }
    }
}

extension LoadPlan {
    /// Why one process cannot open `shard`'s share of `connections` (the run's, or the highest level of stages in
    /// connections), or nil: a share past ``maximumConnections``, or none.
    package static func connectionShareError(connections: Int, shard: ShardAssignment) -> LoadShareError? {
        let share = shard.share(of: connections)
        if share > maximumConnections { return .tooManyConnections(share: share) }
        if share == 0 { return .noConnections(connections: connections, shards: shard.count) }
        return nil
    }

    /// Why `shard`'s share of a run of `requests` requests is none, or nil.
    package static func requestShareError(requests: Int, shard: ShardAssignment) -> LoadShareError? {
        shard.share(of: requests) == 0 ? .noRequests(requests: requests, shards: shard.count) : nil
    }
}

/// A load test: sends a plan's requests with a client and sums up what came back.
///
/// ```swift
/// let plan = try LoadPlan(target: "http://127.0.0.1:8080/", shape: .rate(perSecond: 500, for: .seconds(10)))
/// let client = CurlewClient(configuration: plan.clientConfiguration())
/// let load = try LoadTest(plan, client: client)
/// let summary = try await load.run()
/// ```
///
/// Bodies are counted, never kept. Each connection is a worker with at most one request in flight; the workers of
/// an event loop share one latency histogram, so the run adds no work per request beyond its own counting.
public final class LoadTest: Sendable {
    package let plan: LoadPlan
    /// The runner's plan: this process's share of the run.
    package let runnerPlan: BenchPlan
    package let runner: BenchRunner
    private let started = Atomic<Bool>(false)

    /// A load test of `plan` with `client`, whose connections per host should be at least the plan's
    /// (``LoadPlan/clientConfiguration(_:)``).
    ///
    /// - Throws: ``LoadTestError`` when the plan asks for nothing to send, or has a threshold on a check it does
    ///   not have (`checks` without checks, `check2` with one) or on late requests without a rate (`late`).
    public init(_ plan: LoadPlan, client: CurlewClient) throws(LoadTestError) {
        self.plan = plan
        self.runnerPlan = try plan.runnerPlan()
        self.runner = BenchRunner(client: client, plan: runnerPlan)
    }

    /// Intervals of the run as it goes on, one per ``LoadPlan/progressInterval``; the sequence ends when the run
    /// does. A consumer slower than the interval sees only the newest interval. Each access is a sequence of its
    /// own; with no progress interval, it ends at once.
    public var progress: AsyncStream<LoadProgress> {
        guard let interval = plan.progressInterval else { return AsyncStream { $0.finish() } }
        return runner.progress(every: interval) { LoadProgress($0) }
    }

    /// Sends the plan's requests and returns the summary once every request in flight has finished.
    ///
    /// - Throws: ``LoadTestError`` when the test has already run: a load test runs once.
    public func run() async throws(LoadTestError) -> LoadSummary {
        guard !started.exchange(true, ordering: .relaxed) else { throw LoadTestError("a load test runs once") }
        let result = await runner.run()
        return LoadSummary(result, plan: plan, stopped: stopRequested.load(ordering: .relaxed))
    }

    private let stopRequested = Atomic<Bool>(false)

    /// Stops sending new requests; those in flight finish and are counted, and ``run()`` returns a summary marked
    /// ``LoadSummary/stopped``.
    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        runner.requestStop()
    }
}
