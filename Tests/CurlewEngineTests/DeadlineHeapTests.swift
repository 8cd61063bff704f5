import Testing

@testable import CurlewEngine

@Suite("Deadline heap")
struct DeadlineHeapTests {
    final class Member: DeadlineHeapMember {
        let name: Int
        var deadlineHeapIndex = -1
        init(_ name: Int) { self.name = name }
    }

    /// Empties the heap earliest first, checking every member's recorded index on the way.
    private func drain(_ heap: inout DeadlineHeap<Member>, members: [Member]) -> [UInt64] {
        var order: [UInt64] = []
        while let earliest = heap.earliest {
            for member in members where member.deadlineHeapIndex >= 0 {
                #expect(member.deadlineHeapIndex < heap.count)
            }
            order.append(earliest.deadline)
            heap.remove(earliest.member)
            #expect(earliest.member.deadlineHeapIndex == -1)
        }
        return order
    }

    @Test func yieldsDeadlinesInOrderWhateverTheInsertionOrder() {
        var generator = SystemRandomNumberGenerator()
        let deadlines = (0..<1_000).map { _ in UInt64.random(in: 0..<10_000, using: &generator) }
        let members = deadlines.indices.map(Member.init)
        var heap = DeadlineHeap<Member>()
        for (member, deadline) in zip(members, deadlines) { heap.insert(member, deadline: deadline) }
        #expect(heap.count == 1_000)
        #expect(heap.earliestDeadline == deadlines.min())
        #expect(drain(&heap, members: members) == deadlines.sorted())
        #expect(heap.isEmpty)
        #expect(heap.earliestDeadline == .max)
    }

    @Test func removingFromTheMiddleKeepsTheOrderOfTheRest() {
        let members = (0..<200).map(Member.init)
        var heap = DeadlineHeap<Member>()
        // Deadlines interleaved so removed members sit all over the tree.
        for member in members { heap.insert(member, deadline: UInt64((member.name * 7919) % 200)) }
        for member in members where member.name % 3 == 0 { heap.remove(member) }
        // Removing again is harmless.
        heap.remove(members[0])
        let expected = members.filter { $0.name % 3 != 0 }.map { UInt64(($0.name * 7919) % 200) }.sorted()
        #expect(drain(&heap, members: members) == expected)
    }

    @Test func movedDeadlinesAreReorderedBothWays() {
        let members = (0..<50).map(Member.init)
        var heap = DeadlineHeap<Member>()
        for member in members { heap.insert(member, deadline: UInt64(member.name)) }
        // The earliest moves later (the lazy re-check of an idle deadline), one in the middle moves earlier.
        heap.update(members[0], deadline: 1_000)
        heap.update(members[30], deadline: 0)
        #expect(heap.earliest?.member === members[30])
        var expected = (1..<50).filter { $0 != 30 }.map(UInt64.init)
        expected.insert(0, at: 0)
        expected.append(1_000)
        #expect(drain(&heap, members: members) == expected)
    }

    /// A repeated transfer's next request only ever lowers its stored deadline: a later one is left as the lower
    /// bound the heap allows, an earlier one is stored and sifted up.
    @Test func loweringStoresOnlyAnEarlierDeadline() {
        let members = (0..<50).map(Member.init)
        var heap = DeadlineHeap<Member>()
        for member in members { heap.insert(member, deadline: UInt64(member.name) * 10) }
        heap.lower(members[0], to: 1_000)
        #expect(heap.earliest?.member === members[0], "a later deadline leaves the stored one")
        #expect(heap.earliestDeadline == 0)
        heap.lower(members[40], to: 5)
        #expect(heap.earliest?.member === members[0])
        heap.lower(members[40], to: 5)
        heap.remove(members[0])
        heap.lower(members[49], to: 1)
        #expect(heap.earliest?.member === members[49])
        var expected = (1..<49).filter { $0 != 40 }.map { UInt64($0) * 10 }
        expected.insert(contentsOf: [1, 5], at: 0)
        #expect(drain(&heap, members: members) == expected.sorted())
        // A member in no heap is left alone.
        heap.lower(members[3], to: 0)
        #expect(heap.isEmpty)
    }

    @Test func anyMemberEmptiesTheHeap() {
        let members = (0..<20).map(Member.init)
        var heap = DeadlineHeap<Member>()
        for member in members { heap.insert(member, deadline: .max) }
        var removed = 0
        while let member = heap.anyMember {
            heap.remove(member)
            removed += 1
        }
        #expect(removed == 20)
        #expect(members.allSatisfy { $0.deadlineHeapIndex == -1 })
    }
}
