import ArgumentParser
import CurlewEngine
import CurlewLoad
import CurlewLoadPrometheus
import CurlewLoopbackServer
import CurlewSharding
import Foundation
import HTTPTypes

#if OTLP
import CurlewLoadOTLP
import Logging
import ServiceLifecycle
#endif

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Load-test a URL and report throughput, latency percentiles and errors.",
        discussion: """
            Without a URL or --targets, starts an embedded loopback server and loads its /small route.

            Load: by default each of the -c workers sends its next request as soon as the last one ended. With --rate, \
            or --stages in requests per second (an open model), requests are due at fixed times and latency counts \
            from each request's intended send time, so a stalled server shows up in the percentiles instead of \
            slowing the load down (no coordinated omission). --stages in connections (16c) is a closed model: the \
            number of workers sending follows the stages.

            A request fails when it gets no response (connection refused, timeout, TLS error …) or a response with \
            a status of 400 or more. Failures are counted by kind in the summary.

            Exit status: 0 when the run finished and every threshold passed; 1 when the command could not do its \
            work (unreadable or unwritable file); 64 for bad arguments (nothing was sent); 98 when requests were \
            sent and not one succeeded, whatever the thresholds say; 99 when a --threshold failed; 130 when \
            interrupted with Ctrl-C or SIGTERM (a scheduler stopping the job): the summary and --output-dir files \
            cover what finished; thresholds are printed but not conclusive.
            """
    )

    @Argument(
        help: "The URL to load (http or https). Omit it (and --targets) to run against the embedded loopback server.")
    var url: String?

    @Option(
        name: .customLong("targets"),
        help: ArgumentHelp(
            "A file of requests to send instead of one URL: JSON lines or vegeta's text format.",
            discussion: """
                JSON lines: one object per line with "url" and optionally "method", "headers" (an object of \
                strings), "body" (text) or "bodyFile" (a path, relative to the targets file). Text format: \
                'METHOD URL', then 'Name: value' header lines, then '@path' for a body file, and a blank line \
                between targets. -H headers are added to every target.
                """,
            valueName: "file"))
    var targetsFile: String?

    @Option(
        name: .customLong("targets-order"), help: "The order targets are sent in; random is reproducible with --seed.")
    var targetsOrder: TargetsOrderArgument = .roundRobin

    @Option(help: "The seed of --targets-order random (default 1), or of shuffling --data rows (default: in order).")
    var seed: UInt64?

    @Option(
        name: .customLong("data"),
        help: ArgumentHelp(
            "A data file whose rows fill the {{column}} placeholders of the URL, -H values and --body-file.",
            discussion: """
                CSV with a header row naming the columns (RFC 4180 quoting), or JSON lines (.jsonl, .ndjson: one \
                object per line). Request k uses row k (shuffled with --seed). Generators need no data: {{seq}} \
                (the request's number in the run), {{uuid}}, {{randInt MIN MAX}}. Column values are percent-encoded \
                in the URL.
                """),
        completion: .file())
    var dataFile: String?

    @Option(
        name: .customLong("data-rows"),
        help: "Use each --data row once (the run ends when they run out) or cycle through them.")
    var dataRows: DataRowsArgument = .cycle

    @Option(name: [.customShort("c"), .long], help: "Requests in flight at any time (default 16).")
    var connections: Int?

    /// -c, or its default; closed-model stages set their own.
    private var inFlight: Int { connections ?? 16 }

    @Option(name: [.customShort("n"), .long], help: "Send exactly this many requests.")
    var requests: Int?

    @Option(name: [.customShort("d"), .long], help: "Run for this long, e.g. 10s, 500ms, 2m (default 10s unless -n).")
    var duration: DurationArgument?

    @Option(name: [.customShort("m"), .long], help: "The request method.")
    var method: String = "GET"

    @Option(name: [.customShort("H"), .customLong("header")], help: "A request header 'Name: value' (repeatable).")
    var headers: [String] = []

    @Option(name: .customLong("body-file"), help: "Send this file's contents as every request's body.")
    var bodyFile: String?

    @Flag(name: .customLong("http2"), help: "HTTP/2 over TLS (ALPN); without it requests use HTTP/1.1.")
    var http2 = false

    @Flag(name: .customLong("h2c"), help: "Cleartext HTTP/2 with prior knowledge.")
    var h2c = false

    @Option(help: "Fail a request that takes longer than this (e.g. 2s).")
    var timeout: DurationArgument?

    @Option(help: "Send this many requests per second in total, on a fixed schedule.")
    var rate: Double?

    @Option(
        help: ArgumentHelp(
            "A load shape: 30s:100rps,2m:500rps,30s:0rps (open model) or 1m:16c,1m:256c (closed model).",
            discussion: """
                Each stage ramps linearly from the previous stage's level (the first from 0) to its own over its \
                duration; write a level twice for a plateau (5s:100rps,1m:100rps). The run ends with the last \
                stage. With rates, -c caps the requests in flight; with connections, the highest level is the \
                number of connections.
                """,
            valueName: "stages"))
    var stages: String?

    @Option(
        name: .customLong("threshold"),
        help: ArgumentHelp(
            "A pass/fail rule, e.g. 'p99<20ms', 'errors<1%', 'rps>5000' (repeatable, or comma-separated).",
            discussion: """
                Latency: p50, p90, p99, p99.9 (any percentile), mean, max, min with a duration. Rates: errors, \
                2xx … 5xx or an exact status (503) with a percentage of all requests; with --rate or rate stages, \
                late (requests sent after their scheduled time because every connection was busy). Throughput: \
                rps. Operators <, <=, >, >=. Any failed threshold makes the exit status 99.
                """,
            valueName: "rule"))
    var thresholdTexts: [String] = []

    @Option(
        name: .customLong("check"),
        help: ArgumentHelp(
            "An assertion on every response, e.g. 'status in 200-299', 'body ~ \"ok\"' (repeatable).",
            discussion: """
                status in 200,201 (or 200-299); header NAME exists, header NAME == "v", header NAME ~ "regex"; \
                body contains "text", body ~ "regex"; json .user.id exists, json .items.0.name == "x" (a JSON \
                value). Checks are counted apart from failures: a response that fails a check still succeeded. \
                The summary shows each check's pass rate; thresholds take checks>99% (all together) and check1, \
                check2 … (numbered as given). A body check reads bodies up to --check-body-limit.
                """,
            valueName: "check"))
    var checkTexts: [String] = []

    @Option(
        name: .customLong("check-body-limit"),
        help: ArgumentHelp(
            "The largest body a body check reads, in bytes (default 1 MiB); a larger one fails as bodyTooLarge.",
            valueName: "bytes"))
    var checkBodyLimit: Int = LoadPlan.defaultCheckBodyLimit

    @Option(
        name: .customLong("hdr-log"),
        help: ArgumentHelp(
            "Write one latency HdrHistogram per --interval here (HdrHistogram interval log 1.3, microseconds).",
            valueName: "path"))
    var hdrLog: String?

    @Option(
        help: ArgumentHelp(
            "Write a self-contained HTML report here: rates, latencies and statuses over time, thresholds.",
            valueName: "path.html"))
    var report: String?

    @Option(help: "The length of the intervals of --hdr-log and --report.")
    var interval: DurationArgument = DurationArgument(.seconds(1), text: "1s")

    @Option(
        name: .customLong("prometheus"),
        help: ArgumentHelp(
            "Serve the run's counts and latencies at http://HOST:PORT/metrics for Prometheus while it runs.",
            discussion: """
                A bare PORT or :PORT listens on 127.0.0.1 only; give 0.0.0.0:PORT (or another address of this \
                host) for scrapers elsewhere. Counters of requests by outcome, failures by kind, responses by \
                status, bytes, connections and checks, a latency histogram and the requests in flight, labelled \
                shard="I/N" with --shard (give each shard on a machine a port of its own). An address that cannot \
                be bound is a usage error (64) before anything is sent.
                """,
            valueName: "[host:]port"))
    var prometheus: PrometheusAddressArgument?

    @Option(
        name: .customLong("prometheus-hold"),
        help: ArgumentHelp(
            "Keep /metrics up this long after the run, so a last scrape sees the final counts.",
            discussion:
                "Set it to at least the scrape interval. Ctrl-C or SIGTERM ends it; the exit status stays the run's.",
            valueName: "duration"))
    var prometheusHold: DurationArgument = DurationArgument(.zero, text: "0s")

    #if OTLP
    @Option(
        name: .customLong("otlp"),
        help: ArgumentHelp(
            "Push the run's counts and latencies to an OpenTelemetry collector (OTLP/HTTP) while it runs.",
            discussion: """
                http:// or https://; without a path, /v1/metrics is appended. The series of --prometheus under \
                OpenTelemetry names (curlew.bench.requests …), sent every --otlp-interval and once more after the \
                run with the final counts, with shard="I/N" under --shard. Headers (credentials), certificates and \
                compression come from the OpenTelemetry variables (OTEL_EXPORTER_OTLP_HEADERS …); an \
                OpenTelemetry variable that swift-otel would follow instead of these options (another endpoint, \
                protocol, exporter, interval or timeout) is a usage error (64). Each send gets the interval, 2 s to \
                10 s; the last may wait for one under way, and Ctrl-C gives it up. A collector that cannot be \
                reached or refuses is reported on stderr and does not change the run's exit status.
                """,
            valueName: "url"))
    var otlp: String?

    @Option(name: .customLong("otlp-interval"), help: "How often --otlp sends the metrics while the run goes.")
    var otlpInterval: DurationArgument = DurationArgument(.seconds(10), text: "10s")
    #endif

    @Flag(help: "Print the summary as one JSON object on stdout.")
    var json = false

    @Option(
        name: .customLong("histogram-out"),
        help: "Write the latency HdrHistogram (JSON, microseconds) here, for exact merging.")
    var histogramOut: String?

    @Flag(
        name: .customLong("no-keepalive"),
        help: "Open a new connection for every request and close it after the response.")
    var noKeepalive = false

    @Option(
        name: .customLong("connect-to"),
        help: ArgumentHelp(
            "Send requests for HOST:PORT to HOST2:PORT2 instead (repeatable).",
            discussion: """
                The URL's host stays in the Host header, TLS SNI and the certificate check, so a virtual host or \
                one server of several is reached without DNS. An empty HOST or PORT matches any (libcurl's \
                CURLOPT_CONNECT_TO).
                """,
            valueName: "HOST:PORT:HOST2:PORT2"))
    var connectTo: [String] = []

    @Option(help: "Event loops (threads) of the client; default one per CPU the process may use.")
    var loops: Int?

    @Option(
        name: .customLong("loop-driver"),
        help: ArgumentHelp(
            "How the loop threads drive libcurl: poll (curl_multi_poll) or socket-action (epoll and curl_multi_socket_action).",
            discussion:
                "Default: poll up to 256 connections per loop on libcurl 7.x and 64 on 8.x, socket-action beyond (docs/design/0016-libcurl-versions.md)."
        ))
    var loopDriver: String?

    @Option(
        name: .customLong("event-loop"),
        help: ArgumentHelp(
            "Which event loop drives libcurl: thread (a loop thread per loop, the default) or dispatch (a serial DispatchQueue per loop, socket-action on one epoll source).",
            discussion:
                "With dispatch the workers run on the loops' queues as their executors; --loop-driver applies to thread only."
        ))
    var eventLoopKind: String = "thread"

    @Option(
        name: .customLong("start-at"),
        help: ArgumentHelp(
            "Start the load at this wall-clock time: ISO 8601 (2026-11-24T10:00:00Z) or seconds since 1970.",
            discussion: "Shards given the same time start in the same second, so their intervals line up.",
            valueName: "time"))
    var startAt: StartTimeArgument?

    @OptionGroup(title: "Sharding") var sharding: ShardOptions

    @OptionGroup var shared: SharedOptions

    /// Connections per loop above which the default driver is socket-action, for the libcurl this process runs on
    /// (measured per version: `LibcurlVersion.socketActionDriverAboveConnectionsPerLoop`).
    static var socketActionAbovePerLoop: Int { LibcurlVersion.running.socketActionDriverAboveConnectionsPerLoop }

    /// The event loop `--event-loop` and `--loop-driver` name (for the thread loop without `--loop-driver`, the poll
    /// driver, which the run replaces by connections per loop); nil for a name it does not know.
    private var eventLoop: CurlewClient.Configuration.EventLoopKind? {
        if eventLoopKind == "dispatch" { return loopDriver == nil ? .dispatch : nil }
        guard eventLoopKind == "thread" else { return nil }
        return switch loopDriver ?? "poll" {
        case "poll": .thread
        case "socket-action": .thread(driver: .socketAction)
        default: nil
        }
    }

    /// The most event loops (threads) `--loops` starts: far past any machine's cores, and low enough that the
    /// connections per loop the driver choice multiplies by it cannot overflow.
    static let maximumLoops = 4096

    func validate() throws {
        if let connections, connections < 1 { throw ValidationError("-c/--connections must be at least 1") }
        if let requests, requests < 1 { throw ValidationError("-n/--requests must be at least 1") }
        if requests != nil && duration != nil { throw ValidationError("give -n/--requests or -d/--duration, not both") }
        if let duration, duration.duration <= .zero { throw ValidationError("-d/--duration must be longer than 0") }
        if let rate, !(rate > 0 && rate.isFinite) {
            throw ValidationError("--rate must be a positive number of requests per second")
        }
        if http2 && h2c { throw ValidationError("--http2 and --h2c exclude each other") }
        if let loops, !(1...Self.maximumLoops).contains(loops) {
            throw ValidationError("--loops must be from 1 to \(Self.maximumLoops)")
        }
        for entry in connectTo {
            do { _ = try BenchConnectTo.parse(entry) } catch { throw ValidationError(error.description) }
        }
        if url != nil && targetsFile != nil { throw ValidationError("give a URL or --targets, not both") }
        if targetsFile != nil && (bodyFile != nil || method.uppercased() != "GET") {
            throw ValidationError(
                "with --targets, each target sets its method and body (-m and --body-file apply to a single URL)")
        }
        if seed != nil && targetsOrder != .random && dataFile == nil {
            throw ValidationError("--seed applies to --targets-order random or --data")
        }
        if dataFile != nil && targetsFile != nil { throw ValidationError("--data fills a single URL: drop --targets") }
        if dataFile != nil && url == nil { throw ValidationError("--data needs a URL with {{column}} placeholders") }
        if dataRows == .once && dataFile == nil { throw ValidationError("--data-rows once needs --data") }
        if interval.duration < .milliseconds(100) { throw ValidationError("--interval must be at least 100ms") }
        if prometheusHold.duration > .zero && prometheus == nil {
            throw ValidationError("--prometheus-hold keeps --prometheus's endpoint up: give --prometheus")
        }
        #if OTLP
        if otlpInterval.duration < .milliseconds(100) {
            throw ValidationError("--otlp-interval must be at least 100ms")
        }
        #endif
        var shape: BenchStages?
        if let stages {
            if rate != nil { throw ValidationError("give --rate or --stages, not both") }
            if requests != nil || duration != nil {
                throw ValidationError("--stages sets the run's length: drop -n/-d")
            }
            do {
                shape = try BenchStages.parse(stages)
            } catch {
                throw ValidationError(error.description)
            }
            if case .concurrency = shape, connections != nil {
                throw ValidationError("--stages in connections sets the connections: drop -c")
            }
        }
        let openModel = if case .arrivals = shape { true } else { rate != nil }
        let thresholds: [LoadThreshold]
        do {
            thresholds = try parsedThresholds()
        } catch {
            throw ValidationError(error.description)
        }
        do {
            let checks = try parsedChecks()
            if checks.count > 64 { throw ValidationError("at most 64 --check, not \(checks.count)") }
            for threshold in thresholds {
                if let reason = threshold.missingCheck(among: checks.count) {
                    throw ValidationError("--threshold \(threshold.text.debugDescription): \(reason) (--check)")
                }
                if let reason = threshold.missingSchedule(openModel: openModel) {
                    throw ValidationError(
                        "--threshold \(threshold.text.debugDescription): \(reason) (--rate, or --stages in rps)")
                }
            }
        } catch let error as LoadCheck.ParseError {
            throw ValidationError(error.description)
        }
        if checkBodyLimit < 1 { throw ValidationError("--check-body-limit must be at least 1 byte") }
        if eventLoopKind != "thread" && eventLoopKind != "dispatch" {
            throw ValidationError("--event-loop must be thread or dispatch")
        }
        if eventLoop == nil {
            throw ValidationError(
                eventLoopKind == "dispatch"
                    ? "--loop-driver applies to --event-loop thread" : "--loop-driver must be poll or socket-action")
        }
        if sharding.outputDirectory != nil && (hdrLog != nil || histogramOut != nil) {
            throw ValidationError(
                "--output-dir writes the histogram and the interval log itself: drop --hdr-log/--histogram-out")
        }
        let shard = try sharding.resolved().shard
        // One process opens at most its share, and every shard needs a connection and a request: the rules are the
        // load library's (a shard of a larger run is how more connections are made), checked here before a plan is
        // built so that they are usage errors naming the options.
        let connectionLevel = if case .concurrency(let schedule) = shape { schedule.maxConcurrency } else { inFlight }
        switch LoadPlan.connectionShareError(connections: connectionLevel, shard: shard) {
        case .tooManyConnections:
            throw ValidationError(
                "-c/--connections: at most \(LoadPlan.maximumConnections) per process (shard the run for more)")
        case let error?: throw ValidationError("\(error.description) (-c)")
        case nil: break
        }
        if let requests, let error = LoadPlan.requestShareError(requests: requests, shard: shard) {
            throw ValidationError("\(error.description) (-n)")
        }
        if let timeout, timeout.duration <= .zero { throw ValidationError("--timeout must be longer than 0") }
        if HTTPRequest.Method(method.uppercased()) == nil {
            throw ValidationError("invalid method \(method.debugDescription)")
        }
        _ = try parseHeaderOptions(headers)
    }

    private func parsedChecks() throws(LoadCheck.ParseError) -> [LoadCheck] {
        var checks: [LoadCheck] = []
        for text in checkTexts { checks.append(try LoadCheck(text)) }
        return checks
    }

    private func parsedThresholds() throws(LoadThreshold.ParseError) -> [LoadThreshold] {
        var thresholds: [LoadThreshold] = []
        for text in thresholdTexts { thresholds += try LoadThreshold.parseList(text) }
        return thresholds
    }

    func run() async throws {
        try shared.requireSupportedLibcurl()
        let body = try bodyFile.map(Self.readBody)
        let thresholds = try parsedThresholds()
        let checks = try parsedChecks()
        let shape = try stages.map { try BenchStages.parse($0) }
        let (shard, runID) = try sharding.resolved()
        if let outputDirectory = sharding.outputDirectory { try ShardOptions.prepare(directory: outputDirectory) }
        let hdrLogPath =
            sharding.outputDirectory.map {
                ShardOptions.outputPath(directory: $0, kind: "bench", shard: shard, suffix: ".hlog")
            } ?? hdrLog
        var server: LoopbackServer?
        let target: String
        if let url {
            target = url
        } else if let targetsFile {
            target = targetsFile
        } else {
            let embedded = try await LoopbackServer.start()
            server = embedded
            target = embedded.baseURL + "/small"
            if !json { print("embedded server: \(embedded.baseURL) (SwiftNIO, loopback only)") }
        }

        // What the run's output names: printed lines, summaries, reports and shard records travel (CI logs,
        // tickets), so a password or a key typed into the URL stays out of them.
        let shownTarget = URLRedaction.messages.displaying(target)
        let template = try makeTemplate(url: target, body: body)
        let requests: [CurlewRequest]
        if template != nil {
            requests = []
        } else if let targetsFile {
            requests = try loadTargets(path: targetsFile)
        } else {
            do {
                requests = [try makeRequest(method: method, url: target, headers: [], body: body.map { .bytes($0) })]
            } catch let error as CurlewError {
                throw ValidationError("cannot send to \(URLRedaction.messages.naming(target)): \(error.detail)")
            }
        }
        let length = duration?.duration ?? .seconds(10)
        // Each row once without -n/-d: as many requests as rows (the run ends when they run out anyway).
        let requestCount = self.requests ?? (duration == nil ? template?.rowLimit : nil)
        let loadShape: LoadShape =
            if let shape {
                LoadShape(shape)
            } else if let rate {
                requestCount.map { .rate(perSecond: rate, requests: $0) } ?? .rate(perSecond: rate, for: length)
            } else {
                requestCount.map { .requests($0) } ?? .duration(length)
            }
        var loadPlan =
            template.map { LoadPlan(template: $0, shape: loadShape) } ?? LoadPlan(requests: requests, shape: loadShape)
        loadPlan.order = targetsOrder == .random ? .random(seed: seed ?? 1) : .roundRobin
        loadPlan.connections = inFlight
        loadPlan.shard = shard
        loadPlan.thresholds = thresholds
        loadPlan.checks = checks
        loadPlan.checkBodyLimit = checkBodyLimit
        loadPlan.progressInterval = shared.noProgress ? nil : shared.progressInterval.duration
        let workers = loadPlan.connectionsThisProcess

        var configuration = loadPlan.clientConfiguration()
        configuration.httpVersion = h2c ? .http2PriorKnowledge : http2 ? .http2 : .http1_1
        configuration.proxy = .none
        configuration.reusesConnections = !noKeepalive
        configuration.connectTo = connectTo
        if let loops { configuration.loopCount = loops }
        // The command's own default is the thread loop, whose driver it picks by connections per loop (its measured
        // figures are the thread loop's); the library's default is the Dispatch loop.
        if let eventLoop { configuration.eventLoop = eventLoop }
        if loopDriver == nil && eventLoopKind == "thread"
            && workers > Self.socketActionAbovePerLoop * max(configuration.loopCount, 1)
        {
            configuration.eventLoop = .thread(driver: .socketAction)
        }
        shared.applyTLS(to: &configuration)
        let client = CurlewClient(configuration: configuration)

        let load: LoadTest
        do {
            load = try LoadTest(loadPlan, client: client)
        } catch {
            throw CommandFailure(error.description)
        }
        let plan = load.runnerPlan
        #if OTLP
        // Made before anything is sent or bound: an endpoint it cannot send to is a usage error, not a run without
        // metrics.
        let otlpPush: (exporter: LoadTestOTLPExporter, group: ServiceGroup, exportTimeout: Duration)?
        if let otlp {
            do {
                var logger = Logger(label: "curlew.otlp") { StreamLogHandler.standardError(label: $0) }
                logger.logLevel = .warning
                // The last send, the one with the final counts, gets at least 2 s even at a short interval; no send
                // gets more than 10 s, which bounds how long an unreachable collector delays the end of the run.
                let exportTimeout = min(max(otlpInterval.duration, .seconds(2)), .seconds(10))
                let exporter = try LoadTestOTLPExporter(
                    load, endpoint: otlp, exportInterval: otlpInterval.duration, exportTimeout: exportTimeout,
                    logger: logger)
                let group = ServiceGroup(
                    services: [exporter],
                    logger: Logger(label: "curlew.otlp", factory: { _ in SwiftLogNoOpLogHandler() }))
                otlpPush = (exporter, group, exportTimeout)
            } catch {
                await client.shutdown()
                try? await server?.shutdown()
                throw ValidationError("--otlp: \(error)")
            }
        } else {
            otlpPush = nil
        }
        #endif
        // The endpoint is bound before anything is sent: a port in use is a usage error, not a run without metrics.
        let metrics: (exporter: LoadTestPrometheusExporter, endpoint: PrometheusEndpoint)?
        if let prometheus {
            let exporter = LoadTestPrometheusExporter(load)
            do {
                let endpoint = try await PrometheusEndpoint.start(host: prometheus.host, port: prometheus.port) {
                    exporter.emit(into: &$0)
                }
                metrics = (exporter, endpoint)
            } catch {
                await client.shutdown()
                try? await server?.shutdown()
                throw ValidationError("--prometheus \(prometheus): \(error.description)")
            }
        } else {
            metrics = nil
        }
        let progress = ProgressOutput(enabled: !shared.noProgress)
        if !json {
            print("curlew bench \(shownTarget)")
            print("  \(describe(plan: plan, loops: client.executors.count, driver: configuration.eventLoop))")
            if !shard.isWhole {
                print(
                    "  shard \(shard)" + (runID.map { " of run \($0)" } ?? "")
                        + ": the run's requests \(shard.index), \(shard.index + shard.count), \(shard.index + 2 * shard.count), …"
                )
            }
            if let metrics { print("  prometheus: \(metrics.endpoint.url)") }
            #if OTLP
            if let otlpPush {
                let endpoint = URLRedaction.messages.displaying(otlpPush.exporter.endpoint.absoluteString)
                print("  otlp: \(endpoint) every \(otlpInterval)")
            }
            #endif
        }
        if let startAt { try await waitUntil(startAt) }

        let interrupts = InterruptMonitor { _ in load.stop() }
        let reporter = Task {
            for await interval in load.progress { progress.update(Self.progressLine(interval, plan: plan)) }
        }
        // Output files are created before the first request: a typo in a path should not cost a whole run.
        if let report, !FileManager.default.createFile(atPath: report, contents: nil) {
            throw CommandFailure("cannot create --report \(report.debugDescription)")
        }
        let recorder: BenchIntervalRecorder
        do {
            recorder = try BenchIntervalRecorder(runner: load.runner, every: interval.duration, hdrLogPath: hdrLogPath)
        } catch {
            throw CommandFailure(error.description)
        }
        let recording = Task { await recorder.record() }
        #if OTLP
        // Started last, once nothing can fail before the run: sends begin with the run.
        let otlpSending = otlpPush.map { push in Task { try await push.group.run() } }
        #endif
        let startedAt = Date()
        let loadSummary: LoadSummary
        do {
            loadSummary = try await load.run()
        } catch {
            throw CommandFailure(error.description)
        }
        let result = loadSummary.result
        // The run's interrupts: later ones end --otlp's last send or the --prometheus-hold, not the run.
        let interruptsDuringRun = interrupts.count
        reporter.cancel()
        recording.cancel()
        _ = await reporter.value
        _ = await recording.value
        // Each scrape samples the run; this last sample, after the run ended, leaves the final counts in the registry.
        metrics?.exporter.sample()
        #if OTLP
        // The exporter's graceful shutdown samples the final counts and sends them: within the send time, twice it if
        // a send was under way. The command waits no longer than that and a second (swift-otel's own limits are not
        // enforced on AsyncHTTPClient's shutdown), and Ctrl-C or SIGTERM meanwhile stops the waiting at once.
        if let otlpPush, let otlpSending {
            await otlpPush.group.triggerGracefulShutdown()
            let interruptsBefore = interrupts.count
            let deadline = ContinuousClock.now + otlpPush.exportTimeout * 2 + .seconds(1)
            let (ended, ending) = AsyncStream<Void>.makeStream()
            let sent = Task {
                _ = try? await otlpSending.value
                ending.yield()
            }
            let givenUp = Task {
                while !Task.isCancelled && interrupts.count == interruptsBefore && ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(50))
                }
                ending.yield()
            }
            for await _ in ended { break }
            givenUp.cancel()
            sent.cancel()
            otlpSending.cancel()
        }
        #endif
        // Interrupts after this one end the --prometheus-hold.
        let interruptsBeforeHold = interrupts.count
        progress.finish()
        // With a hold, Ctrl-C and SIGTERM still reach the monitor: they end the hold, and the exit status is the run's.
        if metrics == nil { interrupts.stop() }
        await client.shutdown()

        do {
            try recorder.finish(result: result)
        } catch {
            throw CommandFailure(error.description)
        }

        var summary = BenchSummary(
            result: result, plan: plan, url: target,
            method: template?.method.rawValue ?? (requests.count == 1 ? requests[0].method.rawValue : "mixed"),
            loops: client.executors.count)
        summary.stages = stages
        summary.loopDriver = configuration.eventLoop.threadDriver?.description ?? "dispatch"
        summary.hdrLog = hdrLogPath
        summary.shard = shard.isWhole ? nil : shard
        summary.runId = runID
        summary.startedAt = startedAt.timeIntervalSince1970
        summary.startAt = startAt?.date.timeIntervalSince1970
        summary.report = report
        summary.thresholds = loadSummary.thresholds
        if let server {
            summary.embeddedServer = .init(requests: server.requestsServed, connections: server.acceptedConnections)
            try? await server.shutdown()
        }
        // Interrupted means the run was: a Ctrl-C during --otlp's last send only gives up that send.
        summary.interrupted = interruptsDuringRun > 0
        summary.exitStatus = BenchExitStatus.of(
            interrupted: summary.interrupted, requests: summary.requests, succeeded: summary.succeeded,
            thresholds: summary.thresholds)
        if let histogramOut {
            try writeHistogram(result.histogram, to: histogramOut, option: "--histogram-out")
        }
        if let outputDirectory = sharding.outputDirectory {
            try writeResults(
                summary: summary, histogram: result.histogram, intervals: recorder.intervals, shard: shard,
                to: outputDirectory)
        }
        if let report {
            let page = BenchReport(
                title: "curlew bench \(shownTarget)",
                parameters: reportParameters(
                    plan: plan, loops: client.executors.count, driver: configuration.eventLoop, startedAt: startedAt),
                summary: summary, intervals: recorder.intervals, histogram: result.histogram)
            do {
                try page.html.write(toFile: report, atomically: true, encoding: .utf8)
            } catch {
                throw CommandFailure("cannot write --report \(report.debugDescription): \(error.localizedDescription)")
            }
        }
        if json {
            print(try jsonLine(summary))
        } else {
            printLine(summary.text)
        }
        if let metrics {
            if prometheusHold.duration > .zero {
                fflush(nil)
                let end = ContinuousClock.now + prometheusHold.duration
                while ContinuousClock.now < end && interrupts.count == interruptsBeforeHold {
                    try? await Task.sleep(for: min(.milliseconds(50), end - ContinuousClock.now))
                }
            }
            interrupts.stop()
            await metrics.endpoint.shutdown()
        }
        if summary.exitStatus != BenchExitStatus.success { throw ExitCode(summary.exitStatus) }
    }

    /// The progress line of one interval: requests so far, the interval's rate and percentiles, errors so far.
    private static func progressLine(_ progress: LoadProgress, plan: BenchPlan) -> String {
        let current = progress.interval
        var line = "\(formatCount(current.totalRequests)) requests"
        if case .count(let total) = plan.stop { line += " of \(formatCount(total))" }
        line += String(format: ", %.0f req/s", current.requestsPerSecond)
        if current.requests > 0 {
            line += ", p50 \(formatLatency(microseconds: current.latencyMicroseconds(percentile: 50)))"
            line += " p99 \(formatLatency(microseconds: current.latencyMicroseconds(percentile: 99)))"
        }
        line += String(format: ", %d errors", current.totalFailed)
        // Once a request was late, as it goes: the connections, not the server, are then holding the schedule back.
        if current.totalLateRequests > 0 { line += ", \(formatCount(current.totalLateRequests)) late (raise -c)" }
        line += String(format: ", %.1f s", current.endSeconds)
        return line
    }

    /// One request, from the command line or a targets file: the -H headers come after the target's own.
    private func makeRequest(
        method: String, url: String, headers targetHeaders: [(name: String, value: String)], body: CurlewRequest.Body?
    ) throws -> CurlewRequest {
        guard let parsedMethod = HTTPRequest.Method(method.uppercased()) else {
            throw CurlewError(code: .invalidRequest, detail: "invalid method \(method.debugDescription)")
        }
        var request = try CurlewRequest(method: parsedMethod, url: url)
        for (name, value) in targetHeaders { try request.addHeader(name, value) }
        for (name, value) in try parseHeaderOptions(headers) { try request.addHeader(name, value) }
        request.body = body
        if let timeout { request.timeouts = .init(connect: timeout.duration, total: timeout.duration) }
        return request
    }

    /// The request template when the run sends one: with --data, or placeholders in the URL, a -H value or a UTF-8
    /// --body-file. Every placeholder and every row is checked here, before anything is sent.
    private func makeTemplate(url: String, body: [UInt8]?) throws -> LoadRequestTemplate? {
        let headerOptions = try parseHeaderOptions(headers)
        let bodyText = body.flatMap { String(validating: $0, as: UTF8.self) }
        let templated =
            dataFile != nil || LoadRequestTemplate.hasPlaceholders(url)
            || headerOptions.contains { LoadRequestTemplate.hasPlaceholders($0.value) }
            || bodyText.map(LoadRequestTemplate.hasPlaceholders) == true
        guard templated, targetsFile == nil else { return nil }
        if body != nil && bodyText == nil { throw ValidationError("a templated --body-file must be UTF-8 text") }
        var data: LoadData?
        if let dataFile {
            guard let contents = FileManager.default.contents(atPath: dataFile) else {
                throw ValidationError("cannot read --data \(dataFile.debugDescription)")
            }
            let text = String(decoding: contents, as: UTF8.self)
            do {
                data =
                    try dataFile.hasSuffix(".jsonl") || dataFile.hasSuffix(".ndjson")
                    ? LoadData.jsonLines(text) : LoadData.csv(text)
            } catch {
                throw ValidationError("--data \(dataFile.debugDescription): \(error.description)")
            }
        }
        guard let parsedMethod = HTTPRequest.Method(method.uppercased()) else {
            throw ValidationError("invalid method \(method.debugDescription)")
        }
        do {
            var template = try LoadRequestTemplate(
                method: parsedMethod, url: url, headers: headerOptions.map { ($0.name, $0.value) }, body: bodyText,
                data: data, rows: dataRows == .once ? .once : .cycle, seed: dataFile == nil ? nil : seed)
            if let timeout { template.timeouts = .init(connect: timeout.duration, total: timeout.duration) }
            return template
        } catch {
            throw ValidationError("request template: \(error.description)")
        }
    }

    private static func readBody(path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read --body-file \(path.debugDescription)")
        }
        return Array(data)
    }

    /// Reads and checks every target before anything is sent: a bad line is a usage error naming the line.
    private func loadTargets(path: String) throws -> [CurlewRequest] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read --targets \(path.debugDescription)")
        }
        let directory = (path as NSString).deletingLastPathComponent
        let specs: [BenchTargetSpec]
        do {
            specs = try BenchTargetFile.parse(
                String(decoding: data, as: UTF8.self), directory: directory.isEmpty ? "." : directory)
        } catch {
            throw ValidationError("--targets \(path.debugDescription): \(error.description)")
        }
        // Body files are read once; targets that share one share its bytes.
        var bodies: [String: [UInt8]] = [:]
        return try specs.enumerated().map { index, spec in
            var body: CurlewRequest.Body?
            switch spec.body {
            case .text(let text): body = .bytes(Array(text.utf8))
            case .file(let file):
                if bodies[file] == nil {
                    guard let contents = FileManager.default.contents(atPath: file) else {
                        throw ValidationError(
                            "--targets \(path.debugDescription), target \(index + 1): cannot read body file \(file.debugDescription)"
                        )
                    }
                    bodies[file] = Array(contents)
                }
                body = .bytes(bodies[file]!)
            case nil: body = nil
            }
            do {
                return try makeRequest(method: spec.method, url: spec.url, headers: spec.headers, body: body)
            } catch let error as CurlewError {
                let target = URLRedaction.messages.naming(spec.url)
                throw ValidationError(
                    "--targets \(path.debugDescription), target \(index + 1) (\(target)): \(error.detail)")
            }
        }
    }

    private func describe(plan: BenchPlan, loops: Int, driver: CurlewClient.Configuration.EventLoopKind) -> String {
        let version = h2c ? "h2c" : http2 ? "HTTP/2 (TLS)" : "HTTP/1.1"
        let amount: String =
            switch plan.stop {
            case .count(let count): "\(formatCount(count)) requests"
            case .duration(let duration): String(format: "%.1f s", duration.seconds)
            case .schedule: "\(formatCount(plan.arrivals?.totalRequests ?? 0)) requests"
            }
        let pace = rate.map { String(format: ", %.0f requests/s scheduled", $0) } ?? ""
        let shape = stages.map { ", stages \($0)" } ?? ""
        let targets = plan.countedTargets > 1 ? ", \(plan.countedTargets) targets" : ""
        let reuse = noKeepalive ? ", a new connection per request" : ""
        let loopDriver =
            driver.threadDriver == nil ? " (dispatch)" : driver.threadDriver == .socketAction ? " (socket-action)" : ""
        return
            "\(plan.connections) connections, \(loops) loop(s)\(loopDriver), \(version)\(reuse), \(amount)\(pace)\(shape)\(targets)"
    }

    private func reportParameters(
        plan: BenchPlan, loops: Int, driver: CurlewClient.Configuration.EventLoopKind, startedAt: Date
    ) -> [(String, String)] {
        var rows: [(String, String)] = [
            ("run", describe(plan: plan, loops: loops, driver: driver)),
            ("started", ISO8601DateFormatter().string(from: startedAt)),
            ("interval", interval.description),
            ("client", "curlew \(CurlewVersion.curlew), libcurl \(CurlewVersion.libcurl)"),
        ]
        if let targetsFile {
            rows.insert(("targets", "\(targetsFile) (\(plan.targets.count), \(targetsOrder.rawValue))"), at: 0)
        } else {
            let target = plan.targets[0]
            rows.insert(("url", "\(target.method.rawValue) \(URLRedaction.messages.displaying(target.url))"), at: 0)
        }
        if let stages { rows.append(("stages", stages)) }
        if let rate { rows.append(("rate", String(format: "%g requests/s", rate))) }
        return rows
    }

    private func writeHistogram(_ histogram: LatencyHistogram, to path: String, option: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try encoder.encode(histogram).write(to: URL(fileURLWithPath: path))
        } catch {
            throw CommandFailure("cannot write \(option) \(path.debugDescription): \(error.localizedDescription)")
        }
    }

    /// `--output-dir`: the summary with the run's plan and interval counts, the histogram and (written during
    /// the run) the interval log, named after the shard: what `curlew merge` reads.
    private func writeResults(
        summary: BenchSummary, histogram: LatencyHistogram, intervals: [BenchInterval], shard: ShardAssignment,
        to directory: String
    ) throws {
        func path(_ suffix: String) -> String {
            ShardOptions.outputPath(directory: directory, kind: "bench", shard: shard, suffix: suffix)
        }
        let histogramPath = path(".histogram.json")
        try writeHistogram(histogram, to: histogramPath, option: "--output-dir")
        var record = summary
        record.run = BenchRunRecord(
            plan: runPlan(shards: shard.count), intervals: intervals.map(BenchIntervalCounts.init),
            histogramFile: (histogramPath as NSString).lastPathComponent,
            hdrLogFile: (path(".hlog") as NSString).lastPathComponent)
        let summaryPath = path(".json")
        do {
            try Data((try jsonLine(record) + "\n").utf8).write(to: URL(fileURLWithPath: summaryPath))
        } catch {
            throw CommandFailure(
                "cannot write --output-dir \(summaryPath.debugDescription): \(error.localizedDescription)")
        }
    }

    /// The run as asked for, undivided: what every shard of a run shares.
    private func runPlan(shards: Int) -> BenchRunPlan {
        BenchRunPlan(
            target: url ?? targetsFile ?? "(embedded server)", method: method.uppercased(), requests: requests,
            durationSeconds: duration?.duration.seconds, rate: rate, stages: stages, connections: connections,
            httpVersion: h2c ? "h2c" : http2 ? "2" : "1.1", targetsOrder: targetsOrder.rawValue, seed: seed,
            intervalSeconds: interval.duration.seconds, startAt: startAt?.date.timeIntervalSince1970, shards: shards,
            checks: checkTexts.isEmpty ? nil : checkTexts)
    }

    /// Sleeps until `--start-at`; a time already past starts the run at once, with a warning (the shards' windows
    /// will not line up).
    private func waitUntil(_ start: StartTimeArgument) async throws {
        let now = Date()
        let wait = start.date.timeIntervalSince(now)
        if wait < 0 {
            writeStandardError(
                String(format: "warning: --start-at %@ passed %.1f s ago: starting now\n", start.description, -wait))
            return
        }
        if !json { print(String(format: "  waiting %.1f s for --start-at %@", wait, start.description)) }
        try await Task.sleep(for: BenchStartTime.wait(until: start.date, from: now))
    }

}

/// `--start-at`: an absolute wall-clock time, in ISO 8601 or seconds since 1970.
struct StartTimeArgument: ExpressibleByArgument, Sendable, CustomStringConvertible {
    let date: Date
    let description: String

    init?(argument: String) {
        guard let date = BenchStartTime.parse(argument) else { return nil }
        self.date = date
        description = argument.trimmingCharacters(in: .whitespaces)
    }
}

enum DataRowsArgument: String, ExpressibleByArgument, CaseIterable, Sendable {
    case once
    case cycle
}

enum TargetsOrderArgument: String, ExpressibleByArgument, CaseIterable, Sendable {
    case roundRobin = "round-robin"
    case random
}
