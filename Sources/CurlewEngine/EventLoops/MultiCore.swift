import CLibCurl
import Glibc
import Synchronization

/// What both event loops share: one `CURLM`, its pool of easy handles, starting and finishing transfers,
/// and the engine's own deadline checks. Every method runs on the owning loop, never inside a libcurl callback.
final class MultiCore {
    let multi: UnsafeMutableRawPointer
    let settings: ClientSettings
    /// Transfers submitted to this loop and not yet resolved; read by the client to balance loops.
    let load: LoopLoad
    /// The loop's time, read once per loop iteration (``tick()``) and shared with libcurl's callbacks, which
    /// record activity for the idle timeout without reading the clock for every chunk and header line.
    let clock: LoopClock
    /// The sockets of this loop's connections, for the check of reused HTTP/1 connections.
    let connections = ConnectionRegistry()
    /// Every connection this multi handle opened, and the totals per origin, for ``PoolStatistics``.
    let connectionBook = ConnectionBook()
    /// Loop-only and used twice per request: no runtime exclusivity check.
    @exclusivity(unchecked) private var pool: [EasyHandle] = []
    private(set) var isShuttingDown = false
    /// Set by loops that open and close connection sockets themselves (the Dispatch loop).
    var socketOwner: SocketOwner?

    /// Every transfer in the multi handle, keyed by its earliest connection, idle or total deadline as last checked
    /// (libcurl 7.88 has no `curl_multi_get_handles`). The earliest is read in O(1); nothing walks the transfers.
    @exclusivity(unchecked) private var running = DeadlineHeap<Transfer>()
    /// The handles (and results) of one batch of completion messages; kept to reuse its storage.
    @exclusivity(unchecked) private var completed: [(UnsafeMutableRawPointer, CURLcode)] = []

    /// How many transfers are in the multi handle.
    var transfersInFlight: Int { running.count }

    /// No connection, idle or total deadline falls before this.
    var nextDeadlineCheck: UInt64 { running.earliestDeadline }

    /// A multi handle with `limits`. Several cores of one loop share its `load` and `clock`.
    init?(settings: ClientSettings, load: LoopLoad, limits: MultiLimits, clock: LoopClock = LoopClock()) {
        guard let multi = curl_multi_init() else { return nil }
        self.multi = multi
        self.settings = settings
        self.load = load
        self.clock = clock
        _ = curlew_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, limits.hostConnections)
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, limits.totalConnections)
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, limits.cachedConnections)
        _ = curlew_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, limits.concurrentStreams)
    }

    /// Reads the clock for this iteration of the loop.
    @discardableResult
    func tick() -> UInt64 {
        clock.now = monotonicNanoseconds()
        return clock.now
    }

    // MARK: starting

    /// Starts a transfer: configures a pooled easy handle and adds it to the multi handle.
    func start(_ transfer: Transfer, now loopTime: UInt64) {
        // The loop reads its clock once per iteration, which can be a moment before another thread submitted.
        let now = max(loopTime, transfer.submittedAt)
        switch transfer.stateMachine.submitted(now: now, loopIsShuttingDown: isShuttingDown) {
        case .ignore:
            break
        case .fail(let failure):
            let error = transfer.error(for: .engine(failure))
            if repeatAfterFailedFirstRequest(transfer, error, mayContinue: !TransferRepeater.endsRepeat(after: error)) {
                return
            }
            resume(transfer, throwing: error)
        case .start:
            guard let easy = pool.popLast() ?? EasyHandle.make(share: settings.share) else {
                failStart(transfer, .noEasyHandle)
                return
            }
            transfer.easy = easy
            transfer.core = self
            let userdata = Unmanaged.passRetained(transfer).toOpaque()
            if let failure = transfer.configure(easy, userdata: userdata, now: now) {
                Unmanaged<Transfer>.fromOpaque(userdata).release()
                failStart(transfer, failure)
                return
            }
            installSocketCallbacks(easy)
            let code = curl_multi_add_handle(multi, easy.raw)
            guard code == CURLM_OK else {
                Unmanaged<Transfer>.fromOpaque(userdata).release()
                failStart(transfer, .multiRefused(Int(code.rawValue)))
                return
            }
            transfer.libcurlHasTheRequest = true
            link(transfer)
        }
    }

    /// A repeated transfer whose first request failed before it started (a total timeout of zero, a cancellation,
    /// a shutdown): `next` hears of it like of any other outcome, and the repeat goes on with the request it chooses
    /// unless the failure ends the repeat. Returns whether the repeat goes on.
    private func repeatAfterFailedFirstRequest(_ transfer: Transfer, _ error: any Error, mayContinue: Bool) -> Bool {
        guard let repeater = transfer.repeater else { return false }
        guard mayContinue, let easy = pool.popLast() ?? EasyHandle.make(share: settings.share) else {
            _ = repeater.next(.failure(error))
            return false
        }
        transfer.easy = easy
        transfer.core = self
        // The handle comes from the pool, configured (if at all) by another transfer: no request of this one may take
        // the path that re-adds a handle as this transfer left it.
        transfer.requestIndex = -1
        return repeatAfterFailureBeforeLibcurl(transfer, repeater: repeater, error: error, mayContinue: mayContinue)
    }

    /// Goes on with a repeated transfer after a request that failed before libcurl had it: `next` hears of the
    /// failure and chooses the next request on the transfer's handle. Returns whether the repeat goes on; when it
    /// does not, the transfer is recycled and its caller is still to be resumed.
    private func repeatAfterFailureBeforeLibcurl(
        _ transfer: Transfer, repeater: TransferRepeater, error: any Error, mayContinue: Bool
    ) -> Bool {
        // libcurl's reference for the next request, given back if there is none.
        let reference = Unmanaged.passRetained(transfer)
        if repeatNext(transfer, repeater: repeater, after: .failure(error), mayContinue: mayContinue) {
            return true
        }
        reference.release()
        recycle(transfer)
        return false
    }

    /// Sockets are opened close-on-exec, or by the loop when it owns them (the Dispatch loop). Set after every
    /// configuration: `curl_easy_reset` clears them.
    private func installSocketCallbacks(_ easy: EasyHandle) {
        if let socketOwner {
            _ = curlew_easy_setopt_opensocket_callback(easy.raw, socketOwner.open)
            _ = easy.set(CURLOPT_OPENSOCKETDATA, pointer: socketOwner.context)
            _ = curlew_easy_setopt_closesocket_callback(easy.raw, socketOwner.close)
            _ = easy.set(CURLOPT_CLOSESOCKETDATA, pointer: socketOwner.context)
        } else {
            _ = curlew_easy_setopt_opensocket_callback(easy.raw, closeOnExecOpenSocketCallback)
        }
    }

    private func failStart(_ transfer: Transfer, _ failure: TransferStateMachine.Failure) {
        guard transfer.stateMachine.startFailed() == .finish else { return }
        let error = transfer.error(for: .engine(failure))
        if let repeater = transfer.repeater, transfer.easy != nil {
            if repeatAfterFailureBeforeLibcurl(transfer, repeater: repeater, error: error, mayContinue: true) { return }
        } else {
            recycle(transfer)
        }
        resume(transfer, throwing: error)
    }

    // MARK: finishing

    /// Reads libcurl's completion messages and resumes the callers. Call after every perform or socket action.
    ///
    /// Every message is read before any handle leaves the multi handle: libcurl 7.88's `curl_multi_remove_handle`
    /// walks the messages still queued, so removing each handle as its message is read costs the square of the
    /// transfers that finished together (at 4,000 connections, 9 % of raw libcurl's CPU).
    func drainCompletions() {
        deliverWaitingHeads()
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            completed.append((handle, curlew_msg_result(message)))
        }
        guard !completed.isEmpty else { return }
        for (handle, result) in completed { finish(handle, result: result) }
        completed.removeAll(keepingCapacity: true)
    }

    /// Ends the transfer of a handle libcurl reported done (or retries it on a fresh connection).
    private func finish(_ handle: UnsafeMutableRawPointer, result reported: CURLcode) {
        var userdata: UnsafeMutableRawPointer?
        guard curlew_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &userdata) == CURLE_OK, let userdata else {
            // Not ours; never trap on a surprise, just detach it.
            curl_multi_remove_handle(multi, handle)
            return
        }
        let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
        curl_multi_remove_handle(multi, handle)
        guard let easy = transfer.easy else { return }
        // libcurl's framing said the body was whole; its content coding may still have ended early.
        let result = reported == CURLE_OK && transfer.bodyIncompleteAtEnd() ? CURLE_WRITE_ERROR : reported
        let facts = result == CURLE_OK ? nil : transfer.completionFacts(result, easy: easy)
        switch transfer.stateMachine.curlCompleted(failure: facts, now: clock.now) {
        case .ignore:
            // A resolved transfer has already left the multi handle and given up libcurl's reference.
            return
        case .retryOnFreshConnection:
            retryOnFreshConnection(transfer, easy: easy, after: result)
        case .finish:
            if let repeater = transfer.repeater {
                let outcome: Result<RepeatedResponse, any Error> =
                    result == CURLE_OK
                    ? .success(transfer.makeRepeatedResponse(easy)) : .failure(transfer.error(for: .curl(result)))
                if repeatNext(transfer, repeater: repeater, after: outcome, mayContinue: true) { return }
            }
            let outcome: Result<CurlewResponse, any Error> =
                result == CURLE_OK
                ? .success(transfer.makeResponse(easy))
                : .failure(transfer.error(for: .curl(result)))
            recycle(transfer)
            resume(transfer, with: outcome)
            Unmanaged.passUnretained(transfer).release()
        }
    }

    /// Sends a request once more on a new connection: the same easy handle and options (libcurl keeps them when a
    /// handle leaves the multi handle), the body rewound, a fresh connection forced. The handle keeps libcurl's
    /// reference and its place in the running list.
    private func retryOnFreshConnection(_ transfer: Transfer, easy: EasyHandle, after result: CURLcode) {
        connectionBook.retriedOnFreshConnection(origin: transfer.originKey)
        guard transfer.prepareRetry(easy), curl_multi_add_handle(multi, easy.raw) == CURLM_OK else {
            failRetry(transfer, after: result)
            return
        }
        deadlineMayBeEarlier(for: transfer)
    }

    /// The machine of a running `transfer` set a deadline that may come before the one its place in the heap holds
    /// (a later request's connection deadline): the heap takes it, so the loop wakes for it.
    func deadlineMayBeEarlier(for transfer: Transfer) {
        running.lower(transfer, to: transfer.stateMachine.nextDeadline)
    }

    /// The request could not go out again: it fails with the first attempt's error.
    private func failRetry(_ transfer: Transfer, after result: CURLcode) {
        guard transfer.stateMachine.startFailed() == .finish else { return }
        let error = transfer.error(for: .curl(result))
        if let repeater = transfer.repeater, transfer.easy != nil,
            repeatNext(transfer, repeater: repeater, after: .failure(error), mayContinue: true)
        {
            return
        }
        recycle(transfer)
        resume(transfer, throwing: error)
        Unmanaged.passUnretained(transfer).release()
    }

    /// The caller's task was cancelled.
    func cancel(_ transfer: Transfer) {
        apply(transfer.stateMachine.cancelRequested(), to: transfer)
    }

    private func apply(_ action: TransferStateMachine.StopAction, to transfer: Transfer) {
        guard case .removeAndFail(let failure) = action else { return }
        removeAndFail(transfer, failure)
    }

    private func removeAndFail(_ transfer: Transfer, _ failure: TransferStateMachine.Failure) {
        guard let easy = transfer.easy else { return }
        let error = transfer.error(for: .engine(failure))
        curl_multi_remove_handle(multi, easy.raw)
        if let repeater = transfer.repeater,
            repeatNext(
                transfer, repeater: repeater, after: .failure(error),
                mayContinue: !TransferRepeater.endsRepeat(after: error))
        {
            return
        }
        Unmanaged.passUnretained(transfer).release()
        recycle(transfer)
        resume(transfer, throwing: error)
    }

    /// A repeated transfer's request ended with `outcome` and its handle is out of the multi handle: the repeater
    /// chooses the next request, which goes out on the same transfer and handle, keeping libcurl's reference.
    /// A request that cannot start is an outcome too, so the repeater sees every request it chose.
    ///
    /// - Returns: false when the repeat is over (the repeater stopped, the outcome ends it or the loop is shutting
    ///   down); the caller then ends the transfer.
    private func repeatNext(
        _ transfer: Transfer, repeater: TransferRepeater, after outcome: Result<RepeatedResponse, any Error>,
        mayContinue: Bool
    ) -> Bool {
        var outcome = outcome
        while let index = repeater.next(outcome), mayContinue, !isShuttingDown {
            // The transfer's handle as it is now, read on every pass: a configuration that failed on the last pass
            // reset the handle and cleared its plain-GET mark, and a copy kept from before would send this request on
            // a handle configured part-way.
            guard let easy = transfer.easy else { return false }
            // The request the transfer already carries needs no copy out of the list (a copy retains every field).
            let isTheSameRequest = repeater.requests.indexNamesTheSameRequest && index == transfer.requestIndex
            var request: CurlewRequest?
            if !isTheSameRequest {
                guard let next = repeater.requests.request(index) else { return false }
                request = next
            }
            let userdata = Unmanaged.passUnretained(transfer).toOpaque()
            let now = monotonicNanoseconds()
            if let failure = transfer.prepareRepeat(
                of: index, request: request, easy: easy, userdata: userdata, now: now)
            {
                _ = transfer.stateMachine.startFailed()
                outcome = .failure(transfer.error(for: .engine(failure)))
                continue
            }
            installSocketCallbacks(easy)
            let code = curl_multi_add_handle(multi, easy.raw)
            guard code == CURLM_OK else {
                _ = transfer.stateMachine.startFailed()
                outcome = .failure(transfer.error(for: .engine(.multiRefused(Int(code.rawValue)))))
                continue
            }
            transfer.libcurlHasTheRequest = true
            if transfer.isLinked {
                running.lower(transfer, to: transfer.stateMachine.nextDeadline)
            } else {
                link(transfer)
            }
            return true
        }
        return false
    }

    /// Returns the easy handle to the pool. A handle configured for a plain GET keeps its options (and pointers to
    /// this transfer, which libcurl does not use while the handle is out of the multi handle; the next transfer
    /// replaces them before it is added); any other is reset, so nothing of this transfer survives into the next.
    private func recycle(_ transfer: Transfer) {
        unlink(transfer)
        transfer.captureFinalProgress()
        if let easy = transfer.easy {
            if !easy.isConfiguredForPlainGET { easy.reset() }
            pool.append(easy)
            transfer.easy = nil
        }
        transfer.releaseTransferResources()
    }

    private func resume(_ transfer: Transfer, throwing error: any Error) {
        resume(transfer, with: .failure(error))
    }

    private func resume(_ transfer: Transfer, with outcome: Result<CurlewResponse, any Error>) {
        load.finished()
        transfer.finish(with: outcome)
    }

    /// Resumes a transfer a callback paused, once its producer has bytes or its consumer has room again.
    /// libcurl may call the read or write callback from inside `curl_easy_pause`; both are ready for that.
    func unpause(_ transfer: Transfer, _ direction: PauseDirection) {
        guard transfer.isLinked, let easy = transfer.easy else { return }
        let action = transfer.stateMachine.resume(direction)
        guard case .unpause(let stillPausedSend, let stillPausedReceive) = action else { return }
        let stillPaused = (stillPausedSend ? CURLPAUSE_SEND : 0) | (stillPausedReceive ? CURLPAUSE_RECV : 0)
        let code = curl_easy_pause(easy.raw, Int32(stillPaused))
        // libcurl refuses when the transfer has no connection at the moment (waiting for one after a redirect):
        // then it is not paused either, and its next request calls the callbacks again.
        if code != CURLE_OK && code != CURLE_BAD_FUNCTION_ARGUMENT {
            apply(transfer.stateMachine.resumeFailed(curlCode: Int(code.rawValue)), to: transfer)
        }
        // libcurl may have run the write callback inside curl_easy_pause.
        deliverWaitingHeads()
    }

    // MARK: streamed heads

    /// Streamed responses whose head arrived inside a libcurl callback, waiting for libcurl to return.
    private var headsToDeliver: [Transfer] = []

    /// Hands a streaming caller its head once the current libcurl call has returned (see ``drainCompletions()``):
    /// a callback only records it, so no caller is resumed from inside libcurl.
    func deliverHeadAfterLibcurlReturns(_ transfer: Transfer) {
        headsToDeliver.append(transfer)
    }

    private func deliverWaitingHeads() {
        guard !headsToDeliver.isEmpty else { return }
        for transfer in headsToDeliver { transfer.deliverHead() }
        headsToDeliver.removeAll(keepingCapacity: true)
    }

    // MARK: running transfers and deadlines

    private func link(_ transfer: Transfer) {
        running.insert(transfer, deadline: transfer.stateMachine.nextDeadline)
    }

    private func unlink(_ transfer: Transfer) {
        running.remove(transfer)
    }

    /// Fails transfers past their connection, idle or total deadline.
    ///
    /// libcurl enforces the total timeout only once a transfer has a connection; one waiting for a free
    /// connection (``CurlewClient/Configuration/maxConnectionsPerHost``) would wait past it, so the engine
    /// checks total deadlines too, and the connect deadline of a transfer still waiting (libcurl 7.88 restarts its
    /// connect timer when the wait ends; 8.x counts the wait but looks only once a connection is free). Only
    /// transfers whose stored deadline has passed are looked at: one whose idle deadline moved since (activity in a
    /// callback) is re-keyed with the time its machine gives, later than now.
    func checkDeadlines(now: UInt64) {
        while let earliest = running.earliest, earliest.deadline <= now {
            let transfer = earliest.member
            let check = transfer.stateMachine.deadlineCheck(
                now: now, requestSent: transfer.requestWasSent(),
                connectionAttemptStarted: transfer.hasLeftConnectionQueue)
            switch check {
            case .checkAgain(let time):
                running.update(transfer, deadline: time)
            case .removeAndFail(let failure):
                removeAndFail(transfer, failure)
                // A running transfer leaves the heap above (a repeated one may be back with its next request and
                // new deadlines); should one ever not, it must not stay the earliest.
                if transfer.isLinked && transfer.repeater == nil { running.update(transfer, deadline: .max) }
            }
        }
    }

    /// Milliseconds until the next deadline check, for the loop's wait.
    func millisecondsUntilDeadlineCheck(now: UInt64) -> Int? {
        guard nextDeadlineCheck != .max else { return nil }
        guard nextDeadlineCheck > now else { return 0 }
        return curlMilliseconds(fromNanoseconds: nextDeadlineCheck - now)
    }

    /// Fails the transfer of an easy handle whose socket its loop could not watch.
    func failUnwatchable(_ handle: UnsafeMutableRawPointer) {
        var userdata: UnsafeMutableRawPointer?
        guard curlew_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &userdata) == CURLE_OK, let userdata else { return }
        let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
        apply(transfer.stateMachine.socketUnwatchable(), to: transfer)
    }

    // MARK: pool statistics

    /// Adds this multi handle's counts to a snapshot, per origin: its connections (``ConnectionBook``), its
    /// transfers in flight, the distinct connections they are on (busy) and those not on one yet. Idle connections
    /// are what the client derives from open and busy once every loop has added its counts.
    func addPoolCounts(to counts: inout [String: PoolStatistics.Counts]) {
        connectionBook.addConnectionCounts(to: &counts)
        var originOfURL: [String: String] = [:]
        var busyConnections: [String: Set<Int>] = [:]
        running.forEachMember { transfer in
            let url = transfer.request.transferURL
            let origin = originOfURL[url] ?? transfer.originKey
            originOfURL[url] = origin
            counts[origin, default: .init()].transfersInFlight += 1
            if let key = transfer.connectionKey {
                busyConnections[origin, default: []].insert(key)
            } else {
                counts[origin, default: .init()].transfersWaitingForConnection += 1
            }
        }
        for (origin, keys) in busyConnections { counts[origin, default: .init()].connectionsBusy += keys.count }
    }

    // MARK: shutdown

    /// Fails every running transfer and refuses new ones.
    func beginShutdown() {
        isShuttingDown = true
        while let transfer = running.anyMember {
            let action = transfer.stateMachine.shutdown()
            unlink(transfer)
            apply(action, to: transfer)
        }
    }

    /// Whether any transfer is still in libcurl.
    var hasRunningTransfers: Bool { !running.isEmpty }

    /// Releases libcurl's resources; call on the loop, after ``beginShutdown()``.
    func cleanup() {
        curl_multi_cleanup(multi)
        for easy in pool { easy.destroy() }
        pool.removeAll()
    }
}

private let closeOnExecOpenSocketCallback: curl_opensocket_callback = { _, _, address in
    guard let address else { return -1 }
    return openCloseOnExecSocket(address.pointee)
}
