import CLibCurl
import Dispatch
import Glibc

/// libcurl's socket-action API on a serial `DispatchQueue`: one `CURLM` per queue, one read and one write
/// `DispatchSource` per socket (created once, toggled with suspend/resume to match libcurl's whole interest
/// set, cancelled once), one non-repeating timer, the real `CURL_CSELECT_IN/OUT` mask, and no libcurl call from
/// inside a libcurl callback.
///
/// Descriptor lifetime, the classic crash of libcurl on Dispatch: the sources never watch libcurl's own
/// descriptor but a `dup` of it, a number only the engine knows, closed only in the sources' cancel handler.
/// libcurl's number is closed when libcurl asks (`CURLOPT_CLOSESOCKETFUNCTION`) and never otherwise, so
/// however libcurl closes its sockets (7.88 closes some with a plain `close()`: sockets that lost a connect
/// race, its resolver's socketpair), a reused number can never meet a stale source, and the engine can never
/// close a number that meanwhile belongs to someone else. See `docs/design/0001-event-loop.md`.
///
/// Every readiness event crosses libdispatch's epoll thread and a queue worker, so on Linux this loop reaches
/// well under half the thread loop's requests per second; it exists for applications built around Dispatch.
final class DispatchEventLoop: CurlEventLoop, @unchecked Sendable {
    let load = LoopLoad()
    let queue: DispatchQueue
    private let core: MultiCore
    private let timer: any DispatchSourceTimer

    // Queue only.
    /// Watches keyed by libcurl's descriptor number.
    private var sockets: [Int32: SocketWatch] = [:]
    /// Connection sockets opened through `CURLOPT_OPENSOCKETFUNCTION`: their watches outlive `CURL_POLL_REMOVE`,
    /// since libcurl registers a kept-alive connection again for its next transfer.
    private var connectionSockets: Set<Int32> = []
    /// Watches whose sources are still cancelling; shutdown completes when none are left.
    private var pendingCancellations = 0
    /// Easy handles whose socket could not be watched during the current libcurl call; failed right after it.
    private var unwatchable: [UnsafeMutableRawPointer] = []
    private var curlDeadline: UInt64?
    private var scheduledDeadline: UInt64 = .max
    private var isStopped = false
    private var shutdownWaiters: [CheckedContinuation<Void, Never>] = []

    init?(settings: ClientSettings, index: Int, loopCount: Int) {
        let limits = MultiPartPlan(settings: settings, loopCount: loopCount, spreadsTransfers: false).limits(ofPart: 0)
        guard let core = MultiCore(settings: settings, load: load, limits: limits) else { return nil }
        self.core = core
        self.queue = DispatchQueue(label: "curlew-dispatch-loop-\(index)")
        self.timer = DispatchSource.makeTimerSource(queue: queue)
        // The loop outlives its multi handle: cleanup runs on the queue from `shutdown()` with the loop retained,
        // so libcurl's callbacks during `curl_multi_cleanup` still find it.
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = curlew_multi_setopt_socket_callback(core.multi, dispatchSocketCallback)
        _ = curlew_multi_setopt_pointer(core.multi, CURLMOPT_SOCKETDATA, context)
        _ = curlew_multi_setopt_timer_callback(core.multi, dispatchTimerCallback)
        _ = curlew_multi_setopt_pointer(core.multi, CURLMOPT_TIMERDATA, context)
        core.socketOwner = SocketOwner(
            open: dispatchOpenSocketCallback, close: dispatchCloseSocketCallback, context: context)
        timer.setEventHandler { [unowned self] in self.timerFired() }
        timer.schedule(deadline: .distantFuture)
        timer.activate()
    }

    var taskExecutor: (any TaskExecutor)? { nil }

    var submissionTime: UInt64 { monotonicNanoseconds() }

    var isCurrent: Bool { false }

    func submit(_ transfer: Transfer) {
        queue.async {
            self.core.start(transfer, now: self.core.tick())
            self.rearmTimer()
        }
    }

    func cancel(_ transfer: Transfer) {
        queue.async {
            self.core.cancel(transfer)
            self.rearmTimer()
        }
    }

    func unpause(_ transfer: Transfer, _ direction: PauseDirection) {
        queue.async {
            self.core.unpause(transfer, direction)
            self.rearmTimer()
        }
    }

    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.shutdownWaiters.append(continuation)
                self.stop()
            }
        }
    }

    func requestShutdown() {
        queue.async { self.stop() }
    }

    // MARK: queue only

    private func stop() {
        if !isStopped {
            isStopped = true
            core.beginShutdown()
            core.cleanup()
            timer.cancel()
            // Watches libcurl never retired; their duplicates are closed, libcurl's numbers are left to libcurl.
            for descriptor in Array(sockets.keys) { retire(descriptor) }
        }
        finishShutdownIfClosed()
    }

    private func finishShutdownIfClosed() {
        guard isStopped, pendingCancellations == 0 else { return }
        let waiters = shutdownWaiters
        shutdownWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
    }

    /// libcurl changed its interest in a socket; the new set replaces the old one entirely. A socket that cannot
    /// be watched (descriptor exhaustion) fails its transfer once libcurl's call returns.
    fileprivate func socketInterest(_ descriptor: Int32, _ what: Int32, easy: UnsafeMutableRawPointer?) {
        if !updateWatch(descriptor, what), let easy {
            // Failing the socket callback would mark the whole multi handle dead; fail only this transfer instead.
            unwatchable.append(easy)
        }
    }

    private func updateWatch(_ descriptor: Int32, _ what: Int32) -> Bool {
        if what == CURL_POLL_REMOVE {
            guard let watch = sockets[descriptor] else { return true }
            if connectionSockets.contains(descriptor) && watch.isStill(descriptor) {
                watch.set(read: false, write: false)
            } else {
                // Not a connection libcurl keeps (or no longer the socket we watched): stop watching now.
                retire(descriptor)
            }
            return true
        }
        let wantsRead = what == CURL_POLL_IN || what == CURL_POLL_INOUT
        let wantsWrite = what == CURL_POLL_OUT || what == CURL_POLL_INOUT
        if let watch = sockets[descriptor] {
            if watch.isStill(descriptor) {
                watch.set(read: wantsRead, write: wantsWrite)
                return true
            }
            // libcurl closed the socket without telling (7.88 does, for some) and the number is back: a new socket.
            retire(descriptor)
        }
        guard wantsRead || wantsWrite else { return true }
        guard
            let watch = SocketWatch(
                descriptor: descriptor, queue: queue,
                onReady: { [unowned self] mask in
                    self.socketReady(descriptor, mask)
                })
        else { return false }
        sockets[descriptor] = watch
        watch.set(read: wantsRead, write: wantsWrite)
        return true
    }

    /// libcurl opens a connection socket through the engine.
    fileprivate func openSocket(_ address: curl_sockaddr) -> Int32 {
        let descriptor = openCloseOnExecSocket(address)
        guard descriptor >= 0 else { return -1 }
        // The number was free, so a watch still filed under it belongs to a socket libcurl closed without telling.
        retire(descriptor)
        connectionSockets.insert(descriptor)
        return descriptor
    }

    /// libcurl closes a connection socket: stop watching it, then close libcurl's number at once, as libcurl expects.
    fileprivate func closeSocket(_ descriptor: Int32) -> Int32 {
        connectionSockets.remove(descriptor)
        retire(descriptor)
        return Glibc.close(descriptor)
    }

    /// Cancels a watch's sources; its duplicate descriptor is closed once both cancellations have completed.
    private func retire(_ descriptor: Int32) {
        guard let watch = sockets.removeValue(forKey: descriptor) else { return }
        pendingCancellations += 1
        // Strong: a client released without shutdown() leaves only these handlers to keep the loop alive.
        watch.cancel {
            self.pendingCancellations -= 1
            self.finishShutdownIfClosed()
        }
    }

    fileprivate func curlTimerChanged(_ milliseconds: Int) {
        curlDeadline = milliseconds < 0 ? nil : monotonicNanoseconds() &+ UInt64(milliseconds) &* 1_000_000
        rearmTimer()
    }

    private func socketReady(_ descriptor: Int32, _ mask: Int32) {
        guard !isStopped else { return }
        var running: Int32 = 0
        core.tick()
        curl_multi_socket_action(core.multi, descriptor, mask, &running)
        afterAction()
    }

    private func timerFired() {
        guard !isStopped else { return }
        scheduledDeadline = .max
        let now = core.tick()
        if let deadline = curlDeadline, deadline <= now {
            curlDeadline = nil
            var running: Int32 = 0
            curl_multi_socket_action(core.multi, -1, 0, &running)  // -1 is CURL_SOCKET_TIMEOUT
        }
        afterAction()
    }

    private func afterAction() {
        core.tick()
        for handle in unwatchable { core.failUnwatchable(handle) }
        unwatchable.removeAll()
        core.drainCompletions()
        core.checkDeadlines(now: core.clock.now)
        rearmTimer()
    }

    /// One timer serves libcurl's timeout and the engine's deadline check; it is only rescheduled when the
    /// earliest deadline moves.
    private func rearmTimer() {
        guard !isStopped else { return }
        let deadline = min(curlDeadline ?? .max, core.nextDeadlineCheck)
        guard deadline != scheduledDeadline else { return }
        scheduledDeadline = deadline
        if deadline == .max {
            timer.schedule(deadline: .distantFuture)
        } else {
            let now = monotonicNanoseconds()
            let delay = deadline > now ? Int(clamping: deadline - now) : 0
            timer.schedule(deadline: .now() + .nanoseconds(delay))
        }
    }
}

/// The read and write sources of one socket, each created once and then only suspended or resumed. They watch
/// a duplicate of libcurl's descriptor that only this object knows and closes, after both sources have cancelled.
private final class SocketWatch {
    private let descriptor: Int32
    private let device: UInt
    private let inode: UInt
    private let queue: DispatchQueue
    private let onReady: (Int32) -> Void
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var isReadSuspended = false
    private var isWriteSuspended = false

    init?(descriptor curlDescriptor: Int32, queue: DispatchQueue, onReady: @escaping (Int32) -> Void) {
        var status = stat()
        guard fstat(curlDescriptor, &status) == 0 else { return nil }
        let duplicate = fcntl(curlDescriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { return nil }
        self.descriptor = duplicate
        self.device = UInt(status.st_dev)
        self.inode = UInt(status.st_ino)
        self.queue = queue
        self.onReady = onReady
    }

    /// Whether libcurl's number still refers to the socket this watch duplicated.
    func isStill(_ curlDescriptor: Int32) -> Bool {
        var status = stat()
        return fstat(curlDescriptor, &status) == 0 && UInt(status.st_dev) == device && UInt(status.st_ino) == inode
    }

    func set(read: Bool, write: Bool) {
        if read {
            if let readSource {
                if isReadSuspended {
                    readSource.resume()
                    isReadSuspended = false
                }
            } else {
                let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
                source.setEventHandler { [onReady] in onReady(CURL_CSELECT_IN) }
                source.activate()
                readSource = source
            }
        } else if let readSource, !isReadSuspended {
            readSource.suspend()
            isReadSuspended = true
        }
        if write {
            if let writeSource {
                if isWriteSuspended {
                    writeSource.resume()
                    isWriteSuspended = false
                }
            } else {
                let source = DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue)
                source.setEventHandler { [onReady] in onReady(CURL_CSELECT_OUT) }
                source.activate()
                writeSource = source
            }
        } else if let writeSource, !isWriteSuspended {
            writeSource.suspend()
            isWriteSuspended = true
        }
    }

    /// Cancels both sources; closes the duplicate and calls `cancelled` once both cancellations have completed.
    func cancel(then cancelled: @escaping () -> Void) {
        var sources: [(source: any DispatchSourceProtocol, isSuspended: Bool)] = []
        if let readSource { sources.append((readSource, isReadSuspended)) }
        if let writeSource { sources.append((writeSource, isWriteSuspended)) }
        readSource = nil
        writeSource = nil
        let descriptor = descriptor
        guard !sources.isEmpty else {
            _ = Glibc.close(descriptor)
            cancelled()
            return
        }
        var outstanding = sources.count
        for (source, isSuspended) in sources {
            source.setEventHandler(handler: nil)
            source.setCancelHandler {
                outstanding -= 1
                guard outstanding == 0 else { return }
                _ = Glibc.close(descriptor)
                cancelled()
            }
            source.cancel()
            // A suspended source must be resumed to deliver its cancellation (and before it may be released).
            if isSuspended { source.resume() }
        }
    }
}

// The C entry points: no captures, the loop arrives as userdata.

private let dispatchSocketCallback: curl_socket_callback = { easy, descriptor, what, userdata, _ in
    Unmanaged<DispatchEventLoop>.fromOpaque(userdata!).takeUnretainedValue().socketInterest(
        descriptor, what, easy: easy)
    return 0
}

private let dispatchTimerCallback: curl_multi_timer_callback = { _, milliseconds, userdata in
    // Never call libcurl from here: only reschedule the timer (a zero timeout fires asynchronously).
    Unmanaged<DispatchEventLoop>.fromOpaque(userdata!).takeUnretainedValue().curlTimerChanged(milliseconds)
    return 0
}

private let dispatchOpenSocketCallback: curl_opensocket_callback = { userdata, _, address in
    guard let address else { return -1 }
    return Unmanaged<DispatchEventLoop>.fromOpaque(userdata!).takeUnretainedValue().openSocket(address.pointee)
}

private let dispatchCloseSocketCallback: curl_closesocket_callback = { userdata, descriptor in
    Unmanaged<DispatchEventLoop>.fromOpaque(userdata!).takeUnretainedValue().closeSocket(descriptor)
}
