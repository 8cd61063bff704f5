import CLibCurl
import Glibc

/// epoll over the sockets libcurl names (`CURLMOPT_SOCKETFUNCTION`) and `curl_multi_socket_action` for those with
/// events and for libcurl's timer (`CURLMOPT_TIMERFUNCTION`): nothing per idle connection. Transfers spread over
/// multi handles as `MultiPartPlan` decides (one per 64 transfers on libcurl 8), opened as the transfers in flight
/// need them; all share one epoll set, each socket tagged with its part, and the loop's clock.
///
/// Which sockets rest in the epoll set between transfers, and why: `EpollSocketTable`, whose decisions this driver
/// carries out. See `docs/design/0011-socket-action-loop.md`.
///
/// Two loops drive it: the thread loop, which sleeps in its `epoll_wait` beside the inbox's eventfd, and the Dispatch
/// loop, which has no wakeup of its own (work arrives on its queue) and turns without waiting whenever a
/// `DispatchSource` on ``epollDescriptor`` reports it readable (`docs/design/0020-dispatch-loop-one-source.md`).
final class SocketActionDriver: LoopDriver {
    let primaryCore: MultiCore
    /// The thread loop's inbox; nil for a loop that never sleeps in this driver's `epoll_wait`.
    private let wakeup: (any LoopWakeup)?
    private let partPlan: MultiPartPlan
    /// The multi handles, opened as the transfers in flight need them; part 0 runs on `primaryCore`.
    @exclusivity(unchecked) private var parts: [MultiPart] = []
    /// The epoll set: libcurl's sockets and the inbox's eventfd. Readable while any of them has an event, which is
    /// how the Dispatch loop watches all its sockets with one source.
    let epollDescriptor: Int32
    /// Where each socket number stands in the epoll set.
    @exclusivity(unchecked) private var sockets = EpollSocketTable()
    /// Easy handles whose socket could not be watched during the current libcurl call, with their part; failed
    /// right after it.
    private var unwatchableHandles: [(part: Int, handle: UnsafeMutableRawPointer)] = []
    /// Set by ``beginShutdown()``: transfers submitted later go to part 0, which fails them, and open no new part
    /// that would not know the loop is stopping.
    private var isShuttingDown = false
    /// What one `epoll_wait` reports, allocated once.
    private let batch = Int(CURLEW_EPOLL_BATCH)
    private let readyDescriptors: UnsafeMutablePointer<Int32>
    private let readyMasks: UnsafeMutablePointer<Int32>
    private let readyTags: UnsafeMutablePointer<UInt32>
    /// Whether the last turn's `epoll_wait` filled its batch, so more events may be waiting.
    private(set) var lastTurnFilledBatch = false

    /// Nil when the epoll set cannot be made (descriptor exhaustion). Without a `wakeup`, ``turn(mayWait:)`` must be
    /// called with `mayWait` false.
    init?(core: MultiCore, partPlan: MultiPartPlan, wakeup: (any LoopWakeup)?) {
        let epollDescriptor = curlew_epoll_create()
        guard epollDescriptor >= 0 else { return nil }
        if let wakeup,
            curlew_epoll_watch(epollDescriptor, wakeup.wakeupDescriptor, CURL_POLL_IN, 1, UInt32.max) != 0
        {
            close(epollDescriptor)
            return nil
        }
        self.primaryCore = core
        self.wakeup = wakeup
        self.partPlan = partPlan
        self.epollDescriptor = epollDescriptor
        readyDescriptors = .allocate(capacity: batch)
        readyMasks = .allocate(capacity: batch)
        readyTags = .allocate(capacity: batch)
        parts = [MultiPart(core: core, index: 0, driver: self)]
    }

    deinit {
        readyDescriptors.deallocate()
        readyMasks.deallocate()
        readyTags.deallocate()
    }

    // MARK: transfers

    func start(_ transfer: Transfer) {
        let core = part(for: transfer)
        core.start(transfer, now: core.clock.now)
    }

    func core(of transfer: Transfer) -> MultiCore { parts[transfer.multiPartIndex].core }

    var cores: [MultiCore] { parts.map(\.core) }

    /// The part a new transfer runs in, opening one if the plan says so.
    private func part(for transfer: Transfer) -> MultiCore {
        // Classified only when the loop may spread transfers (a plan of one part sends everything to part 0).
        if isShuttingDown {
            transfer.multiPartIndex = 0
            return primaryCore
        }
        let http1Only =
            partPlan.partCount > 1
            && (transfer.request.httpVersion ?? transfer.settings.httpVersion).isHTTP1Only(
                for: transfer.request.transferURL)
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
    /// driver's callbacks. Nil when libcurl cannot make one (the transfer then goes to part 0).
    private func openPart() -> Int? {
        let index = parts.count
        guard
            let core = MultiCore(
                settings: primaryCore.settings, load: primaryCore.load, limits: partPlan.limits(ofPart: index),
                clock: primaryCore.clock)
        else { return nil }
        parts.append(MultiPart(core: core, index: index, driver: self))
        return index
    }

    // MARK: a turn

    /// Waits in epoll (not at all while there is work), hands each part's libcurl the sockets with events and, once
    /// due, its timer, then finishes the transfers of the parts that moved and checks deadlines. New transfers set
    /// their part's libcurl timer to 0 (`curl_multi_add_handle`), so they start on the next turn.
    func turn(mayWait: Bool) {
        let clock = primaryCore.clock
        let timeout = epollTimeout(now: clock.now, mayWait: mayWait)
        let ready = curlew_epoll_wait(epollDescriptor, readyDescriptors, readyMasks, readyTags, timeout)
        if timeout != 0 { wakeup?.sleepEnded() }
        lastTurnFilledBatch = Int(ready) >= batch
        var running: Int32 = 0
        // The callbacks inside socket actions record activity with the loop's time (one clock for every part): read
        // it right before.
        let now = primaryCore.tick()
        for index in 0..<Int(max(ready, 0)) {
            let descriptor = readyDescriptors[index]
            let tag = Int(readyTags[index])
            if descriptor == wakeup?.wakeupDescriptor {
                wakeup?.drainWakeup()
            } else if isWatchedByLibcurl(descriptor), parts.indices.contains(tag) {
                let part = parts[tag]
                curl_multi_socket_action(part.core.multi, descriptor, readyMasks[index], &running)
                part.hasNews = true
            }
        }
        for part in parts where part.timerDeadline <= now {
            part.timerDeadline = .max
            curl_multi_socket_action(part.core.multi, -1, 0, &running)  // -1 is CURL_SOCKET_TIMEOUT
            part.hasNews = true
        }
        failUnwatchableHandles()
        let afterActions = primaryCore.tick()
        for part in parts {
            if part.hasNews {
                part.hasNews = false
                part.core.drainCompletions()
            }
            if part.core.nextDeadlineCheck <= afterActions { part.core.checkDeadlines(now: afterActions) }
        }
    }

    /// How long the next epoll wait may sleep: not at all while work is pending or a libcurl timer is due, otherwise
    /// until the earliest of the parts' libcurl timers and the engine's deadline checks. A sleeping loop says so
    /// through the inbox, so posters know to signal the eventfd.
    private func epollTimeout(now: UInt64, mayWait: Bool) -> Int32 {
        let deadline = nextDeadline
        if !mayWait || deadline <= now { return 0 }
        guard let wakeup, wakeup.announceSleep() else { return 0 }
        guard deadline != .max else { return 1000 }
        // Never 0 here: the caller takes 0 to mean no sleep was announced.
        return Int32(clamping: max(curlMilliseconds(fromNanoseconds: deadline - now), 1))
    }

    /// The earliest of the parts' libcurl timers and the engine's deadline checks, on the loop's clock; `.max` for
    /// none. The next turn is due then, if no socket reports an event before.
    var nextDeadline: UInt64 {
        var deadline = UInt64.max
        for part in parts { deadline = min(deadline, part.timerDeadline, part.core.nextDeadlineCheck) }
        return deadline
    }

    func afterCallOutsideTurn() { failUnwatchableHandles() }

    // MARK: sockets

    /// libcurl names its interest in a socket: the table decides, the kernel is told; returns whether the socket is
    /// watched.
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

    // MARK: stopping

    func beginShutdown() {
        isShuttingDown = true
        for part in parts { part.core.beginShutdown() }
    }

    func cleanup() {
        for part in parts { part.core.cleanup() }
        parts.removeAll()
        // After the cleanup, which tells the socket callback to unwatch libcurl's remaining sockets.
        close(epollDescriptor)
    }
}

/// One multi handle of the socket-action driver (see `MultiPartPlan`): its core, libcurl's timer for it, and whether
/// it had socket or timer actions this turn. The callbacks get the part as their userdata; the driver keeps its
/// parts until the multi handles' cleanup, after which libcurl calls none.
private final class MultiPart {
    let core: MultiCore
    let index: Int
    unowned(unsafe) let driver: SocketActionDriver
    /// When libcurl's timer expires, on the loop's clock; `.max` when it is not set.
    var timerDeadline: UInt64 = .max
    /// Whether libcurl ran for this part since its completions were last read.
    var hasNews = false

    init(core: MultiCore, index: Int, driver: SocketActionDriver) {
        self.core = core
        self.index = index
        self.driver = driver
        let context = Unmanaged.passUnretained(self).toOpaque()
        core.socketOwner = SocketOwner(
            open: socketActionOpenSocketCallback, close: socketActionCloseSocketCallback,
            context: Unmanaged.passUnretained(driver).toOpaque())
        _ = curlew_multi_setopt_socket_callback(core.multi, socketActionSocketCallback)
        _ = curlew_multi_setopt_pointer(core.multi, CURLMOPT_SOCKETDATA, context)
        _ = curlew_multi_setopt_timer_callback(core.multi, socketActionTimerCallback)
        _ = curlew_multi_setopt_pointer(core.multi, CURLMOPT_TIMERDATA, context)
    }
}

// The C entry points: no captures, the part or the driver arrives as userdata.

/// Keeps the epoll set in step with libcurl, each socket tagged with its part.
private let socketActionSocketCallback: curl_socket_callback = { easy, descriptor, what, userdata, _ in
    let part = Unmanaged<MultiPart>.fromOpaque(userdata!).takeUnretainedValue()
    let watched = part.driver.socketInterest(descriptor, what, tag: part.index)
    if !watched && what != CURL_POLL_REMOVE, let easy {
        // A socket the loop cannot watch would never progress: fail its transfer once libcurl returns.
        part.driver.markUnwatchable(easy, part: part.index)
    }
    return 0
}

private let socketActionOpenSocketCallback: curl_opensocket_callback = { userdata, _, address in
    guard let address else { return -1 }
    return Unmanaged<SocketActionDriver>.fromOpaque(userdata!).takeUnretainedValue().openSocket(address.pointee)
}

private let socketActionCloseSocketCallback: curl_closesocket_callback = { userdata, descriptor in
    Unmanaged<SocketActionDriver>.fromOpaque(userdata!).takeUnretainedValue().closeSocket(descriptor)
}

/// libcurl asks to be called back in `milliseconds` (-1: never); never calls libcurl from here.
private let socketActionTimerCallback: curl_multi_timer_callback = { _, milliseconds, userdata in
    let part = Unmanaged<MultiPart>.fromOpaque(userdata!).takeUnretainedValue()
    part.timerDeadline = milliseconds < 0 ? .max : part.core.clock.now &+ UInt64(milliseconds) &* 1_000_000
    return 0
}
