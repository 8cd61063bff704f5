import Logging
import Synchronization
import Tracing

/// A long-lived HTTP client on libcurl: its event loops, their connection pools and the defaults for
/// every request. Create one per process (or use ``shared``) and call ``shutdown()`` when done.
///
/// ```swift
/// let client = CurlewClient()
/// let request = try CurlewRequest(url: "http://127.0.0.1:8080/small")
/// let response = try await client.execute(request)
/// print(response.status, response.body.count, response.metrics.total)
/// await client.shutdown()
/// ```
///
/// ## Running request loops at full speed
/// Tasks that prefer a loop's executor run on the loop's own thread (or, with the Dispatch loop, its serial
/// queue): a finished transfer resumes its task there and the task's next request enters libcurl with no thread
/// hop. That is how a load loop gets close to raw libcurl:
/// ```swift
/// try await withThrowingTaskGroup(of: Void.self) { group in
///     for worker in 0..<64 {
///         group.addTask(executorPreference: client.executors[worker % client.executors.count]) {
///             for _ in 0..<1000 { _ = try await client.execute(request) }
///         }
///     }
///     try await group.waitForAll()
/// }
/// ```
/// The trade-off is the one of any event-loop executor: code between awaits then runs on the I/O thread, so
/// heavy work there delays every transfer of that loop. Move such work off it (for example into a task without
/// the preference).
public final class CurlewClient: Sendable {
    /// A process-wide client with the default configuration. ``shutdown()`` does nothing on it.
    public static let shared = CurlewClient(isShared: true)

    /// The configuration the client was created with.
    public let configuration: Configuration
    let settings: ClientSettings
    private let loops: [any CurlEventLoop]
    private let isShared: Bool
    /// Tracing is decided once, here: a client without a tracer checks one optional per request.
    let tracer: (any Tracer)?
    /// The client's logger; `nil` logs nothing.
    let logger: Logger?
    /// Read on every request, so an atomic rather than a lock.
    private let isRunning = Atomic<Bool>(true)
    /// Why the client started no loop although it was asked to: the libcurl is too old. Requests fail with it.
    private let unsupportedLibcurl: String?

    /// Creates a client and starts its event loops.
    public convenience init(configuration: Configuration = Configuration()) {
        self.init(configuration: configuration, isShared: false)
    }

    private convenience init(isShared: Bool) {
        self.init(configuration: Configuration(), isShared: isShared)
    }

    private init(configuration: Configuration, isShared: Bool) {
        let settings = ClientSettings(configuration: configuration)
        let unsupportedLibcurl = settings.capabilities.libcurl.unsupportedReason
        let loopCount = unsupportedLibcurl == nil ? max(configuration.loopCount, 1) : 0
        var loops: [any CurlEventLoop] = []
        for index in 0..<loopCount {
            let loop: (any CurlEventLoop)? =
                if let driver = configuration.eventLoop.threadDriver {
                    ThreadEventLoop(
                        settings: settings, index: index, loopCount: loopCount,
                        driver: driver == .socketAction ? .socketAction : .poll)
                } else {
                    DispatchEventLoop(settings: settings, index: index, loopCount: loopCount)
                }
            // Only resource exhaustion stops a loop from starting; the client then runs on fewer.
            if let loop { loops.append(loop) }
        }
        self.configuration = configuration
        self.settings = settings
        self.loops = loops
        self.unsupportedLibcurl = unsupportedLibcurl
        self.isShared = isShared
        self.tracer = configuration.tracer ?? Self.bootstrappedTracer
        self.logger = configuration.logger
    }

    deinit {
        // Released without shutdown(): stop the loops without waiting; each cleans up on its own thread or queue.
        for loop in loops {
            (loop as? ThreadEventLoop)?.requestShutdown()
            (loop as? DispatchEventLoop)?.requestShutdown()
        }
    }

    /// The task executors of the event loops, one per loop: a thread loop's thread, or a Dispatch loop's serial
    /// queue (``Configuration/EventLoopKind/dispatch``).
    ///
    /// Prefer them for tasks that mostly issue requests; see the type's documentation for the trade-off.
    public var executors: [any TaskExecutor] {
        loops.compactMap(\.taskExecutor)
    }

    /// A snapshot of the connection pool: connections open, idle and busy, transfers in flight and waiting for a
    /// connection, and the running totals, for the whole client and per origin (``PoolStatistics``).
    ///
    /// Each event loop counts its own part on its own thread or queue, between two turns, so the counts of one loop
    /// are consistent with each other; loops are visited one after another. A client that has shut down reports
    /// nothing.
    public func poolStatistics() async -> PoolStatistics {
        var counts: [String: PoolStatistics.Counts] = [:]
        for loop in loops {
            guard let executor = loop.taskExecutor else { continue }
            let part = await withTaskExecutorPreference(executor) { () async -> [String: PoolStatistics.Counts]? in
                var part: [String: PoolStatistics.Counts] = [:]
                return loop.addPoolCounts(to: &part) ? part : nil
            }
            for (origin, loopCounts) in part ?? [:] { counts[origin, default: .init()].add(loopCounts) }
        }
        return PoolStatistics(
            byOrigin: counts.mapValues { origin in
                var origin = origin
                origin.connectionsIdle = max(0, origin.connectionsOpen - origin.connectionsBusy)
                return origin
            })
    }

    /// The version of the libcurl the engine runs on, for example `"7.88.1"`.
    public static var libcurlVersion: String {
        CurlGlobal.capabilities.version
    }

    /// The oldest libcurl version Curlew runs on, `"7.80.0"`. On an older one a client starts no event loop and
    /// every request fails with ``CurlewError/Code/unsupportedLibcurl``.
    public static var oldestSupportedLibcurlVersion: String {
        LibcurlVersion.oldestSupported.description
    }

    /// Throws ``CurlewError/Code/unsupportedLibcurl``, naming the version found and the one needed, when the
    /// libcurl the process runs on (read at run time, not from the headers Curlew was compiled with) is older
    /// than ``oldestSupportedLibcurlVersion``. Call it at start-up to fail there rather than on the first request.
    public static func requireSupportedLibcurl() throws {
        if let reason = CurlGlobal.capabilities.libcurl.unsupportedReason {
            throw TransferFailure.error(for: .engine(.unsupportedLibcurl(reason)), cause: nil, handle: nil)
        }
    }

    /// Whether the linked libcurl reuses cleartext HTTP/2 (prior knowledge) connections. libcurl before 8.0
    /// (Debian 12 ships 7.88.1) breaks every request after the first on a reused h2c connection, so Curlew then
    /// gives each h2c request a connection of its own.
    public static var reusesPriorKnowledgeHTTP2Connections: Bool {
        CurlGlobal.capabilities.libcurl.reusesPriorKnowledgeHTTP2Connections
    }

    /// Sends a request and collects the whole response.
    ///
    /// The body is collected up to ``CurlewRequest/maxResponseBodySize`` (or the client's
    /// ``Configuration/maxResponseBodySize``); beyond it the transfer stops with
    /// ``CurlewError/Code/bodyTooLarge``. Cancelling the calling task removes the transfer at once and throws
    /// `CancellationError`.
    ///
    /// Like every request method of the client, it runs on the caller's executor (`nonisolated(nonsending)`):
    /// no hop on the way in, and a task on a loop's executor stays on that thread.
    ///
    /// - Throws: ``CurlewError`` for every transport failure; `CancellationError` when the task was cancelled.
    nonisolated(nonsending) public func execute(_ request: CurlewRequest) async throws -> CurlewResponse {
        try await run(request, sink: .collect, box: nil)
    }

    /// Runs a transfer whose body goes to `sink`; returns when the caller's part is done (the whole response, or
    /// the head of a streamed one). `box` lets a streamed body's consumer reach the transfer later.
    @inline(__always)
    nonisolated(nonsending) func run(
        _ request: CurlewRequest, sink: ResponseSink, box: TransferBox?
    ) async throws -> CurlewResponse {
        if let logger = request.logger ?? logger {
            return try await runLogged(request, logger: logger, sink: sink, box: box)
        }
        return try await runTracedIfEnabled(request, sink: sink, box: box)
    }

    @inline(__always)
    nonisolated(nonsending) func runTracedIfEnabled(
        _ request: CurlewRequest, sink: ResponseSink, box: TransferBox?
    ) async throws -> CurlewResponse {
        if let tracer {
            return try await runTraced(request, sink: sink, box: box, tracer: tracer)
        }
        return try await runUntraced(request, sink: sink, box: box)
    }

    @inline(__always)
    nonisolated(nonsending) func runUntraced(
        _ request: CurlewRequest, sink: ResponseSink, box: TransferBox?
    ) async throws -> CurlewResponse {
        guard let loop = pickLoop() else {
            throw endedBeforeStart(
                request, sink: sink,
                because: unsupportedLibcurl.map(TransferStateMachine.Failure.unsupportedLibcurl) ?? .clientShutdown)
        }
        if let stream = request.announcedEmptyStream { try await hold(request, until: stream, sink: sink) }
        let transfer = Transfer(request: request, settings: settings, submittedAt: loop.submissionTime, sink: sink)
        transfer.loop = loop
        if let box {
            box.transfer = transfer
            box.loop = loop
        }
        return try await submitAndWait(transfer, on: loop)
    }

    /// Waits for the producer of a request's stream announced as empty; kept out of line, so that every other
    /// request's path stays as small as it was.
    @inline(never)
    nonisolated(nonsending) private func hold(
        _ request: CurlewRequest, until stream: RequestBodyStream, sink: ResponseSink
    ) async throws {
        do {
            // The wait counts against the total timeout, as a request's wait for a connection does.
            try await stream.holdUntilAnnouncedEmptyEnd(
                within: Transfer.timeouts(of: request, settings: settings).total)
        } catch {
            let reason: TransferStateMachine.Failure =
                switch error.code {
                case .cancelled: .cancelled
                case .timeout(.total): .timeout(.total)
                default: .invalidRequest(error)
                }
            throw endedBeforeStart(request, sink: sink, because: reason)
        }
    }

    /// The error of a request that ends before any loop has it, through the state machine like every ending: the
    /// last progress report, and body-stream writers released.
    private func endedBeforeStart(
        _ request: CurlewRequest, sink: ResponseSink, because reason: TransferStateMachine.Failure
    ) -> any Error {
        let transfer = Transfer(request: request, settings: settings, submittedAt: monotonicNanoseconds(), sink: sink)
        let failure: TransferStateMachine.Failure
        if case .fail(let outcome) = transfer.stateMachine.rejected(because: reason) {
            failure = outcome
        } else {
            failure = reason
        }
        let error = transfer.error(for: .engine(failure))
        transfer.finish(with: .failure(error))
        return error
    }

    /// Hands a transfer to its loop and waits until the loop resumes it; cancelling the caller cancels the transfer.
    @inline(__always)
    nonisolated(nonsending) func submitAndWait(
        _ transfer: Transfer, on loop: any CurlEventLoop
    ) async throws -> CurlewResponse {
        try await withTaskCancellationHandler {
            try await withTransferContinuation { continuation in
                transfer.continuation = continuation
                loop.load.submitted()
                loop.submit(transfer)
            }
        } onCancel: {
            loop.cancel(transfer)
        }
    }

    @inline(__always)
    nonisolated(nonsending) private func withTransferContinuation(
        _ body: (TransferContinuation) -> Void
    ) async throws -> CurlewResponse {
        #if DEBUG
        try await withCheckedThrowingContinuation(body)
        #else
        try await withUnsafeThrowingContinuation(body)
        #endif
    }

    /// The calling thread's own loop when a task runs on one; otherwise the least busy loop, the first on ties,
    /// so sequential requests share one connection while concurrent ones spread over every loop.
    func pickLoop() -> (any CurlEventLoop)? {
        guard isRunning.load(ordering: .relaxed) else { return nil }
        if loops.count == 1 { return loops[0] }
        var best: (any CurlEventLoop)?
        var bestLoad = Int.max
        for loop in loops {
            if loop.isCurrent { return loop }
            let load = loop.load.current
            if load < bestLoad {
                best = loop
                bestLoad = load
            }
        }
        return best
    }

    /// Fails in-flight requests with ``CurlewError/Code/cancelled``, closes every connection and stops the
    /// loops. Later requests fail with ``CurlewError/Code/clientShutdown``. Does nothing on ``shared``.
    public func shutdown() async {
        guard !isShared else { return }
        isRunning.store(false, ordering: .relaxed)
        // Idempotent per loop: a second caller waits for the same stop.
        for loop in loops { await loop.shutdown() }
    }

    /// Shuts down gracefully: stops taking requests at once (new ones fail with
    /// ``CurlewError/Code/clientShutdown``), lets the requests in flight finish for up to `gracePeriod`, then
    /// does what ``shutdown()`` does with the rest (they fail with ``CurlewError/Code/cancelled``).
    ///
    /// A request counts as in flight until its transfer ends, so a streamed response whose body is still being
    /// read is waited for too. Cancelling the calling task ends the grace period at once. Does nothing on
    /// ``shared``.
    ///
    /// - Returns: `true` if every request in flight finished within the grace period, `false` if some had to be
    ///   cancelled.
    @discardableResult
    public func shutdown(gracePeriod: Duration) async -> Bool {
        guard !isShared else { return true }
        isRunning.store(false, ordering: .relaxed)
        let deadline = ContinuousClock.now.advanced(by: gracePeriod)
        // The loops count their transfers for load balancing already; polling that count at a short interval
        // costs nothing on the request path, where a completion signal would cost every request.
        while inFlightRequestCount > 0, ContinuousClock.now < deadline {
            do {
                try await Task.sleep(for: min(Self.drainPollInterval, deadline - ContinuousClock.now))
            } catch {
                break
            }
        }
        let drained = inFlightRequestCount == 0
        for loop in loops { await loop.shutdown() }
        return drained
    }

    /// Whether the client still takes requests: `false` from the moment a shutdown begins.
    public var isAcceptingRequests: Bool {
        isRunning.load(ordering: .relaxed)
    }

    /// How often a graceful shutdown looks whether the requests in flight have finished.
    static let drainPollInterval = Duration.milliseconds(5)

    /// Requests submitted and not yet finished (a streamed response counts until its body has arrived), over
    /// every loop. A snapshot: it can change as soon as it is read.
    public var inFlightRequestCount: Int {
        loops.reduce(0) { $0 + max($1.load.current, 0) }
    }
}
