import CLibCurl
import Dispatch
import Glibc
import Synchronization

/// libcurl's socket-action API on a serial `DispatchQueue`, which is also the tasks' `TaskExecutor`.
///
/// The loop runs the thread loop's ``SocketActionDriver`` (its epoll set, parts, resting sockets and deadline heap)
/// with two Dispatch sources on its queue: one `DispatchSourceRead` on the driver's epoll descriptor, readable while
/// any of libcurl's sockets has an event, and one `DispatchSourceTimer` for the earliest of libcurl's timers and the
/// engine's deadlines. Each wake-up is one turn of the driver, `epoll_wait` without waiting and
/// `curl_multi_socket_action` for every ready socket, so libdispatch's event thread is crossed per batch of sockets,
/// not per socket, and no source is re-armed per event.
///
/// Work takes the thread loop's order, one queue block at a time: a block (a turn, a job, work from another thread)
/// runs, then everything it posted to the loop from the queue itself (the jobs of the tasks a turn resumed, their
/// next requests) runs in the same block, and a transfer that started asks for one turn, queued behind whatever is
/// already waiting. A task that prefers this executor is resumed on the queue and its next request enters libcurl
/// there: no hop to the cooperative pool and back. See `docs/design/0020-dispatch-loop-one-source.md`.
///
/// Sockets are libcurl's own and watched only by the epoll set, never by a source, so libcurl's descriptor rules are
/// the socket-action driver's (`EpollSocketTable`); the one descriptor a source watches, the epoll set, is closed
/// only in that source's cancel handler.
final class DispatchEventLoop: MessageLoop, @unchecked Sendable {
    let load = LoopLoad()
    /// Every libcurl call of the loop, and every job of a task that prefers it, runs here.
    let queue: DispatchQueue
    private let driver: SocketActionDriver
    /// Readable while the epoll set has an event.
    private let readiness: any DispatchSourceRead
    /// Fires when the driver's next deadline is due, if no socket woke the loop before.
    private let timer: any DispatchSourceTimer
    /// The thread running one of this loop's blocks this instant, 0 between blocks (a serial queue runs one at a
    /// time). Other threads only compare it with their own.
    private let blockThread = Atomic<UInt>(0)

    // Queue only, and touched on every request: no runtime exclusivity check (nothing here re-enters).
    @exclusivity(unchecked) private var localMessages: [LoopMessage] = []
    @exclusivity(unchecked) private var drainedMessages: [LoopMessage] = []
    /// A message started or unpaused a transfer: libcurl must move before the loop waits for a source.
    private var needsTurn = false
    /// A block that only turns is on the queue.
    private var isTurnQueued = false
    /// When the timer fires, on the monotonic clock; `.max` when it is not armed.
    private var armedDeadline: UInt64 = .max
    private var isStopped = false
    /// libcurl's resources and the epoll set are released.
    private var isClosed = false
    private var shutdownWaiters: [CheckedContinuation<Void, Never>] = []

    init?(settings: ClientSettings, index: Int, loopCount: Int) {
        let partPlan = MultiPartPlan(settings: settings, loopCount: loopCount, spreadsTransfers: true)
        guard let core = MultiCore(settings: settings, load: load, limits: partPlan.limits(ofPart: 0)) else {
            return nil
        }
        guard let driver = SocketActionDriver(core: core, partPlan: partPlan, wakeup: nil) else {
            core.cleanup()
            return nil
        }
        self.driver = driver
        let queue = DispatchQueue(label: "curlew-dispatch-loop-\(index)")
        self.queue = queue
        readiness = DispatchSource.makeReadSource(fileDescriptor: driver.epollDescriptor, queue: queue)
        timer = DispatchSource.makeTimerSource(queue: queue)
        // Unowned: the sources are cancelled by stop(), whose cancel handler holds the loop until it has closed.
        readiness.setEventHandler { [unowned self] in self.runBlock { self.turn() } }
        timer.setEventHandler { [unowned self] in
            self.runBlock {
                self.armedDeadline = .max
                self.turn()
            }
        }
        timer.schedule(deadline: .distantFuture)
        readiness.activate()
        timer.activate()
    }

    var taskExecutor: (any TaskExecutor)? { self }

    var isCurrent: Bool {
        blockThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    func addPoolCounts(to counts: inout [String: PoolStatistics.Counts]) -> Bool {
        guard isCurrent else { return false }
        for core in driver.cores { core.addPoolCounts(to: &counts) }
        return true
    }

    var submissionTime: UInt64 {
        isCurrent ? driver.primaryCore.clock.now : monotonicNanoseconds()
    }

    // MARK: hand-over from any thread

    /// From the queue, the message runs at the end of the current block; from elsewhere, in a block of its own.
    func post(_ message: LoopMessage) {
        if isCurrent {
            localMessages.append(message)
        } else {
            queue.async { self.runBlock { self.localMessages.append(message) } }
        }
    }

    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.runBlock {
                    if self.isClosed {
                        continuation.resume()
                    } else {
                        self.shutdownWaiters.append(continuation)
                        self.stop()
                    }
                }
            }
        }
    }

    /// Asks the loop to stop without waiting, for a client released without `shutdown()`.
    func requestShutdown() {
        queue.async { self.runBlock { self.stop() } }
    }

    // MARK: queue only

    /// Every block of the loop: `body`, then what it posted from the queue, then the next turn or the timer.
    private func runBlock(_ body: () -> Void) {
        blockThread.store(UInt(pthread_self()), ordering: .relaxed)
        body()
        processMessages()
        scheduleNextTurn()
        blockThread.store(0, ordering: .relaxed)
    }

    private func turn() {
        guard !isStopped else { return }
        needsTurn = false
        driver.turn(mayWait: false)
    }

    /// Handles the messages posted from the queue until none are left. A stopped loop still runs jobs (the queue
    /// outlives it) and fails submissions (the driver sends them to its stopping part 0); cancels and unpauses have
    /// nothing left to act on.
    private func processMessages() {
        while !localMessages.isEmpty {
            swap(&drainedMessages, &localMessages)
            for message in drainedMessages {
                if isStopped {
                    switch message {
                    case .cancel, .unpause: continue
                    case .submit, .job: break
                    }
                }
                if driver.carryOut(message, on: asUnownedTaskExecutor()) { needsTurn = true }
            }
            drainedMessages.removeAll(keepingCapacity: true)
        }
    }

    /// Queues a turn when libcurl must move now (a transfer started, its timer is due, or the last `epoll_wait`
    /// filled its batch), otherwise arms the timer for the driver's next deadline; a socket event wakes the loop
    /// through the readiness source.
    private func scheduleNextTurn() {
        guard !isStopped else { return }
        let deadline = driver.nextDeadline
        if needsTurn || driver.lastTurnFilledBatch || deadline <= driver.primaryCore.clock.now {
            guard !isTurnQueued else { return }
            isTurnQueued = true
            queue.async {
                self.runBlock {
                    self.isTurnQueued = false
                    self.turn()
                }
            }
            return
        }
        guard deadline != armedDeadline else { return }
        armedDeadline = deadline
        if deadline == .max {
            timer.schedule(deadline: .distantFuture)
        } else {
            let now = monotonicNanoseconds()
            timer.schedule(deadline: .now() + .nanoseconds(deadline > now ? Int(clamping: deadline - now) : 0))
        }
    }

    /// Fails what runs, then cancels the sources; libcurl and the epoll set are released once the readiness source
    /// has cancelled, so its descriptor is never closed under it.
    private func stop() {
        guard !isStopped else { return }
        isStopped = true
        driver.beginShutdown()
        timer.cancel()
        // Strong: a client released without shutdown() leaves only this handler to keep the loop alive.
        readiness.setCancelHandler { self.runBlock { self.close() } }
        readiness.cancel()
    }

    private func close() {
        driver.cleanup()
        isClosed = true
        let waiters = shutdownWaiters
        shutdownWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
    }
}
