import CLibCurl
import Testing

@testable import CurlewEngine

/// The socket-action loop's epoll bookkeeping, driven synchronously: which sockets rest in the set between
/// transfers, and what the kernel is told, with no socket and no epoll.
@Suite("Epoll socket table")
struct EpollSocketTableTests {
    static let inode: UInt64 = 4242

    /// A table where the loop opened `descriptor` as a connection socket and libcurl named it with `what`.
    static func connection(
        _ descriptor: Int32 = 7, named what: Int32 = CURL_POLL_IN, tag: UInt32 = 0
    )
        -> EpollSocketTable
    {
        var table = EpollSocketTable()
        table.opened(descriptor, inode: inode)
        _ = table.interest(descriptor, what, tag: tag) { inode }
        return table
    }

    @Test func anEstablishedConnectionRestsInTheSetAndItsNextTransferCostsNoSystemCall() {
        var table = EpollSocketTable()
        table.opened(7, inode: Self.inode)
        #expect(table.interest(7, CURL_POLL_IN, tag: 0) { Self.inode } == .add(interest: CURL_POLL_IN, tag: 0))
        // The transfer ends: libcurl removes the socket, the table keeps it in the set.
        #expect(table.interest(7, CURL_POLL_REMOVE, tag: 0) { Self.inode } == .none)
        #expect(table.state(of: 7).isInSet && !table.state(of: 7).isWatched)
        // The next transfer names the same interest: nothing for the kernel, and the inode is not even read.
        var inodeReads = 0
        #expect(
            table.interest(7, CURL_POLL_IN, tag: 0) {
                inodeReads += 1
                return Self.inode
            } == .none)
        #expect(inodeReads == 0)
        #expect(table.state(of: 7).isWatched)
    }

    @Test func socketsTheLoopDidNotOpenOrThatNeverCarriedARequestLeaveOnRemove() {
        // The threaded resolver's socketpair: never opened through the loop.
        var resolver = EpollSocketTable()
        #expect(resolver.interest(9, CURL_POLL_IN, tag: 0) { 0 } == .add(interest: CURL_POLL_IN, tag: 0))
        #expect(resolver.interest(9, CURL_POLL_REMOVE, tag: 0) { 0 } == .delete)
        #expect(resolver.state(of: 9) == .absent)
        // A connect attempt that lost a race: named for output only, closed without the close callback.
        var attempt = Self.connection(named: CURL_POLL_OUT)
        #expect(attempt.interest(7, CURL_POLL_REMOVE, tag: 0) { Self.inode } == .delete)
        #expect(attempt.state(of: 7) == .absent)
    }

    @Test func aRemoveForASocketNeverAnnouncedChangesNothing() {
        // libcurl 8.13-8.15 may remove sockets of its internal handle that it never announced.
        var table = EpollSocketTable()
        #expect(table.interest(11, CURL_POLL_REMOVE, tag: 0) { 0 } == .none)
        #expect(table.state(of: 11) == .absent)
        #expect(table.closing(12) == .none)
    }

    @Test func anotherInterestOrPartModifiesTheRegistration() {
        var table = Self.connection()
        #expect(table.interest(7, CURL_POLL_INOUT, tag: 0) { Self.inode } == .modify(interest: CURL_POLL_INOUT, tag: 0))
        #expect(table.interest(7, CURL_POLL_INOUT, tag: 3) { Self.inode } == .modify(interest: CURL_POLL_INOUT, tag: 3))
        #expect(table.state(of: 7).tag == 3)
    }

    @Test func aNumberTakenByAnotherSocketIsRegisteredAnew() {
        var table = Self.connection()
        _ = table.interest(7, CURL_POLL_REMOVE, tag: 0) { Self.inode }
        // The resting socket was closed without the callback and the number reused: another inode.
        #expect(table.interest(7, CURL_POLL_OUT, tag: 1) { Self.inode + 1 } == .add(interest: CURL_POLL_OUT, tag: 1))
        #expect(!table.state(of: 7).isConnection)
    }

    @Test func aRestingSocketThatReportsAnEventLeavesTheSet() {
        var table = Self.connection()
        #expect(table.eventArrived(7) == (true, .none))
        _ = table.interest(7, CURL_POLL_REMOVE, tag: 0) { Self.inode }
        // The server closed the idle connection: libcurl does not watch it, so the loop must not spin on it.
        #expect(table.eventArrived(7) == (false, .delete))
        #expect(table.eventArrived(7) == (false, .none))
        #expect(table.eventArrived(500) == (false, .none))
    }

    @Test func closingTakesARegisteredSocketOutFirst() {
        var resting = Self.connection()
        _ = resting.interest(7, CURL_POLL_REMOVE, tag: 0) { Self.inode }
        #expect(resting.closing(7) == .delete)
        #expect(resting.state(of: 7) == .absent)
        var unregistered = EpollSocketTable()
        unregistered.opened(8, inode: Self.inode)
        #expect(unregistered.closing(8) == .none)
    }

    @Test func aRefusedRegistrationIsForgottenAndTriedAgainAsNew() {
        var table = EpollSocketTable()
        table.opened(7, inode: Self.inode)
        _ = table.interest(7, CURL_POLL_IN, tag: 0) { Self.inode }
        table.kernelRefused(7)
        #expect(table.state(of: 7) == .absent)
        #expect(table.interest(7, CURL_POLL_IN, tag: 0) { 0 } == .add(interest: CURL_POLL_IN, tag: 0))
    }
}
