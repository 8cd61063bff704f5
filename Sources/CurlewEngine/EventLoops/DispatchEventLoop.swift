import CLibCurl
import Dispatch
import Glibc

/// libcurl's socket-action API on a serial `DispatchQueue`: one `CURLM` per queue, one read and one write
/// `DispatchSource` per socket (created once, toggled with suspend/resume to match libcurl's whole interest
/// set, cancelled once), one non-repeating timer, and connection sockets opened and closed by the engine, closed
/// only after their sources have finished cancelling, so a reused descriptor number can never meet a stale source.
///
/// libcurl also registers descriptors it did not open through the engine (the threaded resolver's socketpair)
/// and closes those itself right after `CURL_POLL_REMOVE`: their sources are cancelled at once and never
/// closed by the engine, and a new registration of that number waits until the old sources are cancelled.
///
/// Every readiness event crosses libdispatch's epoll thread and a queue worker, so on Linux this loop reaches
/// about 0.4 × the thread loop's requests per second (`docs/design/0001-event-loop.md`); it exists for
/// applications built around Dispatch.
final class DispatchEventLoop: CurlEventLoop, @unchecked Sendable {
    let load = LoopLoad()
    let queue: DispatchQueue
    private let core: MultiCore
    private let timer: any DispatchSourceTimer

    // Queue only.
    private var sockets: [Int32: SocketWatch] = [:]
    /// Connection sockets the engine opened (`CURLOPT_OPENSOCKETFUNCTION`) and will close.
    private var ownedSockets: Set<Int32> = []
    /// Descriptors whose sources are still cancelling: what to do once they are gone.
    private var cancelling: [Int32: AfterCancel] = [:]
    private var curlDeadline: UInt64?
    private var scheduledDeadline: UInt64 = .max
    private var isStopped = false
    private var shutdownWaiters: [CheckedContinuation<Void, Never>] = []

    init?(settings: ClientSettings, index: Int, loopCount: Int) {
        guard let core = MultiCore(settings: settings, load: load, loopCount: loopCount) else { return nil }
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

    var isCurrent: Bool { false }

    func submit(_ transfer: Transfer) {
        queue.async {
            self.core.start(transfer, now: monotonicNanoseconds())
            self.rearmTimer()
        }
    }

    func cancel(_ transfer: Transfer) {
        queue.async {
            self.core.cancel(transfer)
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
            // Sources of sockets libcurl never closed (it closes all in cleanup, but never trust that);
            // descriptors the engine did not open are only unwatched, never closed.
            for descriptor in Array(sockets.keys) {
                retire(descriptor, close: ownedSockets.contains(descriptor))
            }
        }
        finishShutdownIfClosed()
    }

    private func finishShutdownIfClosed() {
        guard isStopped, cancelling.isEmpty else { return }
        let waiters = shutdownWaiters
        shutdownWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
    }

    /// libcurl changed its interest in a socket; the new set replaces the old one entirely.
    fileprivate func socketInterest(_ descriptor: Int32, _ what: Int32) {
        let wantsRead = what == CURL_POLL_IN || what == CURL_POLL_INOUT
        let wantsWrite = what == CURL_POLL_OUT || what == CURL_POLL_INOUT
        if what == CURL_POLL_REMOVE, !ownedSockets.contains(descriptor) {
            // Not ours: libcurl closes it itself, possibly right after this callback.
            retire(descriptor, close: false)
            return
        }
        if var pending = cancelling[descriptor] {
            // The old sources of this number are still cancelling; start watching once they are gone.
            pending.interest = (wantsRead, wantsWrite)
            cancelling[descriptor] = pending
        } else if let watch = sockets[descriptor] {
            watch.set(read: wantsRead, write: wantsWrite)
        } else if wantsRead || wantsWrite {
            watch(descriptor, read: wantsRead, write: wantsWrite)
        }
    }

    private func watch(_ descriptor: Int32, read: Bool, write: Bool) {
        let watch = SocketWatch(descriptor: descriptor, queue: queue) { [unowned self] mask in
            self.socketReady(descriptor, mask)
        }
        sockets[descriptor] = watch
        watch.set(read: read, write: write)
    }

    /// libcurl opens a connection socket: the engine creates it, so it knows the engine must close it.
    fileprivate func openSocket(_ address: curl_sockaddr) -> Int32 {
        let descriptor = socket(address.family, address.socktype | Int32(SOCK_CLOEXEC.rawValue), address.protocol)
        if descriptor >= 0 { ownedSockets.insert(descriptor) }
        return descriptor
    }

    /// libcurl wants a connection socket closed: its sources are cancelled first, the descriptor closed after.
    fileprivate func closeSocket(_ descriptor: Int32) {
        ownedSockets.remove(descriptor)
        if sockets[descriptor] != nil {
            retire(descriptor, close: true)
        } else if var pending = cancelling[descriptor] {
            pending.close = true
            pending.interest = nil
            cancelling[descriptor] = pending
        } else {
            _ = Glibc.close(descriptor)
        }
    }

    /// Cancels a descriptor's sources; once both have cancelled, closes it (if asked) or watches it again (if
    /// libcurl registered the number anew meanwhile).
    private func retire(_ descriptor: Int32, close: Bool) {
        guard let watch = sockets.removeValue(forKey: descriptor) else { return }
        cancelling[descriptor] = AfterCancel(close: close, interest: nil)
        watch.cancel { [unowned self] in
            guard let pending = self.cancelling.removeValue(forKey: descriptor) else { return }
            if pending.close {
                _ = Glibc.close(descriptor)
            } else if let interest = pending.interest, !self.isStopped {
                self.watch(descriptor, read: interest.read, write: interest.write)
            }
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
        curl_multi_socket_action(core.multi, descriptor, mask, &running)
        afterAction()
    }

    private func timerFired() {
        guard !isStopped else { return }
        scheduledDeadline = .max
        let now = monotonicNanoseconds()
        if let deadline = curlDeadline, deadline <= now {
            curlDeadline = nil
            var running: Int32 = 0
            curl_multi_socket_action(core.multi, -1, 0, &running)  // -1 is CURL_SOCKET_TIMEOUT
        }
        afterAction()
    }

    private func afterAction() {
        core.drainCompletions()
        core.checkDeadlines(now: monotonicNanoseconds())
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

/// The read and write sources of one socket, each created once and then only suspended or resumed.
private final class SocketWatch {
    private let descriptor: Int32
    private let queue: DispatchQueue
    private let onReady: (Int32) -> Void
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var isReadSuspended = false
    private var isWriteSuspended = false

    init(descriptor: Int32, queue: DispatchQueue, onReady: @escaping (Int32) -> Void) {
        self.descriptor = descriptor
        self.queue = queue
        self.onReady = onReady
    }

    func set(read: Bool, write: Bool) {
        if read {
            if let readSource {
                if isReadSuspended { readSource.resume(); isReadSuspended = false }
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
                if isWriteSuspended { writeSource.resume(); isWriteSuspended = false }
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

    /// Cancels both sources; `cancelled` runs once both cancellations have completed.
    func cancel(then cancelled: @escaping () -> Void) {
        var sources: [(source: any DispatchSourceProtocol, isSuspended: Bool)] = []
        if let readSource { sources.append((readSource, isReadSuspended)) }
        if let writeSource { sources.append((writeSource, isWriteSuspended)) }
        readSource = nil
        writeSource = nil
        guard !sources.isEmpty else {
            cancelled()
            return
        }
        var outstanding = sources.count
        for (source, isSuspended) in sources {
            source.setEventHandler(handler: nil)
            source.setCancelHandler {
                outstanding -= 1
                if outstanding == 0 { cancelled() }
            }
            source.cancel()
            // A suspended source must be resumed to deliver its cancellation (and before it may be released).
            if isSuspended { source.resume() }
        }
    }
}

/// What to do with a descriptor once its old sources have cancelled.
private struct AfterCancel {
    var close: Bool
    var interest: (read: Bool, write: Bool)?
}

// The C entry points: no captures, the loop arrives as userdata.

private let dispatchSocketCallback: curl_socket_callback = { _, descriptor, what, userdata, _ in
    Unmanaged<DispatchEventLoop>.fromOpaque(userdata!).takeUnretainedValue().socketInterest(descriptor, what)
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
    return 0
}
