/// How a loop thread drives libcurl: the multi handles it runs transfers on and one turn of letting them move.
///
/// `ThreadEventLoop` owns what every driver shares (the thread, the executor, the inbox, the order of a turn and of a
/// stop); a driver owns libcurl's multi handles and how the thread waits for their sockets. Two exist: ``PollDriver``
/// (`curl_multi_perform` and `curl_multi_poll` on one multi handle) and ``SocketActionDriver`` (epoll and
/// `curl_multi_socket_action` on a multi handle per `MultiPartPlan` part). Every method runs on the loop thread.
protocol LoopDriver: AnyObject {
    /// The multi handle whose clock is the loop's (every part shares it).
    var primaryCore: MultiCore { get }

    /// Starts `transfer` on the multi handle the driver chooses for it.
    func start(_ transfer: Transfer)

    /// Every multi handle the driver runs now (for snapshots).
    var cores: [MultiCore] { get }

    /// The multi handle `transfer` was started on.
    func core(of transfer: Transfer) -> MultiCore

    /// One turn: sleeps until a socket, libcurl's timer, a deadline or the inbox's wakeup is due (only if `mayWait`
    /// and the inbox agrees to the sleep), lets libcurl move, then finishes the transfers that ended and checks
    /// deadlines.
    func turn(mayWait: Bool)

    /// Runs after a libcurl call made outside a turn (`curl_easy_pause`), which may have named a socket: fails the
    /// transfers whose socket could not be watched before anything else can end them and reuse their easy handles.
    func afterCallOutsideTurn()

    /// Fails every running transfer and marks the multi handles as stopping, so new transfers fail.
    func beginShutdown()

    /// Releases libcurl's multi handles and the driver's own descriptors; libcurl calls nothing afterwards.
    func cleanup()
}

/// What a driver needs from its loop's inbox to sleep: an eventfd to watch beside libcurl's sockets, and the
/// announcement that lets posters know a write to it is needed (``LoopInbox``).
protocol LoopWakeup: AnyObject {
    /// Readable when a poster woke the loop.
    var wakeupDescriptor: Int32 { get }
    /// Says the loop is about to sleep; false when work is waiting or a stop was asked for (then it must not).
    func announceSleep() -> Bool
    /// The loop is awake again after an announced sleep.
    func sleepEnded()
    /// Consumes the eventfd's pending wakeups.
    func drainWakeup()
}

extension LoopDriver {
    /// Carries out one message posted to a loop that runs this driver, with `executor` the loop's own; returns
    /// whether it started or unpaused a transfer, so libcurl must move before the loop waits again. Both loops
    /// handle their messages here.
    func carryOut(_ message: LoopMessage, on executor: UnownedTaskExecutor) -> Bool {
        switch message {
        case .submit(let transfer):
            start(transfer)
            return true
        case .cancel(let transfer):
            core(of: transfer).cancel(transfer)
            return false
        case .unpause(let transfer, let direction):
            core(of: transfer).unpause(transfer, direction)
            afterCallOutsideTurn()
            // The transfer has work again: let libcurl move before sleeping.
            return true
        case .job(let job):
            job.runSynchronously(on: executor)
            return false
        }
    }
}
