import CLibCurl

/// Where each socket number stands in a socket-action loop's epoll set, as pure transitions: every event libcurl or
/// the kernel reports returns the one kernel operation the loop must carry out, so the rules are tested without a
/// socket (`EpollSocketTableTests`), as `MultiPartPlan` is.
///
/// An established connection's socket that libcurl stops watching stays in the epoll set with its interest: libcurl
/// removes a kept-alive connection's socket when each transfer ends and names it again, with the same interest, for
/// the next, and an `EPOLL_CTL_DEL`, `ADD` and `MOD` per request cost more than remembering
/// (`docs/design/0011-socket-action-loop.md`). Only sockets that can rest safely do: ones the loop opened itself
/// (``opened(_:inode:)``), that libcurl has waited on for input (a connection that carried a request), and that are
/// still the socket opened under that number (the inode, checked whenever the kernel is to be told anything).
/// libcurl closes those through the loop (``closing(_:)``), which takes them out of the set first. Everything else
/// libcurl names leaves the set on `CURL_POLL_REMOVE`: the threaded resolver's socketpair and a connect attempt that
/// lost a race, which libcurl closes without the close callback, and sockets of libcurl's own internal handle that
/// it never announced (8.13–8.15). A resting socket that reports an event (a server closing an idle connection)
/// leaves the set then.
struct EpollSocketTable {
    /// What the loop must tell the kernel.
    enum KernelOperation: Equatable {
        case none
        /// `EPOLL_CTL_ADD` with this interest (`CURL_POLL_IN`/`OUT`/`INOUT`) and the part's tag.
        case add(interest: Int32, tag: UInt32)
        /// `EPOLL_CTL_MOD` with this interest and tag.
        case modify(interest: Int32, tag: UInt32)
        /// `EPOLL_CTL_DEL`.
        case delete
    }

    struct State: Equatable {
        static let absent = State()
        /// Whether the number is in the epoll set.
        var isInSet = false
        /// Whether libcurl watches it (a resting socket is in the set without it).
        var isWatched = false
        /// Whether it is a connection socket the loop opened for libcurl, which libcurl closes through the loop.
        var isConnection = false
        /// Whether libcurl has waited on it for input: a connection that carried a request. A connect attempt
        /// (named with output interest only) that loses a race is closed without the close callback.
        var isEstablished = false
        /// The socket's inode when it was opened, to tell it from a later socket under the same number.
        var inode: UInt64 = 0
        /// The interest and the part's tag it is in the set with.
        var interest: Int32 = 0
        var tag: UInt32 = 0
    }

    /// Indexed by descriptor; grown in steps of 64.
    private(set) var states: [State] = []

    /// The state of `descriptor` (absent for one never seen).
    func state(of descriptor: Int32) -> State {
        let index = Int(descriptor)
        return index >= 0 && index < states.count ? states[index] : .absent
    }

    /// The loop opened `descriptor` for libcurl as a connection socket.
    mutating func opened(_ descriptor: Int32, inode: UInt64) {
        guard descriptor >= 0 else { return }
        grow(to: Int(descriptor))
        states[Int(descriptor)] = State(isConnection: true, inode: inode)
    }

    /// libcurl closes `descriptor` through the loop: a socket in the set leaves it first (a registration belongs to
    /// the open socket, not the number, and would outlive the close if another process held the socket).
    mutating func closing(_ descriptor: Int32) -> KernelOperation {
        let index = Int(descriptor)
        guard index >= 0, index < states.count else { return .none }
        let wasInSet = states[index].isInSet
        states[index] = .absent
        return wasInSet ? .delete : .none
    }

    /// libcurl names its interest in `descriptor` (`CURL_POLL_IN`, `OUT`, `INOUT` or `REMOVE`) for the part `tag`.
    /// `currentInode` reads the socket's inode; it is called only when the kernel is to be told something about a
    /// socket the loop opened.
    mutating func interest(
        _ descriptor: Int32, _ what: Int32, tag: UInt32, currentInode: () -> UInt64
    ) -> KernelOperation {
        let index = Int(descriptor)
        guard index >= 0 else { return .none }
        grow(to: index)
        var state = states[index]
        if what == CURL_POLL_REMOVE {
            if state.isConnection && state.isEstablished && state.isInSet {
                states[index].isWatched = false
                return .none
            }
            states[index] = .absent
            return state.isInSet ? .delete : .none
        }
        if state.isInSet && state.interest == what && state.tag == tag {
            // The interest the kernel already has (a kept-alive connection's next transfer): no system call.
            states[index].isWatched = true
            return .none
        }
        if state.isConnection && currentInode() != state.inode {
            // Not the socket opened under this number (closed without the callback, the number taken again).
            state = .absent
        }
        let operation: KernelOperation =
            state.isInSet ? .modify(interest: what, tag: tag) : .add(interest: what, tag: tag)
        state.isInSet = true
        state.isWatched = true
        if what & CURL_POLL_IN != 0 { state.isEstablished = true }
        state.interest = what
        state.tag = tag
        states[index] = state
        return operation
    }

    /// The kernel refused the operation ``interest(_:_:tag:currentInode:)`` returned: the number is forgotten.
    mutating func kernelRefused(_ descriptor: Int32) {
        let index = Int(descriptor)
        guard index >= 0, index < states.count else { return }
        states[index] = .absent
    }

    /// epoll reported `descriptor`: whether libcurl watches it, and for a resting socket (which libcurl does not)
    /// the operation that takes it out of the set.
    mutating func eventArrived(_ descriptor: Int32) -> (watched: Bool, operation: KernelOperation) {
        let index = Int(descriptor)
        guard index >= 0, index < states.count else { return (false, .none) }
        if states[index].isWatched { return (true, .none) }
        guard states[index].isInSet else { return (false, .none) }
        states[index].isInSet = false
        return (false, .delete)
    }

    private mutating func grow(to index: Int) {
        if index >= states.count {
            states.append(contentsOf: repeatElement(.absent, count: max(index + 1 - states.count, 64)))
        }
    }
}
