import CLibCurl
import Glibc
import Synchronization

/// The default loop: a dedicated thread drives libcurl through a ``LoopDriver`` (``PollDriver`` or
/// ``SocketActionDriver``) and is also a Swift `TaskExecutor`.
///
/// Tasks that prefer this executor resume on the loop thread right after their transfer completes, and their
/// next request goes into libcurl on the same thread with no lock, wakeup or context switch. Other threads
/// hand work over through the ``LoopInbox`` and wake the thread only when it is asleep. See
/// `docs/design/0001-event-loop.md` for the measurements behind this.
///
/// The loop owns the order every driver shares: take the posted work, let the driver turn (sleeping only when
/// nothing was started), run what the turn resumed; on a stop, fail what runs, run what was posted before the stop
/// was seen, release libcurl, then answer the shutdown's waiters.
final class ThreadEventLoop: MessageLoop, @unchecked Sendable {
    /// How the thread drives libcurl.
    enum Driver {
        /// ``PollDriver``.
        case poll
        /// ``SocketActionDriver``.
        case socketAction
    }

    let load = LoopLoad()
    private let inbox: LoopInbox<LoopMessage>
    private let driver: any LoopDriver
    /// The driver's primary multi handle, whose clock is the loop's.
    private let core: MultiCore
    private let name: String
    /// The loop thread's id while it runs, 0 before and after (so a later thread that reuses the id is not
    /// taken for the loop). Other threads only compare it with their own.
    private let threadID = Atomic<UInt>(0)

    // Loop-thread only, and touched on every request: no runtime exclusivity check (nothing here re-enters).
    @exclusivity(unchecked) private var localMessages: [LoopMessage] = []
    @exclusivity(unchecked) private var drainedMessages: [LoopMessage] = []
    /// Whether the messages just handled started or unpaused a transfer: the next turn must not sleep.
    private var startedTransfers = false

    init?(settings: ClientSettings, index: Int, loopCount: Int, driver kind: Driver = .poll) {
        guard let inbox = LoopInbox<LoopMessage>() else { return nil }
        let partPlan = MultiPartPlan(
            settings: settings, loopCount: loopCount, spreadsTransfers: kind == .socketAction)
        guard let core = MultiCore(settings: settings, load: load, limits: partPlan.limits(ofPart: 0)) else {
            return nil
        }
        let driver: any LoopDriver
        switch kind {
        case .poll:
            driver = PollDriver(core: core, wakeup: inbox)
        case .socketAction:
            guard let socketAction = SocketActionDriver(core: core, partPlan: partPlan, wakeup: inbox) else {
                core.cleanup()
                return nil
            }
            driver = socketAction
        }
        self.inbox = inbox
        self.driver = driver
        self.core = core
        self.name = "curlew-loop-\(index)"
        let started = Unmanaged.passRetained(self).toOpaque()
        var threadID = pthread_t()
        let result = pthread_create(
            &threadID, nil,
            { argument in
                let loop = Unmanaged<ThreadEventLoop>.fromOpaque(argument!).takeRetainedValue()
                loop.run()
                return nil
            }, started)
        guard result == 0 else {
            Unmanaged<ThreadEventLoop>.fromOpaque(started).release()
            driver.cleanup()
            return nil
        }
        pthread_detach(threadID)
    }

    var taskExecutor: (any TaskExecutor)? { self }

    var isCurrent: Bool {
        threadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    func addPoolCounts(to counts: inout [String: PoolStatistics.Counts]) -> Bool {
        guard isCurrent else { return false }
        for core in driver.cores { core.addPoolCounts(to: &counts) }
        return true
    }

    var submissionTime: UInt64 {
        isCurrent ? core.clock.now : monotonicNanoseconds()
    }

    // MARK: hand-over from any thread

    func post(_ message: LoopMessage) {
        if isCurrent {
            localMessages.append(message)
        } else if !inbox.post(message) {
            reject(message)
        }
    }

    /// What a stopped loop does with late messages: tasks keep running on the global pool, transfers fail.
    private func reject(_ message: LoopMessage) {
        switch message {
        case .job(let job):
            globalConcurrentExecutor.enqueue(job)
        case .submit(let transfer):
            load.finished()
            // The whole ending: final progress, unclaimed body streams released, a stream buffer completed.
            if case .fail(let failure) = transfer.stateMachine.rejected() {
                transfer.finish(with: .failure(transfer.error(for: .engine(failure))))
            }
        case .cancel, .unpause:
            break
        }
    }

    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            inbox.stop(resuming: continuation)
        }
    }

    /// Asks the loop to stop without waiting, for a client released without `shutdown()`.
    func requestShutdown() {
        inbox.requestStop()
    }

    // MARK: the loop thread

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        curlew_set_thread_name(name)
        while !runPostedWork() {
            // Transfers just started or unpaused need libcurl at once: no sleep before they move.
            let mayWait = !startedTransfers
            startedTransfers = false
            driver.turn(mayWait: mayWait)
            // Resumed tasks run here, on this thread, and may submit their next requests inline; those go into
            // libcurl on the next turn, without a sleep.
            processMessages()
        }
        stop()
    }

    /// Runs the work posted since the last turn; returns whether a shutdown was asked for.
    private func runPostedWork() -> Bool {
        let stopping = inbox.take(into: &drainedMessages)
        core.tick()
        processMessages()
        return stopping
    }

    /// Handles the inbox batch and then everything posted from this thread, until both are empty.
    private func processMessages() {
        while true {
            if drainedMessages.isEmpty {
                if localMessages.isEmpty { return }
                swap(&drainedMessages, &localMessages)
            }
            for message in drainedMessages where driver.carryOut(message, on: asUnownedTaskExecutor()) {
                startedTransfers = true
            }
            drainedMessages.removeAll(keepingCapacity: true)
        }
    }

    private func stop() {
        driver.beginShutdown()
        // Work posted before the stop was seen still runs; its new submissions fail, as the client is stopping.
        while true {
            _ = inbox.take(into: &drainedMessages)
            if drainedMessages.isEmpty && localMessages.isEmpty { break }
            processMessages()
        }
        driver.cleanup()
        // Closes the eventfd before the waiters resume, so `shutdown()` returns with it closed (unless a poster is
        // still writing to it this instant; that poster closes it right after).
        let (late, waiters) = inbox.markStopped()
        threadID.store(0, ordering: .relaxed)
        for message in late { reject(message) }
        for waiter in waiters { waiter.resume() }
    }
}
