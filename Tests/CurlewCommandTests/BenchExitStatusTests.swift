import CurlewLoad
import Testing

@testable import curlew

/// The exit statuses stay with the command: the load library reports what happened, the command decides the status.
@Suite struct BenchExitStatusTests {
    @Test func exitStatusesTakePrecedenceInOrder() {
        let failedRule = LoadThresholdResult(
            threshold: "p99<1ms", passed: false, actual: 2000, limit: 1000, unit: "microseconds")
        let passedRule = LoadThresholdResult(
            threshold: "p99<1s", passed: true, actual: 2000, limit: 1e6, unit: "microseconds")
        #expect(BenchExitStatus.of(interrupted: false, requests: 10, succeeded: 10, thresholds: [passedRule]) == 0)
        #expect(
            BenchExitStatus.of(interrupted: false, requests: 10, succeeded: 9, thresholds: [passedRule, failedRule])
                == 99)
        // Every request failed: 98 even though the latency rule passes.
        #expect(BenchExitStatus.of(interrupted: false, requests: 10, succeeded: 0, thresholds: [passedRule]) == 98)
        #expect(BenchExitStatus.of(interrupted: true, requests: 10, succeeded: 0, thresholds: [failedRule]) == 130)
        // Nothing sent (a schedule of 0 rps) is not "every request failed".
        #expect(BenchExitStatus.of(interrupted: false, requests: 0, succeeded: 0, thresholds: []) == 0)
    }
}
