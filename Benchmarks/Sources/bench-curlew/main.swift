// The Curlew engine, driven directly: C workers in a task group, each looping execute().
//
//   --mode executor  thread loop(s); worker i prefers client.executors[i % count], so request
//                    tasks run on a loop thread (resume -> next submit inline)
//   --mode plain     thread loop(s); ordinary tasks on the global cooperative pool
//   --mode dispatch  the Dispatch event loop; worker i prefers client.executors[i % count], the loops' serial
//                    queues, as in executor mode
//   --mode dispatch-plain  the Dispatch event loop; ordinary tasks
//   --loop-driver socket-action  the thread loop on epoll and curl_multi_socket_action (executor and plain modes)
//   --pool-metrics-every MS  a metrics backend (swift-prometheus) and CurlewMetrics' PoolMetricsReporter publishing
//                    the pool every MS milliseconds during the run: S1 with and without a metrics backend
import ArgumentParser
import BenchSupport
import CurlewEngine
import CurlewMetrics
import HTTPTypes
import Prometheus

enum Mode: String, ExpressibleByArgument, CaseIterable {
    case executor
    case plain
    case dispatch
    case dispatchPlain = "dispatch-plain"
}

enum LoopDriver: String, ExpressibleByArgument, CaseIterable {
    case poll
    case socketAction = "socket-action"
}

struct CurlewOptions: ParsableArguments {
    @OptionGroup var common: BenchOptions

    @Option(help: "executor | plain | dispatch | dispatch-plain")
    var mode: Mode = .executor

    @Option(help: "Number of event loops")
    var loops: Int = 1

    @Option(name: .customLong("loop-driver"), help: "poll | socket-action (the thread loop's way of driving libcurl)")
    var loopDriver: LoopDriver = .poll

    @Option(
        name: .customLong("pool-metrics-every"),
        help: "Publish the pool statistics to a Prometheus registry every this many milliseconds (0: no backend)")
    var poolMetricsEveryMilliseconds: Int = 0
}

let options = CurlewOptions.parseOrExit()
let mode = options.mode
let concurrency = options.common.concurrency
let budget = RequestBudget(total: options.common.requests)
let failures = FailureLog()

var configuration = CurlewClient.Configuration()
configuration.loopCount = max(1, options.loops)
configuration.eventLoop =
    mode == .dispatch || mode == .dispatchPlain
    ? .dispatch : options.loopDriver == .socketAction ? .thread(driver: .socketAction) : .thread
configuration.httpVersion = options.common.http2 ? .http2 : .http1_1
// As `curlew bench` does: a connection per worker (the default of 256 per host would queue the rest inside
// libcurl), and a cache as large (libcurl 7.88 counts busy connections against it).
configuration.maxConnectionsPerHost = max(concurrency, 256)
configuration.maxCachedConnectionsPerLoop = max(concurrency, configuration.maxCachedConnectionsPerLoop)
configuration.tls.caFile = options.common.cafile

let client = CurlewClient(configuration: configuration)
let request: CurlewRequest
do {
    request = try CurlewRequest(method: .get, url: options.common.url)
} catch {
    printError("bench-curlew: bad request: \(error)")
    exitProcess(2)
}
let executors = client.executors
if (mode == .executor || mode == .dispatch) && executors.isEmpty {
    printError("bench-curlew: --mode \(mode.rawValue) needs the loops' executors, but client.executors is empty")
    exitProcess(2)
}

@Sendable func work() async -> WorkerTally {
    await WorkerTally.run(budget: budget, failures: failures) {
        let response = try await client.execute(request)
        return (response.status.code, response.body.count)
    }
}

let registry = PrometheusCollectorRegistry()
let reporting: Task<Void, any Error>? =
    options.poolMetricsEveryMilliseconds > 0
    ? Task {
        let reporter = PoolMetricsReporter(client: client, factory: PrometheusMetricsFactory(registry: registry))
        try await reporter.run(every: .milliseconds(options.poolMetricsEveryMilliseconds))
    } : nil

let start = ContinuousClock.now
let tally = await withTaskGroup(of: WorkerTally.self) { group in
    for index in 0..<concurrency {
        switch mode {
        case .executor, .dispatch:
            group.addTask(executorPreference: executors[index % executors.count]) { await work() }
        case .plain, .dispatchPlain:
            group.addTask { await work() }
        }
    }
    return await group.total()
}
let elapsed = seconds(since: start)
if let reporting {
    reporting.cancel()
    _ = await reporting.result
    printError("bench-curlew: pool metrics exposition of \(registry.emitToString().utf8.count) bytes")
}

await client.shutdown()
let name: String
switch mode {
case .executor: name = "curlew-engine"
case .plain: name = "curlew-engine-plain"
case .dispatch: name = "curlew-dispatch"
case .dispatchPlain: name = "curlew-dispatch-plain"
}
finish(client: name, tally: tally, seconds: elapsed)
