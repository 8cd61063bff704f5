import CLibCurl
import Glibc
import Synchronization

/// The default loop: a dedicated thread drives one `CURLM` with `curl_multi_perform` and `curl_multi_poll`
/// (``Driver/poll``) or with epoll and `curl_multi_socket_action` (``Driver/socketAction``), and is also a Swift
/// `TaskExecutor`.
///
/// Tasks that prefer this executor resume on the loop thread right after their transfer completes, and their
/// next request goes into libcurl on the same thread with no lock, wakeup or context switch. Other threads
/// hand work over through a mutex-protected inbox and wake the thread only when it is asleep in
/// `curl_multi_poll`. See `docs/design/0001-event-loop.md` for the measurements behind this.
///
/// The wakeup is an eventfd the loop owns and polls beside libcurl's sockets, not `curl_multi_wakeup`: a poster
/// decides to wake under the inbox lock but writes after releasing it, and by then the loop may have stopped and
/// freed its multi handle. The eventfd is closed when the loop has stopped and no such write is still under way
/// (whoever finishes last closes it), so `shutdown()` returns with every descriptor of the client closed.
final class ThreadEventLoop: CurlEventLoop, TaskExecutor, @unchecked Sendable {
    /// How the thread drives libcurl.
    enum Driver {
        /// `curl_multi_perform` every iteration, `curl_multi_poll` to sleep: cheapest with few connections, but
        /// libcurl 7.88 walks every transfer on each perform.
        case poll
        /// epoll over the sockets libcurl names (`CURLMOPT_SOCKETFUNCTION`), `curl_multi_socket_action` for those
        /// with events and for libcurl's timer (`CURLMOPT_TIMERFUNCTION`): nothing per idle connection.
        case socketAction
    }

    private enum Message {
        case submit(Transfer)
        case cancel(Transfer)
        case unpause(Transfer, PauseDirection)
        case job(UnownedJob)
    }

    private struct Inbox {
        var messages: [Message] = []
        var isSleeping = false
        var isStopping = false
        var hasStopped = false
        /// Wakeup writes decided under the lock and not yet done: the eventfd stays open until they are.
        var wakesInFlight = 0
        var wakeupClosed = false
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private enum PostOutcome {
        case queued, wake, rejected
    }

    let load = LoopLoad()
    /// The multi handle of the poll driver, and part 0 of the socket-action driver's.
    private let core: MultiCore
    /// The socket-action driver's multi handles (`MultiPartPlan`), opened as the transfers in flight need them;
    /// part 0 runs on `core`. Empty with the poll driver. Loop-only.
    @exclusivity(unchecked) private var parts: [MultiPart] = []
    private let partPlan: MultiPartPlan
    private let wakeupDescriptor: Int32
    private let driver: Driver
    /// The epoll set of the socket-action driver (libcurl's sockets and the eventfd), -1 with the poll driver.
    private let epollDescriptor: Int32
    private let inbox = Mutex(Inbox())
    private let name: String
    /// The loop thread's id while it runs, 0 before and after (so a later thread that reuses the id is not
    /// taken for the loop). Other threads only compare it with their own.
    private let threadID = Atomic<UInt>(0)

    // Loop-thread only, and touched on every request: no runtime exclusivity check (nothing here re-enters).
    @exclusivity(unchecked) private var localMessages: [Message] = []
    @exclusivity(unchecked) private var drainedMessages: [Message] = []
    private var startedTransfers = false
    /// Where each socket number stands in the epoll set (socket-action driver).
    @exclusivity(unchecked) private var sockets = EpollSocketTable()
    /// Easy handles whose socket could not be watched during the current libcurl call, with their part; failed
    /// right after it.
    private var unwatchableHandles: [(part: Int, handle: UnsafeMutableRawPointer)] = []

    init?(settings: ClientSettings, index: Int, loopCount: Int, driver: Driver = .poll) {
        let wakeupDescriptor = curlew_wakeup_create()
        guard wakeupDescriptor >= 0 else { return nil }
        var epollDescriptor: Int32 = -1
        if driver == .socketAction {
            epollDescriptor = curlew_epoll_create()
            guard epollDescriptor >= 0,
                curlew_epoll_watch(epollDescriptor, wakeupDescriptor, CURL_POLL_IN, 1, UInt32.max) == 0
            else {
                if epollDescriptor >= 0 { close(epollDescriptor) }
                close(wakeupDescriptor)
                return nil
            }
        }
        let partPlan = MultiPartPlan(
            settings: settings, loopCount: loopCount, spreadsTransfers: driver == .socketAction)
        guard let core = MultiCore(settings: settings, load: load, limits: partPlan.limits(ofPart: 0)) else {
            if epollDescriptor >= 0 { close(epollDescriptor) }
            close(wakeupDescriptor)
            return nil
        }
        self.core = core
        self.partPlan = partPlan
        self.wakeupDescriptor = wakeupDescriptor
        self.driver = driver
        self.epollDescriptor = epollDescriptor
        self.name = "curlew-loop-\(index)"
        if driver == .socketAction {
            parts = [MultiPart(core: core, index: 0, loop: self)]
        }
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
            core.cleanup()
            if epollDescriptor >= 0 { close(epollDescriptor) }
            return nil
        }
        pthread_detach(threadID)
    }

    deinit {
        // A loop whose thread never ran (or ran without stopping) still owns its eventfd.
        if !inbox.withLock({ $0.wakeupClosed }) { close(wakeupDescriptor) }
    }

    var taskExecutor: (any TaskExecutor)? { self }

    var isCurrent: Bool {
        threadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    var submissionTime: UInt64 {
        isCurrent ? core.clock.now : monotonicNanoseconds()
    }

    // MARK: hand-over from any thread

    func submit(_ transfer: Transfer) { post(.submit(transfer)) }

    func cancel(_ transfer: Transfer) { post(.cancel(transfer)) }

    func unpause(_ transfer: Transfer, _ direction: PauseDirection) { post(.unpause(transfer, direction)) }

    func enqueue(_ job: consuming ExecutorJob) { post(.job(UnownedJob(job))) }

    private func post(_ message: Message) {
        if isCurrent {
            localMessages.append(message)
            return
        }
        let outcome = inbox.withLock { inbox -> PostOutcome in
            if inbox.hasStopped { return .rejected }
            inbox.messages.append(message)
            guard inbox.isSleeping else { return .queued }
            inbox.isSleeping = false
            inbox.wakesInFlight += 1
            return .wake
        }
        switch outcome {
        case .queued: break
        case .wake: signalWakeup()
        case .rejected: reject(message)
        }
    }

    /// Writes to the eventfd for a wake decided under the lock (`wakesInFlight` counted it), then closes the
    /// eventfd if the loop stopped meanwhile and this was the last such write.
    private func signalWakeup() {
        curlew_wakeup_signal(wakeupDescriptor)
        let closeNow = inbox.withLock { inbox -> Bool in
            inbox.wakesInFlight -= 1
            return Self.takeClose(&inbox)
        }
        if closeNow { close(wakeupDescriptor) }
    }

    /// Whether the eventfd may be closed now, marking it closed if so: the loop has stopped and no write is due.
    private static func takeClose(_ inbox: inout Inbox) -> Bool {
        guard inbox.hasStopped, inbox.wakesInFlight == 0, !inbox.wakeupClosed else { return false }
        inbox.wakeupClosed = true
        return true
    }

    /// What a stopped loop does with late messages: tasks keep running on the global pool, transfers fail.
    private func reject(_ message: Message) {
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
            let shouldWake = inbox.withLock { inbox -> Bool in
                if inbox.hasStopped {
                    continuation.resume()
                    return false
                }
                inbox.shutdownWaiters.append(continuation)
                return Self.markStopping(&inbox)
            }
            if shouldWake { signalWakeup() }
        }
    }

    /// Asks the loop to stop without waiting, for a client released without `shutdown()`.
    func requestShutdown() {
        if inbox.withLock({ Self.markStopping(&$0) }) { signalWakeup() }
    }

    private static func markStopping(_ inbox: inout Inbox) -> Bool {
        inbox.isStopping = true
        let wake = inbox.isSleeping
        inbox.isSleeping = false
        if wake { inbox.wakesInFlight += 1 }
        return wake
    }

    // MARK: the loop thread

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        curlew_set_thread_name(name)
        switch driver {
        case .poll: runPolling()
        case .socketAction: runSocketActions()
        }
        stop()
    }

    private func runPolling() {
        var running: Int32 = 0
        while !runPostedWork() {
            startedTransfers = false
            // The callbacks inside perform record activity with the loop's time: read it right before.
            core.tick()
            curl_multi_perform(core.multi, &running)
            core.drainCompletions()
            core.checkDeadlines(now: core.tick())
            // Resumed tasks run here, on this thread, and may submit their next requests inline;
            // those go straight to perform, without a poll.
            processMessages()
            if startedTransfers { continue }
            waitForWork(now: core.tick())
        }
    }

    /// The socket-action iteration: wait in epoll (not at all while there is work), hand each part's libcurl the
    /// sockets with events and, once due, its timer, then finish the transfers of the parts that moved, check
    /// deadlines and run what they resumed. New transfers set their part's libcurl timer to 0
    /// (`curl_multi_add_handle`), so they start on the next iteration.
    private func runSocketActions() {
        let batch = Int(CURLEW_EPOLL_BATCH)
        let descriptors = UnsafeMutablePointer<Int32>.allocate(capacity: batch)
        let masks = UnsafeMutablePointer<Int32>.allocate(capacity: batch)
        let tags = UnsafeMutablePointer<UInt32>.allocate(capacity: batch)
        defer {
            descriptors.deallocate()
            masks.deallocate()
            tags.deallocate()
        }
        var running: Int32 = 0
        while !runPostedWork() {
            let timeout = epollTimeout(now: core.clock.now)
            startedTransfers = false
            let ready = curlew_epoll_wait(epollDescriptor, descriptors, masks, tags, timeout)
            if timeout != 0 { inbox.withLock { $0.isSleeping = false } }
            // The callbacks inside socket actions record activity with the loop's time (one clock for every
            // part): read it right before.
            let now = core.tick()
            for index in 0..<Int(max(ready, 0)) {
                let descriptor = descriptors[index]
                if descriptor == wakeupDescriptor {
                    curlew_wakeup_drain(wakeupDescriptor)
                } else if isWatchedByLibcurl(descriptor),
                    let part = parts.indices.contains(Int(tags[index])) ? parts[Int(tags[index])] : nil
                {
                    curl_multi_socket_action(part.core.multi, descriptor, masks[index], &running)
                    part.hasNews = true
                }
            }
            for part in parts where part.timerDeadline <= now {
                part.timerDeadline = .max
                curl_multi_socket_action(part.core.multi, -1, 0, &running)  // -1 is CURL_SOCKET_TIMEOUT
                part.hasNews = true
            }
            failUnwatchableHandles()
            let afterActions = core.tick()
            for part in parts {
                if part.hasNews {
                    part.hasNews = false
                    part.core.drainCompletions()
                }
                if part.core.nextDeadlineCheck <= afterActions { part.core.checkDeadlines(now: afterActions) }
            }
            // Resumed tasks run here and may submit their next requests inline.
            processMessages()
        }
    }

    /// How long the next epoll wait may sleep: not at all while work is pending or a libcurl timer is due,
    /// otherwise until the earliest of the parts' libcurl timers and the engine's deadline checks. A sleeping loop
    /// says so under the inbox lock, as with the poll driver, so posters know to signal the eventfd.
    private func epollTimeout(now: UInt64) -> Int32 {
        var deadline = UInt64.max
        for part in parts { deadline = min(deadline, part.timerDeadline, part.core.nextDeadlineCheck) }
        if startedTransfers || deadline <= now { return 0 }
        let mayWait = announceSleep()
        guard mayWait else { return 0 }
        guard deadline != .max else { return 1000 }
        // Never 0 here: the caller takes 0 to mean it did not announce a sleep.
        return Int32(clamping: max(curlMilliseconds(fromNanoseconds: deadline - now), 1))
    }

    /// Tells posters the loop is about to sleep, unless work is waiting or a stop was asked for; returns whether
    /// it may sleep. The flag is set and read under the inbox lock, so a wakeup is never lost.
    private func announceSleep() -> Bool {
        inbox.withLock { inbox -> Bool in
            guard inbox.messages.isEmpty, !inbox.isStopping else { return false }
            inbox.isSleeping = true
            return true
        }
    }

    /// libcurl names its interest in a socket (socket-action driver): the table decides, the kernel is told;
    /// returns whether the socket is watched. Which sockets rest in the set between transfers, and why:
    /// `EpollSocketTable`.
    fileprivate func socketInterest(_ descriptor: Int32, _ what: Int32, tag: Int) -> Bool {
        let operation = sockets.interest(descriptor, what, tag: UInt32(tag)) { curlew_socket_inode(descriptor) }
        guard apply(operation, to: descriptor) else {
            sockets.kernelRefused(descriptor)
            return false
        }
        return what != CURL_POLL_REMOVE
    }

    /// Carries out what the socket table decided; false when the kernel refused it.
    private func apply(_ operation: EpollSocketTable.KernelOperation, to descriptor: Int32) -> Bool {
        switch operation {
        case .none:
            return true
        case .add(let interest, let tag):
            return curlew_epoll_watch(epollDescriptor, descriptor, interest, 1, tag) == 0
        case .modify(let interest, let tag):
            return curlew_epoll_watch(epollDescriptor, descriptor, interest, 0, tag) == 0
        case .delete:
            // A socket already closed elsewhere has left the set with its close: nothing to undo.
            curlew_epoll_unwatch(epollDescriptor, descriptor)
            return true
        }
    }

    /// Whether libcurl watches `descriptor`; a resting one that reported an event leaves the epoll set.
    private func isWatchedByLibcurl(_ descriptor: Int32) -> Bool {
        let (watched, operation) = sockets.eventArrived(descriptor)
        _ = apply(operation, to: descriptor)
        return watched
    }

    /// Opens a connection socket for libcurl (close-on-exec) and records which socket it is.
    fileprivate func openSocket(_ address: curl_sockaddr) -> Int32 {
        let descriptor = openCloseOnExecSocket(address)
        guard descriptor >= 0 else { return descriptor }
        sockets.opened(descriptor, inode: curlew_socket_inode(descriptor))
        return descriptor
    }

    /// Closes a connection socket for libcurl, which closes it nowhere else; out of the epoll set first.
    fileprivate func closeSocket(_ descriptor: Int32) -> Int32 {
        _ = apply(sockets.closing(descriptor), to: descriptor)
        return close(descriptor)
    }

    /// Fails the transfers whose socket could not be watched during the libcurl calls just made.
    private func failUnwatchableHandles() {
        guard !unwatchableHandles.isEmpty else { return }
        for (part, handle) in unwatchableHandles { parts[part].core.failUnwatchable(handle) }
        unwatchableHandles.removeAll()
    }

    fileprivate func markUnwatchable(_ easy: UnsafeMutableRawPointer, part: Int) {
        unwatchableHandles.append((part, easy))
    }

    /// The part a new transfer runs in (socket-action driver), opening one if the plan says so.
    private func part(for transfer: Transfer) -> MultiCore {
        // Classified only when the loop may spread transfers (a plan of one part sends everything to part 0).
        let http1Only =
            partPlan.partCount > 1
            && (transfer.request.httpVersion ?? transfer.settings.httpVersion).isHTTP1Only(
                for: transfer.request.url)
        var index = 0
        switch partPlan.choosePart(
            http1Only: http1Only, openParts: parts.count, inFlight: { parts[$0].core.transfersInFlight })
        {
        case .part(let chosen):
            index = chosen
        case .openPart:
            index = openPart() ?? 0
        }
        transfer.multiPartIndex = index
        return parts[index].core
    }

    /// Opens the next part: a multi handle with its share of the limits, the loop's clock and load, and this
    /// loop's callbacks. Nil when libcurl cannot make one (the transfer then goes to part 0).
    private func openPart() -> Int? {
        let index = parts.count
        guard
            let core = MultiCore(
                settings: core.settings, load: load, limits: partPlan.limits(ofPart: index), clock: core.clock)
        else { return nil }
        parts.append(MultiPart(core: core, index: index, loop: self))
        return index
    }

    /// The core that runs `transfer`.
    private func core(of transfer: Transfer) -> MultiCore {
        driver == .socketAction ? parts[transfer.multiPartIndex].core : core
    }

    /// Runs the work posted since the last iteration; returns whether a shutdown was asked for.
    private func runPostedWork() -> Bool {
        let stopping = takeMessages()
        core.tick()
        processMessages()
        return stopping
    }

    /// Moves the inbox's messages to the local batch; returns whether a shutdown was asked for.
    private func takeMessages() -> Bool {
        inbox.withLock { inbox in
            swap(&drainedMessages, &inbox.messages)
            return inbox.isStopping
        }
    }

    /// Handles the inbox batch and then everything posted from this thread, until both are empty.
    private func processMessages() {
        while true {
            if drainedMessages.isEmpty {
                if localMessages.isEmpty { return }
                swap(&drainedMessages, &localMessages)
            }
            for message in drainedMessages {
                switch message {
                case .submit(let transfer):
                    let core = driver == .socketAction ? part(for: transfer) : core
                    core.start(transfer, now: core.clock.now)
                    startedTransfers = true
                case .cancel(let transfer):
                    core(of: transfer).cancel(transfer)
                case .unpause(let transfer, let direction):
                    core(of: transfer).unpause(transfer, direction)
                    // libcurl may have named a socket inside curl_easy_pause: fail its transfer before anything
                    // else can end it and hand its easy handle to another.
                    failUnwatchableHandles()
                    // The transfer has work again: perform before sleeping.
                    startedTransfers = true
                case .job(let job):
                    job.runSynchronously(on: asUnownedTaskExecutor())
                }
            }
            drainedMessages.removeAll(keepingCapacity: true)
        }
    }

    /// Sleeps in `curl_multi_poll` unless work arrived; submitters wake it through the eventfd.
    private func waitForWork(now: UInt64) {
        let mayWait = announceSleep()
        guard mayWait else { return }
        let timeout = Int32(clamping: core.millisecondsUntilDeadlineCheck(now: now) ?? 1000)
        var wakeup = curl_waitfd(fd: wakeupDescriptor, events: Int16(CURL_WAIT_POLLIN), revents: 0)
        var ready: Int32 = 0
        curl_multi_poll(core.multi, &wakeup, 1, timeout, &ready)
        if wakeup.revents != 0 { curlew_wakeup_drain(wakeupDescriptor) }
        inbox.withLock { $0.isSleeping = false }
    }

    private func stop() {
        let cores = driver == .socketAction ? parts.map(\.core) : [core]
        for core in cores { core.beginShutdown() }
        // Work posted before the stop was seen still runs; its new submissions fail, as the client is stopping.
        while true {
            _ = takeMessages()
            if drainedMessages.isEmpty && localMessages.isEmpty { break }
            processMessages()
        }
        for core in cores { core.cleanup() }
        parts.removeAll()
        // After the cleanup, which tells the socket callback to unwatch libcurl's remaining sockets.
        if epollDescriptor >= 0 { close(epollDescriptor) }
        let (waiters, late, closeNow) = inbox.withLock {
            inbox -> ([CheckedContinuation<Void, Never>], [Message], Bool) in
            inbox.hasStopped = true
            defer {
                inbox.shutdownWaiters.removeAll()
                inbox.messages.removeAll()
            }
            return (inbox.shutdownWaiters, inbox.messages, Self.takeClose(&inbox))
        }
        // Closed before the waiters resume, so `shutdown()` returns with it closed (unless a poster is still
        // writing to it this instant; that poster closes it right after).
        if closeNow { close(wakeupDescriptor) }
        threadID.store(0, ordering: .relaxed)
        for message in late { reject(message) }
        for waiter in waiters { waiter.resume() }
    }
}

/// One multi handle of the socket-action driver (see `MultiPartPlan`): its core, libcurl's timer for it, and
/// whether it had socket or timer actions this iteration. The callbacks get the part as their userdata; the loop
/// keeps its parts until the multi handles' cleanup, after which libcurl calls none.
private final class MultiPart {
    let core: MultiCore
    let index: Int
    unowned(unsafe) let loop: ThreadEventLoop
    /// When libcurl's timer expires, on the loop's clock; `.max` when it is not set.
    var timerDeadline: UInt64 = .max
    /// Whether libcurl ran for this part since its completions were last read.
    var hasNews = false

    init(core: MultiCore, index: Int, loop: ThreadEventLoop) {
        self.core = core
        self.index = index
        self.loop = loop
        let context = Unmanaged.passUnretained(self).toOpaque()
        core.socketOwner = SocketOwner(
            open: threadLoopOpenSocketCallback, close: threadLoopCloseSocketCallback,
            context: Unmanaged.passUnretained(loop).toOpaque())
        _ = curlew_multi_setopt_socket_callback(core.multi, threadLoopSocketCallback)
        _ = curlew_multi_setopt_pointer(core.multi, CURLMOPT_SOCKETDATA, context)
        _ = curlew_multi_setopt_timer_callback(core.multi, threadLoopTimerCallback)
        _ = curlew_multi_setopt_pointer(core.multi, CURLMOPT_TIMERDATA, context)
    }
}

/// Socket-action driver: keeps the epoll set in step with libcurl, each socket tagged with its part.
private let threadLoopSocketCallback: curl_socket_callback = { easy, descriptor, what, userdata, _ in
    let part = Unmanaged<MultiPart>.fromOpaque(userdata!).takeUnretainedValue()
    let watched = part.loop.socketInterest(descriptor, what, tag: part.index)
    if !watched && what != CURL_POLL_REMOVE, let easy {
        // A socket the loop cannot watch would never progress: fail its transfer once libcurl returns.
        part.loop.markUnwatchable(easy, part: part.index)
    }
    return 0
}

private let threadLoopOpenSocketCallback: curl_opensocket_callback = { userdata, _, address in
    guard let address else { return -1 }
    return Unmanaged<ThreadEventLoop>.fromOpaque(userdata!).takeUnretainedValue().openSocket(address.pointee)
}

private let threadLoopCloseSocketCallback: curl_closesocket_callback = { userdata, descriptor in
    Unmanaged<ThreadEventLoop>.fromOpaque(userdata!).takeUnretainedValue().closeSocket(descriptor)
}

/// libcurl asks to be called back in `milliseconds` (-1: never); never calls libcurl from here.
private let threadLoopTimerCallback: curl_multi_timer_callback = { _, milliseconds, userdata in
    let part = Unmanaged<MultiPart>.fromOpaque(userdata!).takeUnretainedValue()
    part.timerDeadline = milliseconds < 0 ? .max : part.core.clock.now &+ UInt64(milliseconds) &* 1_000_000
    return 0
}
