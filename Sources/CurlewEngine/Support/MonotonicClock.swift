import Glibc

/// `CLOCK_MONOTONIC` in nanoseconds: the engine's single time base, and the clock `curlew bench` reads twice per
/// request. Plain integers keep that arithmetic cheap (`Duration`'s is 128-bit).
@inline(__always)
package func monotonicNanoseconds() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
}
