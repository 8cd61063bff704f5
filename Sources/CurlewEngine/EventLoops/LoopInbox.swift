import CLibCurl
import Glibc
import Synchronization

/// Work handed to a loop thread.
enum LoopMessage {
    case submit(Transfer)
    case cancel(Transfer)
    case unpause(Transfer, PauseDirection)
    case job(UnownedJob)
}

/// A loop whose work, from any thread, arrives as ``LoopMessage``s it carries out in order on its own thread or queue.
protocol MessageLoop: CurlEventLoop, TaskExecutor {
    /// Hands `message` to the loop; from the loop itself it runs once the current work is done, never inside it.
    func post(_ message: LoopMessage)
}

extension MessageLoop {
    func submit(_ transfer: Transfer) { post(.submit(transfer)) }

    func cancel(_ transfer: Transfer) { post(.cancel(transfer)) }

    func unpause(_ transfer: Transfer, _ direction: PauseDirection) { post(.unpause(transfer, direction)) }

    func enqueue(_ job: consuming ExecutorJob) { post(.job(UnownedJob(job))) }
}

/// How other threads hand work to a loop thread and wake it: a mutex-protected message list, and an eventfd the loop
/// watches beside libcurl's sockets, written only when the loop said it was going to sleep.
///
/// The wakeup is the inbox's own eventfd, not `curl_multi_wakeup`: a poster decides to wake under the lock but writes
/// after releasing it, and by then the loop may have stopped and freed its multi handle. The eventfd is closed when
/// the loop has stopped and no such write is still under way (whoever finishes last closes it), so a client's
/// `shutdown()` returns with every descriptor it opened closed.
///
/// Generic over the message so its protocol is tested on its own (`LoopInboxTests`); the loop's is ``LoopMessage``.
final class LoopInbox<Message: Sendable>: LoopWakeup, Sendable {
    private struct State {
        var messages: [Message] = []
        var isSleeping = false
        var isStopping = false
        var hasStopped = false
        /// Wakeup writes decided under the lock and not yet done: the eventfd stays open until they are.
        var wakesInFlight = 0
        var wakeupClosed = false
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []

        /// Whether the eventfd may be closed now, marking it closed if so: the loop has stopped and no write is due.
        mutating func takeClose() -> Bool {
            guard hasStopped, wakesInFlight == 0, !wakeupClosed else { return false }
            wakeupClosed = true
            return true
        }

        /// Asks the loop to stop; returns whether it must be woken for that.
        mutating func markStopping() -> Bool {
            isStopping = true
            let wake = isSleeping
            isSleeping = false
            if wake { wakesInFlight += 1 }
            return wake
        }
    }

    private enum PostOutcome { case queued, wake, rejected }

    /// The eventfd the loop's driver watches for input (readable when a poster woke the loop).
    let wakeupDescriptor: Int32
    private let state = Mutex(State())

    /// Nil when no eventfd can be made (descriptor exhaustion).
    init?() {
        let descriptor = curlew_wakeup_create()
        guard descriptor >= 0 else { return nil }
        wakeupDescriptor = descriptor
    }

    deinit {
        // An inbox whose loop never ran (or ran without stopping) still owns its eventfd.
        if !state.withLock({ $0.wakeupClosed }) { close(wakeupDescriptor) }
    }

    // MARK: any thread

    /// Queues `message` for the loop, waking it if it sleeps; false once the loop has stopped (the caller then
    /// rejects the message itself).
    func post(_ message: Message) -> Bool {
        let outcome = state.withLock { state -> PostOutcome in
            if state.hasStopped { return .rejected }
            state.messages.append(message)
            guard state.isSleeping else { return .queued }
            state.isSleeping = false
            state.wakesInFlight += 1
            return .wake
        }
        switch outcome {
        case .queued: return true
        case .wake:
            signalWakeup()
            return true
        case .rejected: return false
        }
    }

    /// Asks the loop to stop and resumes `waiter` once it has (at once if it already has).
    func stop(resuming waiter: CheckedContinuation<Void, Never>) {
        let shouldWake = state.withLock { state -> Bool in
            if state.hasStopped {
                waiter.resume()
                return false
            }
            state.shutdownWaiters.append(waiter)
            return state.markStopping()
        }
        if shouldWake { signalWakeup() }
    }

    /// Asks the loop to stop without waiting for it.
    func requestStop() {
        if state.withLock({ $0.markStopping() }) { signalWakeup() }
    }

    /// Writes to the eventfd for a wake decided under the lock (`wakesInFlight` counted it), then closes the eventfd
    /// if the loop stopped meanwhile and this was the last such write.
    private func signalWakeup() {
        curlew_wakeup_signal(wakeupDescriptor)
        let closeNow = state.withLock { state -> Bool in
            state.wakesInFlight -= 1
            return state.takeClose()
        }
        if closeNow { close(wakeupDescriptor) }
    }

    // MARK: the loop thread

    /// Moves the posted messages into `batch` (which must be empty); returns whether a stop was asked for.
    func take(into batch: inout [Message]) -> Bool {
        state.withLock { state in
            swap(&batch, &state.messages)
            return state.isStopping
        }
    }

    /// Tells posters the loop is about to sleep, unless work is waiting or a stop was asked for; returns whether it
    /// may sleep. The flag is set and read under the lock, so a wakeup is never lost.
    func announceSleep() -> Bool {
        state.withLock { state -> Bool in
            guard state.messages.isEmpty, !state.isStopping else { return false }
            state.isSleeping = true
            return true
        }
    }

    /// The loop is awake again after an announced sleep: posters need not signal.
    func sleepEnded() {
        state.withLock { $0.isSleeping = false }
    }

    /// Consumes the eventfd's pending wakeups.
    func drainWakeup() {
        curlew_wakeup_drain(wakeupDescriptor)
    }

    /// The loop has stopped: later posts are rejected. Returns the messages that arrived too late and the shutdown
    /// waiters to resume; closes the eventfd first unless a poster is still writing to it (that poster then does).
    func markStopped() -> (late: [Message], waiters: [CheckedContinuation<Void, Never>]) {
        let (late, waiters, closeNow) = state.withLock { state in
            state.hasStopped = true
            defer {
                state.shutdownWaiters.removeAll()
                state.messages.removeAll()
            }
            return (state.messages, state.shutdownWaiters, state.takeClose())
        }
        if closeNow { close(wakeupDescriptor) }
        return (late, waiters)
    }
}
