import CLibCurl

/// `curl_multi_perform` every turn and `curl_multi_poll` to sleep, on one multi handle: the cheapest driver with few
/// connections, but libcurl 7.88 walks every transfer on each perform (`docs/design/0001-event-loop.md`).
final class PollDriver: LoopDriver {
    let primaryCore: MultiCore
    private let wakeup: any LoopWakeup

    init(core: MultiCore, wakeup: any LoopWakeup) {
        self.primaryCore = core
        self.wakeup = wakeup
    }

    func start(_ transfer: Transfer) {
        primaryCore.start(transfer, now: primaryCore.clock.now)
    }

    func core(of transfer: Transfer) -> MultiCore { primaryCore }

    var cores: [MultiCore] { [primaryCore] }

    func turn(mayWait: Bool) {
        let core = primaryCore
        if mayWait { sleep(now: core.tick()) }
        var running: Int32 = 0
        // The callbacks inside perform record activity with the loop's time: read it right before.
        core.tick()
        curl_multi_perform(core.multi, &running)
        core.drainCompletions()
        core.checkDeadlines(now: core.tick())
    }

    /// Sleeps in `curl_multi_poll` until a socket, the next deadline check or the inbox's eventfd, unless work arrived.
    private func sleep(now: UInt64) {
        guard wakeup.announceSleep() else { return }
        let timeout = Int32(clamping: primaryCore.millisecondsUntilDeadlineCheck(now: now) ?? 1000)
        var wakeupEntry = curl_waitfd(fd: wakeup.wakeupDescriptor, events: Int16(CURL_WAIT_POLLIN), revents: 0)
        var ready: Int32 = 0
        curl_multi_poll(primaryCore.multi, &wakeupEntry, 1, timeout, &ready)
        if wakeupEntry.revents != 0 { wakeup.drainWakeup() }
        wakeup.sleepEnded()
    }

    func afterCallOutsideTurn() {
        // Without a socket callback libcurl cannot name a socket the loop fails to watch.
    }

    func beginShutdown() { primaryCore.beginShutdown() }

    func cleanup() { primaryCore.cleanup() }
}
