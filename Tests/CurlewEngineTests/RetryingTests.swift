import Testing

@testable import CurlewEngine

@Suite struct RetryingTests {
    private struct Refused: Error, Equatable { let attempt: Int }

    @Test func anAttemptThatFinishesEndsTheCall() async {
        var seen: [RetryAttempt] = []
        let outcome = await retrying(maxAttempts: 3) { (attempt: RetryAttempt) -> RetryStep<String> in
            seen.append(attempt)
            return .finished("done")
        } onCancelledWait: { _ in
            "cancelled"
        }
        #expect(outcome == "done")
        #expect(seen == [RetryAttempt(number: 1, maxAttempts: 3)])
    }

    @Test func retriesAreNumberedAndTheLastAttemptKnowsItIsTheLast() async {
        var seen: [(number: Int, mayRetry: Bool)] = []
        let outcome = await retrying(maxAttempts: 3) { (attempt: RetryAttempt) -> RetryStep<Int> in
            seen.append((attempt.number, attempt.mayRetry))
            return attempt.mayRetry ? .retry(after: attempt.number == 1 ? nil : .zero) : .finished(attempt.number)
        } onCancelledWait: { _ in
            -1
        }
        #expect(outcome == 3)
        #expect(seen.map(\.number) == [1, 2, 3])
        #expect(seen.map(\.mayRetry) == [true, true, false])
    }

    @Test func atLeastOneAttemptIsMade() async {
        var count = 0
        let outcome = await retrying(maxAttempts: 0) { (attempt: RetryAttempt) -> RetryStep<Bool> in
            count += 1
            return .finished(attempt.mayRetry)
        } onCancelledWait: { _ in
            true
        }
        #expect(count == 1)
        #expect(outcome == false)
    }

    @Test func theDelayAnAttemptAsksForIsWaited() async {
        let clock = ContinuousClock()
        let started = clock.now
        _ = await retrying(maxAttempts: 2) { (attempt: RetryAttempt) -> RetryStep<Void> in
            attempt.mayRetry ? .retry(after: .milliseconds(50)) : .finished(())
        } onCancelledWait: { _ in
        }
        #expect(clock.now - started >= .milliseconds(50))
    }

    @Test func aCancelledWaitEndsTheCallWithoutAnotherAttempt() async {
        // A task of its own, so that its cancellation is not the test's.
        let call = Task { () -> (outcome: String, attempts: Int) in
            var attempts = 0
            let outcome = await retrying(maxAttempts: 5) { (attempt: RetryAttempt) -> RetryStep<String> in
                attempts += 1
                // The task is cancelled while the attempt decides: the long wait it asks for ends at once.
                withUnsafeCurrentTask { $0?.cancel() }
                return .retry(after: .seconds(600))
            } onCancelledWait: { attempt in
                "cancelled after attempt \(attempt.number)"
            }
            return (outcome, attempts)
        }
        let (outcome, attempts) = await call.value
        #expect(outcome == "cancelled after attempt 1")
        #expect(attempts == 1)
    }

    @Test func anAttemptsErrorEndsTheCallWithItsType() async {
        await #expect(throws: Refused(attempt: 2)) {
            try await retrying(maxAttempts: 3) { (attempt: RetryAttempt) throws(Refused) -> RetryStep<Int> in
                if attempt.number == 2 { throw Refused(attempt: attempt.number) }
                return .retry(after: nil)
            } onCancelledWait: { (_: RetryAttempt) throws(Refused) -> Int in
                0
            }
        }
    }

    @Test func aFailureNamesItsAttemptsOnlyWhenThereWasMoreThanOne() {
        #expect(RetryAttempt(number: 1, maxAttempts: 3).failureReason("HTTP 503") == "HTTP 503")
        #expect(RetryAttempt(number: 3, maxAttempts: 3).failureReason("HTTP 503") == "HTTP 503 after 3 attempts")
    }
}
