/// A loop's current time; only its loop reads and writes it.
final class LoopClock {
    var now: UInt64 = monotonicNanoseconds()
}
