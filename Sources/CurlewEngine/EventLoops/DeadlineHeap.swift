/// Something a ``DeadlineHeap`` can hold. The member remembers its own place in the heap, so it is removed in
/// O(log n) without a search when it finishes.
protocol DeadlineHeapMember: AnyObject {
    /// The member's index in the heap's storage, -1 while it is in none.
    var deadlineHeapIndex: Int { get set }
}

/// A binary min-heap of (deadline, member): the earliest deadline of a loop's running transfers in O(1), insertion
/// and removal in O(log n), so no loop iteration walks the transfers in flight.
///
/// A member's real deadline may move *later* without the heap being told (a transfer's idle deadline moves with
/// every callback, and the heap is not touched on that hot path): the stored deadline is then a lower bound, and
/// whoever finds it passed asks the member for its current deadline and re-keys it (``update(_:deadline:)``).
/// A real deadline must never move earlier than the stored one.
///
/// Members are held `unowned(unsafe)`: whoever inserts a member keeps it alive until it removes it (the loop holds
/// a reference for libcurl while a transfer is in the heap). Loop-only, like everything in `MultiCore`.
struct DeadlineHeap<Member: DeadlineHeapMember> {
    struct Entry {
        var deadline: UInt64
        unowned(unsafe) let member: Member
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }

    var count: Int { entries.count }

    /// The entry with the earliest stored deadline.
    var earliest: Entry? { entries.first }

    /// The earliest stored deadline, `.max` when the heap is empty.
    var earliestDeadline: UInt64 { entries.first?.deadline ?? .max }

    /// Any member, the cheapest to remove; for emptying the heap.
    var anyMember: Member? { entries.last?.member }

    /// Calls `body` with every member, in no particular order; for snapshots, never on a hot path.
    func forEachMember(_ body: (Member) -> Void) {
        for entry in entries { body(entry.member) }
    }

    mutating func insert(_ member: Member, deadline: UInt64) {
        assert(member.deadlineHeapIndex < 0, "a member is in the heap once")
        entries.append(Entry(deadline: deadline, member: member))
        member.deadlineHeapIndex = entries.count - 1
        siftUp(from: entries.count - 1)
    }

    /// Removes a member; harmless if it is in no heap.
    mutating func remove(_ member: Member) {
        let index = member.deadlineHeapIndex
        guard index >= 0 else { return }
        member.deadlineHeapIndex = -1
        let last = entries.removeLast()
        guard index < entries.count else { return }
        entries[index] = last
        last.member.deadlineHeapIndex = index
        // The entry moved in from the end may belong above or below its new place.
        if !siftUp(from: index) { siftDown(from: index) }
    }

    /// Stores a member's current deadline.
    mutating func update(_ member: Member, deadline: UInt64) {
        let index = member.deadlineHeapIndex
        guard index >= 0 else { return }
        let previous = entries[index].deadline
        entries[index].deadline = deadline
        if deadline < previous { siftUp(from: index) } else { siftDown(from: index) }
    }

    /// Stores `deadline` for a member only if it is earlier than the stored one. A later deadline leaves the stored
    /// one as the lower bound the type allows: whoever finds it passed re-keys the member. A repeated transfer's next
    /// request, whose deadlines usually count the same timeouts from a later submission, so costs no sift (one per
    /// request in S8's profile); the price is at most one early check per member and timeout.
    mutating func lower(_ member: Member, to deadline: UInt64) {
        let index = member.deadlineHeapIndex
        guard index >= 0, deadline < entries[index].deadline else { return }
        entries[index].deadline = deadline
        siftUp(from: index)
    }

    /// Moves the entry at `index` up while it is earlier than its parent; returns whether it moved.
    @discardableResult
    private mutating func siftUp(from index: Int) -> Bool {
        var child = index
        let moving = entries[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard moving.deadline < entries[parent].deadline else { break }
            entries[child] = entries[parent]
            entries[child].member.deadlineHeapIndex = child
            child = parent
        }
        guard child != index else { return false }
        entries[child] = moving
        moving.member.deadlineHeapIndex = child
        return true
    }

    private mutating func siftDown(from index: Int) {
        var parent = index
        let moving = entries[parent]
        let count = entries.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { break }
            let right = left + 1
            let earlier = right < count && entries[right].deadline < entries[left].deadline ? right : left
            guard entries[earlier].deadline < moving.deadline else { break }
            entries[parent] = entries[earlier]
            entries[parent].member.deadlineHeapIndex = parent
            parent = earlier
        }
        guard parent != index else { return }
        entries[parent] = moving
        moving.member.deadlineHeapIndex = parent
    }
}
