import CurlewTestSupport
import Glibc
import Testing

@testable import CurlewEngine

/// The hand-over between posting threads and a loop thread, played by the test on one thread with the inbox's real
/// eventfd: a post wakes the loop only when it announced a sleep, a loop with work or a stop pending may not sleep,
/// and a stopped inbox rejects posts and answers its shutdown waiters.
@Suite("Loop inbox")
struct LoopInboxTests {
    @Test func aPostWhileTheLoopIsAwakeQueuesWithoutWakingIt() throws {
        let inbox = try #require(LoopInbox<Int>())
        #expect(inbox.post(1))
        #expect(!isReadable(inbox.wakeupDescriptor))
        var batch: [Int] = []
        #expect(inbox.take(into: &batch) == false)
        #expect(batch == [1])
    }

    @Test func aPostAfterTheLoopAnnouncedASleepWakesItOnce() throws {
        let inbox = try #require(LoopInbox<Int>())
        #expect(inbox.announceSleep())
        #expect(inbox.post(1))
        #expect(isReadable(inbox.wakeupDescriptor))
        // The first post ended the sleep: the second needs no write.
        inbox.drainWakeup()
        #expect(inbox.post(2))
        #expect(!isReadable(inbox.wakeupDescriptor))
        var batch: [Int] = []
        _ = inbox.take(into: &batch)
        #expect(batch == [1, 2])
    }

    @Test func aLoopThatWokeByItselfIsNotWokenAgain() throws {
        let inbox = try #require(LoopInbox<Int>())
        #expect(inbox.announceSleep())
        inbox.sleepEnded()
        #expect(inbox.post(1))
        #expect(!isReadable(inbox.wakeupDescriptor))
    }

    @Test func theLoopMayNotSleepWhileWorkWaits() throws {
        let inbox = try #require(LoopInbox<Int>())
        #expect(inbox.post(1))
        #expect(!inbox.announceSleep())
        var batch: [Int] = []
        _ = inbox.take(into: &batch)
        #expect(inbox.announceSleep())
    }

    @Test func aStopWakesASleepingLoopAndForbidsTheNextSleep() throws {
        let inbox = try #require(LoopInbox<Int>())
        #expect(inbox.announceSleep())
        inbox.requestStop()
        #expect(isReadable(inbox.wakeupDescriptor))
        var batch: [Int] = []
        #expect(inbox.take(into: &batch) == true)
        #expect(!inbox.announceSleep())
    }

    @Test func aStoppedInboxRejectsPostsAndReturnsTheLateOnes() throws {
        let inbox = try #require(LoopInbox<Int>())
        #expect(inbox.post(1))
        #expect(inbox.post(2))
        let (late, waiters) = inbox.markStopped()
        #expect(late == [1, 2])
        #expect(waiters.isEmpty)
        #expect(!inbox.post(3))
        var batch: [Int] = []
        _ = inbox.take(into: &batch)
        #expect(batch.isEmpty)
    }

    @Test func aShutdownWaiterResumesOnceTheLoopHasStopped() async throws {
        let inbox = try #require(LoopInbox<Int>())
        #expect(inbox.announceSleep())
        let waiter = Task { await withCheckedContinuation { inbox.stop(resuming: $0) } }
        // The waiter's stop wakes the sleeping loop. A bounded wait that leaves the thread free between looks: the
        // waiter's task needs one of the pool's few threads to run at all.
        try await waitUntil(timeout: .seconds(30)) { isReadable(inbox.wakeupDescriptor) }
        var batch: [Int] = []
        #expect(inbox.take(into: &batch) == true)
        let (_, waiters) = inbox.markStopped()
        #expect(waiters.count == 1)
        for waiter in waiters { waiter.resume() }
        await waiter.value
    }

    @Test func aShutdownAfterTheStopReturnsAtOnce() async throws {
        let inbox = try #require(LoopInbox<Int>())
        _ = inbox.markStopped()
        await withCheckedContinuation { inbox.stop(resuming: $0) }
        #expect(!inbox.post(1))
    }
}

/// Whether `descriptor` is readable now (a poll that does not wait).
private func isReadable(_ descriptor: Int32) -> Bool {
    var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
    return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLIN) != 0
}
