import ArgumentParser
import CurlewEngine
import CurlewLoopbackServer
import Foundation
import HTTPTypes

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Load-test a URL and report throughput, latency percentiles and errors.",
        discussion: """
            Without a URL, starts an embedded loopback server and loads its /small route.
            With --rate, requests are scheduled at fixed intervals and latency counts from each request's
            intended send time, so a stalled server shows up in the percentiles instead of slowing the
            load down (no coordinated omission).
            """
    )

    @Argument(help: "The URL to load (http or https). Omit it to run against the embedded loopback server.")
    var url: String?

    @Option(name: [.customShort("c"), .long], help: "Requests in flight at any time.")
    var connections: Int = 16

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

    @Flag(help: "Print the summary as one JSON object on stdout.")
    var json = false

    @Option(name: .customLong("histogram-out"), help: "Write the latency HdrHistogram (JSON, microseconds) here, for exact merging.")
    var histogramOut: String?

    @Option(help: "Event loops (threads) of the client; default one per CPU the process may use.")
    var loops: Int?

    @Option(
        name: .customLong("loop-driver"),
        help: "How the loop threads drive libcurl: poll (curl_multi_poll, the default) or socket-action (epoll and curl_multi_socket_action, for thousands of connections).")
    var loopDriver: String?

    @OptionGroup var shared: SharedOptions

    /// The event loop `--loop-driver` names; nil for a name it does not know.
    private var eventLoop: CurlewClient.Configuration.EventLoopKind? {
        switch loopDriver ?? "poll" {
        case "poll": .thread
        case "socket-action": .threadSocketAction
        default: nil
        }
    }

    func validate() throws {
        guard connections >= 1 else { throw ValidationError("-c/--connections must be at least 1") }
        if let requests, requests < 1 { throw ValidationError("-n/--requests must be at least 1") }
        if requests != nil && duration != nil { throw ValidationError("give -n/--requests or -d/--duration, not both") }
        if let duration, duration.duration <= .zero { throw ValidationError("-d/--duration must be longer than 0") }
        if let rate, !(rate > 0 && rate.isFinite) { throw ValidationError("--rate must be a positive number of requests per second") }
        if http2 && h2c { throw ValidationError("--http2 and --h2c exclude each other") }
        if let loops, loops < 1 { throw ValidationError("--loops must be at least 1") }
        if eventLoop == nil { throw ValidationError("--loop-driver must be poll or socket-action") }
        if let timeout, timeout.duration <= .zero { throw ValidationError("--timeout must be longer than 0") }
        if HTTPRequest.Method(method.uppercased()) == nil { throw ValidationError("invalid method \(method.debugDescription)") }
        for header in headers {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex else {
                throw ValidationError("header \(header.debugDescription) is not 'Name: value'")
            }
        }
    }

    func run() async throws {
        let body = try bodyFile.map(Self.readBody)
        var server: LoopbackServer?
        let target: String
        if let url {
            target = url
        } else {
            let embedded = try await LoopbackServer.start()
            server = embedded
            target = embedded.baseURL + "/small"
            if !json { print("embedded server: \(embedded.baseURL) (SwiftNIO, loopback only)") }
        }

        let request: CurlewRequest
        do {
            request = try makeRequest(url: target, body: body)
        } catch let error as CurlewError {
            throw ValidationError("cannot send to \(target.debugDescription): \(error.detail)")
        }

        var configuration = CurlewClient.Configuration()
        configuration.maxConnectionsPerHost = connections
        // libcurl 7.88 counts busy connections against its cache size too: a cache smaller than the connections in
        // flight closes one after nearly every request (at -c 1000, 29,444 of 30,000 requests opened a connection).
        configuration.maxCachedConnectionsPerLoop = max(connections, configuration.maxCachedConnectionsPerLoop)
        configuration.httpVersion = h2c ? .http2PriorKnowledge : http2 ? .http2 : .http1_1
        configuration.proxy = .none
        if let loops { configuration.loopCount = loops }
        if let eventLoop { configuration.eventLoop = eventLoop }
        shared.applyTLS(to: &configuration)
        let client = CurlewClient(configuration: configuration)

        let stop: BenchPlan.Stop =
            if let requests { .count(requests) } else { .duration(duration?.duration ?? .seconds(10)) }
        let plan = BenchPlan(request: request, connections: connections, stop: stop, rate: rate)
        let progress = ProgressOutput(enabled: !shared.noProgress)
        if !json {
            print("curlew bench \(target)")
            print("  \(describe(plan: plan, loops: client.executors.count))")
        }

        let runner = BenchRunner(client: client, plan: plan)
        let interrupts = InterruptMonitor { _ in runner.requestStop() }
        let reporter = Task {
            await runner.reportProgress(every: shared.progressInterval.duration, to: progress)
        }
        let result = await runner.run()
        reporter.cancel()
        _ = await reporter.value
        progress.finish()
        interrupts.stop()
        await client.shutdown()

        var summary = BenchSummary(result: result, plan: plan, url: target, method: request.method.rawValue, loops: client.executors.count)
        if let server {
            summary.embeddedServer = .init(requests: server.requestsServed, connections: server.acceptedConnections)
            try? await server.shutdown()
        }
        summary.interrupted = interrupts.wasInterrupted
        if let histogramOut {
            try writeHistogram(result.histogram, to: histogramOut)
        }
        if json {
            print(try jsonLine(summary))
        } else {
            print(summary.text)
        }
        if interrupts.wasInterrupted { throw ExitCode(130) }
    }

    private func makeRequest(url: String, body: [UInt8]?) throws -> CurlewRequest {
        var request = try CurlewRequest(method: HTTPRequest.Method(method.uppercased())!, url: url)
        for header in headers {
            let colon = header.firstIndex(of: ":")!
            let name = String(header[..<colon]).trimmingCharacters(in: .whitespaces)
            let value = String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            try request.addHeader(name, value)
        }
        if let body { request.body = .bytes(body) }
        if let timeout { request.timeouts = .init(connect: timeout.duration, total: timeout.duration) }
        return request
    }

    private static func readBody(path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read --body-file \(path.debugDescription)")
        }
        return Array(data)
    }

    private func describe(plan: BenchPlan, loops: Int) -> String {
        let version = h2c ? "h2c" : http2 ? "HTTP/2 (TLS)" : "HTTP/1.1"
        let amount: String =
            switch plan.stop {
            case .count(let count): "\(formatCount(count)) requests"
            case .duration(let duration): String(format: "%.1f s", duration.seconds)
            }
        let pace = rate.map { String(format: ", %.0f requests/s scheduled", $0) } ?? ""
        return "\(connections) connections, \(loops) loop(s), \(version), \(amount)\(pace)"
    }

    private func writeHistogram(_ histogram: LatencyHistogram, to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try encoder.encode(histogram).write(to: URL(fileURLWithPath: path))
        } catch {
            throw CommandFailure("cannot write --histogram-out \(path.debugDescription): \(error.localizedDescription)")
        }
    }
}
