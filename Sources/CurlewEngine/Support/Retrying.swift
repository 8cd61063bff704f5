/// One attempt of a call run by ``retrying(maxAttempts:_:onCancelledWait:)``.
package struct RetryAttempt: Sendable, Hashable {
    /// 1 for the first attempt, 2 for the first retry, and so on.
    package let number: Int
    /// Attempts in all, the first included.
    package let maxAttempts: Int

    /// An attempt of a call of at most `maxAttempts`.
    package init(number: Int, maxAttempts: Int) {
        self.number = number
        self.maxAttempts = maxAttempts
    }

    /// Whether another attempt may follow this one.
    package var mayRetry: Bool { number < maxAttempts }
}

/// What one attempt came to.
package enum RetryStep<Outcome> {
    /// The call is over with this outcome.
    case finished(Outcome)
    /// Send again after the delay (`nil` or zero: at once). Only an attempt that ``RetryAttempt/mayRetry`` asks.
    case retry(after: Duration?)
}

/// The one retry loop: runs `attempt` for attempt 1, 2, … until one finishes, waiting between them as each asks.
///
/// The attempt decides (with ``RetryRules``, or interceptors) and counts what it wants; the loop numbers the
/// attempts, keeps the bound and waits. A wait that the task's cancellation cuts short ends the call with
/// `onCancelledWait`'s outcome for the attempt before it; no further attempt starts.
///
/// - Parameters:
///   - maxAttempts: attempts in all, the first included (at least one is made).
///   - attempt: one attempt; asks for a retry only when its ``RetryAttempt/mayRetry``, which the loop checks.
///   - onCancelledWait: the outcome when the task is cancelled while waiting to retry.
package func retrying<Outcome, Failure: Error>(
    maxAttempts: Int,
    _ attempt: (RetryAttempt) async throws(Failure) -> RetryStep<Outcome>,
    onCancelledWait: (RetryAttempt) throws(Failure) -> Outcome
) async throws(Failure) -> Outcome {
    var current = RetryAttempt(number: 1, maxAttempts: max(1, maxAttempts))
    while true {
        switch try await attempt(current) {
        case .finished(let outcome):
            return outcome
        case .retry(let delay):
            // A bound that an attempt can overstep is no bound: asking past it is a bug in the caller.
            precondition(current.mayRetry, "attempt \(current.number) of \(current.maxAttempts) asked for a retry")
            if let delay, delay > .zero {
                do { try await Task.sleep(for: delay) } catch { return try onCancelledWait(current) }
            }
            current = RetryAttempt(number: current.number + 1, maxAttempts: current.maxAttempts)
        }
    }
}

extension RetryAttempt {
    /// How a call that failed on this attempt reports it: the last attempt's reason, and how many attempts were
    /// made when there was more than one. The one wording of every retry loop (`… after 3 attempts`).
    package func failureReason(_ lastReason: String) -> String {
        number > 1 ? lastReason + " after \(number) attempts" : lastReason
    }
}
