import Foundation
import Testing

@testable import CurlewLoad

@Suite struct BenchStartTimeTests {
    @Test func takesISO8601WithOrWithoutFractionsOrSecondsSince1970() {
        #expect(BenchStartTime.parse(" 2026-11-24T10:00:00Z ") == Date(timeIntervalSince1970: 1_795_514_400))
        #expect(BenchStartTime.parse("2026-11-24T10:00:00.500Z") == Date(timeIntervalSince1970: 1_795_514_400.5))
        #expect(BenchStartTime.parse("1795514400.5") == Date(timeIntervalSince1970: 1_795_514_400.5))
    }

    @Test(arguments: ["tomorrow", "-5", "0", "nan", "inf", "1e300", "1969-12-31T23:59:59Z", ""])
    func refusesWhatIsNoInstantAfter1970(text: String) {
        #expect(BenchStartTime.parse(text) == nil)
    }

    /// `--start-at 1e12` once trapped converting the wait to nanoseconds (found by the load-options fuzz target).
    @Test func aStartBeyondTheYear9999IsRefusedAndTheLongestWaitStillFits() {
        #expect(BenchStartTime.parse("1e12") == nil)
        #expect(BenchStartTime.parse("253402300799") == BenchStartTime.latest)
        let wait = BenchStartTime.wait(until: BenchStartTime.latest, from: Date(timeIntervalSince1970: 0))
        #expect(wait == .seconds(253_402_300_799))
    }

    /// ICU trapped (SIGFPE) parsing a fraction of ~80 digits: `--start-at` crashed the command (found by the
    /// load-options fuzz target).
    @Test func aFractionOfManyDigitsIsRefusedBeforeICUSeesIt() {
        #expect(BenchStartTime.parse("2026-1-24T10:00:00." + String(repeating: "2", count: 80) + "50Z") == nil)
        #expect(BenchStartTime.parse("2026-11-24T10:00:00.25Z") == Date(timeIntervalSince1970: 1_795_514_400.25))
    }

    @Test func aTimeAlreadyPastIsNoWait() {
        let now = Date(timeIntervalSince1970: 1_795_514_400)
        #expect(BenchStartTime.wait(until: now - 5, from: now) == .zero)
        #expect(BenchStartTime.wait(until: now + 1.25, from: now) == .milliseconds(1250))
    }
}
