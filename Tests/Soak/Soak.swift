import CurlewEngine
import CurlewTestSupport
import Foundation
import Synchronization

/// `curlew-soak [--seconds N] [--concurrency N] [--rss-growth-limit-mib N]`: the engine under the fault server
/// (`Tests/servers/fault_server.py`) for N seconds (default 600). One client per event loop (thread(poll),
/// thread(socket-action), dispatch) runs at the same time as the others, each with `concurrency` workers that draw
/// a protocol (HTTP/1.1 or HTTP/2, half each) and a route (normal or faulted, ``SoakRoute/all``) per request.
///
/// It fails (exit status 1) when a request succeeds with a body other than the one the server builds for it (a
/// faulted request must fail; a normal one must succeed with the exact body or fail with a ``CurlewError``), when a
/// request outlives its total timeout by more than a margin (a hang), when an error is not a ``CurlewError``, or when
/// the resident set grows by more than the limit between the end of the warm-up (a fifth of the run) and the end.
@main
enum Soak {
    /// Every request's timeouts: a stall or an unanswered request ends at the idle timeout.
    static let timeouts = CurlewClient.Timeouts(connect: .seconds(2), total: .seconds(10), idle: .seconds(1))
    /// How long past its total timeout a request may take before it counts as hung: scheduling slack on a loaded
    /// two-core machine, far below anything a hang would show.
    static let hangMargin = Duration.seconds(5)
    static var hangLimit: Duration { timeouts.total! + hangMargin }

    static let loops: [(name: String, tag: String, kind: CurlewClient.Configuration.EventLoopKind)] = [
        ("thread(poll)", "poll", .thread(driver: .poll)),
        ("thread(socket-action)", "sa", .thread(driver: .socketAction)),
        ("dispatch", "disp", .dispatch),
    ]

    struct Options {
        var seconds = 600
        var concurrency = 12
        /// Growth of the resident set allowed between the end of the warm-up and the end of the run. A soak of
        /// 10 minutes makes about a million requests; 16 MiB is under 20 bytes per request, while the pools' and
        /// allocators' working sets settle in the warm-up and move by a few MiB after it.
        var rssGrowthLimitMiB = 16
        /// Only these routes, protocols and loops (all by default): to chase one finding without the rest of the mix.
        var routes: Set<String>?
        var protocols: Set<String>?
        var loops: Set<String>?

        static func parse(_ arguments: [String]) -> Options {
            var options = Options()
            var index = 0
            func value() -> Int {
                index += 1
                guard index < arguments.count, let number = Int(arguments[index]), number > 0 else {
                    usage()
                }
                return number
            }
            func list() -> Set<String> {
                index += 1
                guard index < arguments.count else { usage() }
                return Set(arguments[index].split(separator: ",").map(String.init))
            }
            while index < arguments.count {
                switch arguments[index] {
                case "--seconds": options.seconds = value()
                case "--concurrency": options.concurrency = value()
                case "--rss-growth-limit-mib": options.rssGrowthLimitMiB = value()
                case "--routes": options.routes = list()
                case "--protocols": options.protocols = list()
                case "--loops": options.loops = list()
                default: usage()
                }
                index += 1
            }
            return options
        }

        static func usage() -> Never {
            let usage =
                "usage: curlew-soak [--seconds N] [--concurrency N] [--rss-growth-limit-mib N] [--routes ok,stray,…] "
                + "[--protocols http1,http2] [--loops poll,sa,disp]\n"
            FileHandle.standardError.write(Data(usage.utf8))
            exit(64)
        }
    }

    static func main() async {
        let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
        let server: FaultServer
        do {
            server = try await FaultServer.start()
        } catch {
            print("curlew-soak: the fault server did not start: \(error)")
            exit(1)
        }
        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif

        let routes = SoakRoute.all.filter { options.routes?.contains($0.kind) ?? true }
        let protocols = SoakProtocol.allCases.filter { version in
            (options.protocols?.contains(version.tag) ?? true) && routes.contains { $0.protocols.contains(version) }
        }
        let loops = loops.filter { options.loops?.contains($0.tag) ?? true }
        guard !protocols.isEmpty, !loops.isEmpty else { Options.usage() }
        print(
            "== curlew soak: \(options.seconds) s, \(loops.map(\.name).joined(separator: ", ")) at once, "
                + "\(protocols.map { $0 == .http2 ? "HTTP/2 (TLS)" : $0.rawValue }.joined(separator: " and ")), "
                + "\(routes.count) routes, \(options.concurrency) workers per loop, \(build) build, libcurl "
                + CurlewClient.libcurlVersion)
        let clients = loops.map { loop in
            var configuration = CurlewClient.Configuration()
            configuration.eventLoop = loop.kind
            configuration.loopCount = 2
            configuration.timeouts = timeouts
            configuration.tls = CurlewClient.TLSConfiguration(caFile: server.caFile)
            configuration.proxy = .none
            return CurlewClient(configuration: configuration)
        }
        let tally = SoakTally()
        let inFlight = InFlightRequests()
        let rss = RSSSamples()
        let serials = SerialNumbers()
        let started = ContinuousClock.now
        let deadline = started + .seconds(options.seconds)
        let sampleInterval = options.seconds <= 120 ? 2 : 5
        func secondsSinceStart() -> Double { (ContinuousClock.now - started) / .seconds(1) }

        // A hung worker would keep the task group below from ever returning: this thread ends the run with a
        // report instead, once every request should long have returned.
        let workersReturned = DoneFlag()
        let watchdog = Thread {
            Thread.sleep(forTimeInterval: Double(options.seconds) + (hangLimit + .seconds(20)) / .seconds(1))
            guard !workersReturned.isSet else { return }
            print("curlew-soak: \(inFlight.count) requests still in flight long after the run ended")
            _ = report(options: options, tally: tally, rss: rss, build: build, stuckRequests: inFlight.count)
            exit(1)
        }
        watchdog.start()

        rss.record(at: 0)
        let monitor = Task {
            // By the clock, not by counting sleeps: on a loaded machine a 1 s sleep takes longer.
            var nextSample = Double(sampleInterval)
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                if secondsSinceStart() >= nextSample, ContinuousClock.now < deadline {
                    rss.record(at: secondsSinceStart())
                    nextSample += Double(sampleInterval)
                }
                for request in inFlight.overdue(limit: hangLimit) {
                    tally.update(request.cell) { $0.hung += 1 }
                    print("curlew-soak: hung past \(hangLimit): \(request.description)")
                }
            }
        }

        await withTaskGroup(of: Void.self) { group in
            for (loop, client) in zip(loops, clients) {
                let executors = client.executors
                for worker in 0..<options.concurrency {
                    let run: @Sendable () async -> Void = {
                        await runWorker(
                            client: client, loopName: loop.name, loopTag: loop.tag, routes: routes,
                            protocols: protocols, server: server, tally: tally,
                            inFlight: inFlight, serials: serials, deadline: deadline)
                    }
                    // Half the workers on the loops' own executors (a finished transfer resumes its task on the loop
                    // thread, which then also checks the body), half on the cooperative pool.
                    if worker % 2 == 0, !executors.isEmpty {
                        group.addTask(executorPreference: executors[(worker / 2) % executors.count]) { await run() }
                    } else {
                        group.addTask { await run() }
                    }
                }
            }
        }
        workersReturned.set()
        rss.record(at: secondsSinceStart())
        monitor.cancel()
        for client in clients { await client.shutdown() }
        server.stop()
        let passed = report(options: options, tally: tally, rss: rss, build: build, stuckRequests: 0)
        exit(passed ? 0 : 1)
    }

    static func runWorker(
        client: CurlewClient, loopName: String, loopTag: String, routes: [SoakRoute], protocols: [SoakProtocol],
        server: FaultServer, tally: SoakTally,
        inFlight: InFlightRequests, serials: SerialNumbers, deadline: ContinuousClock.Instant
    ) async {
        var generator = SystemRandomNumberGenerator()
        while ContinuousClock.now < deadline {
            let version = protocols.randomElement(using: &generator)!
            let route = SoakRoute.random(for: version, from: routes, using: &generator)
            let size = (route.isFault ? SoakRoute.faultSizes : SoakRoute.normalSizes).randomElement(using: &generator)!
            let serial = serials.next()
            let requestID = "\(loopTag)-\(version.tag)-\(serial)"
            let base = version == .http1 ? server.http1BaseURL : server.http2BaseURL
            let cell = "\(loopName) \(version.rawValue)"
            var request: CurlewRequest
            do {
                request = try CurlewRequest(url: "\(base)/\(route.kind)/\(requestID)/\(size)")
            } catch {
                tally.untyped(cell, "building the request failed: \(error)")
                continue
            }
            request.httpVersion = version.engineVersion

            tally.update(cell) { $0.requests += 1 }
            inFlight.begin(serial, cell: cell, description: "\(cell) \(route.kind) \(requestID) (\(size) bytes)")
            let began = ContinuousClock.now
            let outcome: Result<CurlewResponse, any Error>
            do {
                outcome = .success(try await client.execute(request))
            } catch {
                outcome = .failure(error)
            }
            let elapsed = ContinuousClock.now - began
            if !inFlight.end(serial), elapsed > hangLimit {
                tally.update(cell) { $0.hung += 1 }
                print("curlew-soak: returned only after \(elapsed): \(cell) \(route.kind) \(requestID)")
            }

            switch outcome {
            case .success(let response):
                let expected = FaultServer.body(requestID: requestID, size: size)
                // A faulted route never sends a whole, correct response: its success, even with the right bytes (a
                // gzip body cut inside its trailer decodes to all of them), is a wrong body.
                if response.status.code == 200, response.body == expected, !route.isFault {
                    tally.update(cell) { counts in
                        counts.succeeded += 1
                        counts.freshConnectionRetries += response.metrics.freshConnectionRetries
                        if response.metrics.reusedConnection { counts.reusedConnections += 1 }
                    }
                } else if route.kind == "rst-no-error", response.status.code == 200,
                    response.body.count < expected.count, expected.starts(with: response.body)
                {
                    tally.update(cell) { $0.libcurlTruncations += 1 }
                } else {
                    let difference = zip(response.body, expected).enumerated().first { $0.element.0 != $0.element.1 }
                    let excerptStart = max(0, min(difference?.offset ?? expected.count, response.body.count) - 32)
                    let excerpt = response.body[excerptStart..<min(response.body.count, excerptStart + 96)]
                    tally.wrongBody(
                        SoakTally.WrongBody(
                            cell: cell, route: route.kind, requestID: requestID, status: response.status.code,
                            expectedBytes: expected.count, receivedBytes: response.body.count,
                            firstDifference: difference?.offset
                                ?? (response.body.count == expected.count
                                    ? nil : min(response.body.count, expected.count)),
                            receivedExcerpt: String(decoding: excerpt, as: UTF8.self),
                            localPort: response.metrics.localPort, reusedConnection: response.metrics.reusedConnection,
                            freshConnectionRetries: response.metrics.freshConnectionRetries))
                }
            case .failure(let error as CurlewError):
                tally.failed(cell, route: route, version: version, code: error.code.name)
            case .failure(let error):
                tally.untyped(cell, "\(route.kind) \(requestID): \(type(of: error)): \(error)")
            }
        }
    }
}
