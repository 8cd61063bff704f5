import Synchronization

/// The number of unresolved transfers of one loop, shared with submitting threads.
final class LoopLoad: Sendable {
    private let count = Atomic<Int>(0)

    var current: Int { count.load(ordering: .relaxed) }

    func submitted() { count.wrappingAdd(1, ordering: .relaxed) }

    func finished() { count.wrappingSubtract(1, ordering: .relaxed) }
}
