import Glibc
import Testing

@testable import CurlewEngine

@Suite struct MonotonicClockTests {
    @Test func readingsNeverGoBack() {
        var previous = monotonicNanoseconds()
        var wentBack = 0
        for _ in 0..<100_000 {
            let now = monotonicNanoseconds()
            if now < previous { wentBack += 1 }
            previous = now
        }
        #expect(wentBack == 0)
    }

    @Test func aSleepIsMeasuredInNanoseconds() {
        let before = monotonicNanoseconds()
        usleep(20_000)
        let elapsed = monotonicNanoseconds() - before
        #expect(elapsed >= 20_000_000)
        #expect(elapsed < 10_000_000_000, "nanoseconds, not a coarser unit")
    }

    @Test func itIsTheSystemsMonotonicClock() {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        let system = UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
        let ours = monotonicNanoseconds()
        #expect(ours >= system && ours - system < 1_000_000_000)
    }
}
