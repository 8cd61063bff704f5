/// What the client needs from an event loop, whichever design drives libcurl.
protocol CurlEventLoop: AnyObject, Sendable {
    /// Unresolved transfers on this loop, for balancing.
    var load: LoopLoad { get }
    /// The executor request tasks can prefer to run on this loop's thread, if the design has one.
    var taskExecutor: (any TaskExecutor)? { get }
    /// Whether the calling thread is this loop's own.
    var isCurrent: Bool { get }
    /// The time a request submitted now counts from: the loop's own clock when called on the loop (read once per
    /// iteration, so a clock read per request is saved), the system's otherwise.
    var submissionTime: UInt64 { get }
    /// Hands a transfer to the loop; the transfer's continuation is resumed exactly once.
    func submit(_ transfer: Transfer)
    /// Asks the loop to cancel a transfer; harmless if it already finished.
    func cancel(_ transfer: Transfer)
    /// Asks the loop to resume a transfer its body producer or response consumer paused; harmless if it is not
    /// paused that way or already finished. Never resumes inside a libcurl callback.
    func unpause(_ transfer: Transfer, _ direction: PauseDirection)
    /// Adds the loop's multi handles' counts to a pool snapshot (`MultiCore.addPoolCounts(to:)`). Runs only on the
    /// loop's own thread or queue: returns false, adding nothing, when called anywhere else.
    func addPoolCounts(to counts: inout [String: PoolStatistics.Counts]) -> Bool
    /// Fails running transfers, releases libcurl's resources and stops the loop.
    func shutdown() async
}

/// Which side of a transfer a callback paused.
enum PauseDirection {
    /// The request body's producer was behind (`CURL_READFUNC_PAUSE`).
    case send
    /// The response body's consumer was behind (`CURL_WRITEFUNC_PAUSE`).
    case receive
}
