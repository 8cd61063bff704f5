import Testing

@testable import CurlewLoad

@Suite struct BenchScheduleTests {
    private func arrivals(_ text: String) throws -> ArrivalSchedule {
        guard case .arrivals(let schedule) = try BenchStages.parse(text) else {
            Issue.record("\(text) is not an open model")
            return ArrivalSchedule(constantRate: 1)
        }
        return schedule
    }

    @Test func aConstantRateSpacesRequestsEvenly() {
        let schedule = ArrivalSchedule(constantRate: 100)
        #expect(schedule.intendedSeconds(ofRequest: 0) == 0)
        #expect(abs(schedule.intendedSeconds(ofRequest: 150)! - 1.5) < 1e-12)
        #expect(schedule.totalRequests == .max)
    }

    @Test func aPlateauSendsExactlyItsRateEverySecond() throws {
        let schedule = try arrivals("0s:200rps,3s:200rps")
        #expect(schedule.totalRequests == 600)
        for second in 0..<3 {
            let inSecond = (0..<schedule.totalRequests).filter {
                let t = schedule.intendedSeconds(ofRequest: $0)!
                return t >= Double(second) && t < Double(second + 1)
            }
            #expect(inSecond.count == 200)
        }
        #expect(schedule.intendedSeconds(ofRequest: 600) == nil)
    }

    @Test func aLinearRampFollowsTheIntegralOfTheRate() throws {
        // 0 → 300 rps over 3 s: arrivals(t) = 50 t², so 50, 150 and 250 requests in the three seconds.
        let schedule = try arrivals("3s:300rps")
        #expect(schedule.totalRequests == 450)
        #expect(abs(schedule.plannedArrivals(from: 1, to: 2) - 150) < 1e-9)
        var perSecond = [0, 0, 0]
        for request in 0..<schedule.totalRequests {
            perSecond[Int(schedule.intendedSeconds(ofRequest: request)!)] += 1
        }
        #expect(perSecond == [50, 150, 250])
        // Request k is due when the arrivals reach k.
        #expect(abs(schedule.intendedSeconds(ofRequest: 200)! - 2) < 1e-9)
    }

    @Test func rampsUpHoldsAndRampsDown() throws {
        let schedule = try arrivals("1s:100rps,2s:100rps,1s:0rps")
        #expect(schedule.totalRequests == 50 + 200 + 50)
        #expect(abs(schedule.plannedArrivals(from: 3, to: 4) - 50) < 1e-9)
        // Due times never go backwards, and the last is inside the last stage.
        let times = (0..<schedule.totalRequests).map { schedule.intendedSeconds(ofRequest: $0)! }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(times.last! > 3 && times.last! < 4)
        #expect(schedule.totalSeconds == 4)
    }

    @Test func aClosedModelRampsTheWorkersInFlight() throws {
        guard case .concurrency(let schedule) = try BenchStages.parse("2s:10c,1s:10c,1s:0c") else {
            Issue.record("not a closed model")
            return
        }
        #expect(schedule.maxConcurrency == 10)
        #expect(schedule.totalSeconds == 4)
        #expect(abs(schedule.level(at: 1) - 5) < 1e-9)
        // Worker 0 may send right away; worker 4 once the level passes 4 (at 0.8 s); none after the end.
        #expect(schedule.nextActiveSeconds(worker: 0, atOrAfter: 0.01) == 0.01)
        let fifth = try #require(schedule.nextActiveSeconds(worker: 4, atOrAfter: 0))
        #expect(fifth > 0.8 && fifth < 0.801)
        #expect(schedule.nextActiveSeconds(worker: 9, atOrAfter: 3.5) == nil)
        #expect(schedule.nextActiveSeconds(worker: 3, atOrAfter: 4.5) == nil)
    }

    /// Stages adding up to centuries trapped: 10 × 999999999s made the run's length past `Int64` nanoseconds, and
    /// 1000 × 999999999s at 10^7 rps an arrival total past `Int` (while the command checked its arguments). A run
    /// lasts under 1e9 s, as one `-d` does, so both are refused as stages.
    @Test(arguments: [
        Array(repeating: "999999999s:1c", count: 10).joined(separator: ","),
        Array(repeating: "999999999s:10000000rps", count: 1000).joined(separator: ","),
        "600000000s:10rps,400000000s:10rps",
    ])
    func stagesOfCenturiesAreRefused(text: String) {
        #expect {
            try BenchStages.parse(text)
        } throws: { error in
            "\(error)".contains("a run lasts less than 1e9 s")
        }
        #expect(throws: LoadShape.ParseError.self) { try LoadShape(stages: text) }
    }

    /// A schedule made without `parse`'s bounds saturates its request total instead of trapping.
    @Test func anArrivalTotalPastIntSaturates() {
        let stages = Array(repeating: BenchStages.Stage(seconds: 999_999_999, level: 1e7), count: 1000)
        #expect(ArrivalSchedule(stages: stages).totalRequests == .max)
    }

    /// A trailing stage of 0 s made the arrivals after it NaN: its slope was a jump divided by 0 s, times 0.
    @Test func arrivalsPastAZeroLengthStageStayFinite() throws {
        let schedule = try arrivals("1s:100rps,0s:50rps")
        #expect(schedule.totalRequests == 50)
        #expect(schedule.arrivals(at: 2) == 50)
        #expect(schedule.plannedArrivals(from: 0.5, to: 5) == 37.5)
        let plateau = try arrivals("1s:100rps,0s:100rps")
        #expect(plateau.arrivals(at: 1.5) == 50)
    }

    /// `--stages 2s:0rps` was accepted and sent nothing (exit 0) while `2s:0c` was refused: a rate plan with no
    /// requests, all zero or above zero only over no time, is refused the same way.
    @Test(arguments: ["2s:0rps", "2s:0rps,3s:0rps", "1s:0rps,0s:100rps"])
    func aRatePlanThatSendsNothingIsRefused(text: String) {
        #expect {
            try BenchStages.parse(text)
        } throws: { error in
            "\(error)".contains("the stages plan no requests")
        }
    }

    @Test(arguments: [
        ("30s", "DURATION:LEVEL"),
        ("ten:100rps", "not a duration"),
        ("10s:fast", "neither"),
        ("10s:100rps,10s:16c", "cannot be mixed"),
        ("0s:100rps", "last no time"),
        ("10s:0c", "0 connections"),
        ("10s:-5rps", "neither"),
    ])
    func rejectsMalformedStages(text: String, reason: String) {
        #expect {
            try BenchStages.parse(text)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }
}
