import CurlewEngine
import Foundation

/// A load shape given with `--stages`: stages of a duration each, ramping linearly from the previous stage's level
/// (the first from 0) to their own. `30s:100rps,2m:500rps,30s:0rps` is an open model (requests per second,
/// whatever the server does); `1m:16c,1m:256c` a closed model (requests in flight).
package enum BenchStages: Sendable, Equatable {
    case arrivals(ArrivalSchedule)
    case concurrency(ConcurrencySchedule)

    package struct ParseError: Error, CustomStringConvertible {
        package let description: String
    }

    package static let grammar =
        "DURATION:LEVEL,… with every level in requests per second (30s:100rps,2m:500rps) "
        + "or every level in connections (1m:16c,1m:256c)"

    package static func parse(_ text: String) throws(ParseError) -> BenchStages {
        func fail(_ reason: String) -> ParseError {
            ParseError(description: "--stages \(text.debugDescription): \(reason); expected \(grammar)")
        }
        var rates: [Stage] = []
        var connections: [Stage] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            guard pieces.count == 2 else { throw fail("stage \(String(part).debugDescription) is not DURATION:LEVEL") }
            guard let duration = ScaledNumber.duration(String(pieces[0])) else {
                throw fail("\(String(pieces[0]).debugDescription) is not a duration")
            }
            let level = pieces[1].trimmingCharacters(in: .whitespaces).lowercased()
            let seconds = duration.seconds
            if level.hasSuffix("rps"), let rate = Double(level.dropLast(3)), rate >= 0, rate.isFinite,
                rate <= 10_000_000
            {
                rates.append(Stage(seconds: seconds, level: rate))
            } else if level.hasSuffix("c"), let count = Int(level.dropLast()), count >= 0,
                count <= LoadPlan.maximumConnections
            {
                connections.append(Stage(seconds: seconds, level: Double(count)))
            } else {
                throw fail("\(level.debugDescription) is neither requests per second (100rps) nor connections (16c)")
            }
        }
        if !rates.isEmpty && !connections.isEmpty { throw fail("rates and connections cannot be mixed") }
        let stages = rates.isEmpty ? connections : rates
        guard stages.contains(where: { $0.seconds > 0 }) else { throw fail("the stages last no time") }
        let totalSeconds = stages.reduce(0) { $0 + $1.seconds }
        guard totalSeconds < longestSeconds else {
            throw fail(
                String(format: "the stages last %.0f s in all; a run lasts less than 1e9 s (31 years)", totalSeconds))
        }
        if rates.isEmpty {
            guard stages.contains(where: { $0.level > 0 }) else { throw fail("every stage has 0 connections") }
            return .concurrency(ConcurrencySchedule(stages: stages))
        }
        let schedule = ArrivalSchedule(stages: stages)
        // As with 0 connections: a plan that sends nothing (`2s:0rps`) is a mistake, not a run that passes.
        guard schedule.totalRequests > 0 else { throw fail("the stages plan no requests: the rate is 0 throughout") }
        return .arrivals(schedule)
    }

    /// The longest run stages may plan, in seconds: the bound of one duration (`ScaledNumber.duration`), so the
    /// run's end fits in `Int64` nanoseconds and its arrivals (at most 10^7 per second) in an `Int`. Ten stages of
    /// `999999999s` (317 years) trapped when the run's length was made; a plan of centuries is a typo.
    package static let longestSeconds = 1e9

    /// One stage: ramp to `level` over `seconds`.
    package struct Stage: Sendable, Equatable {
        package var seconds: Double
        package var level: Double

        package init(seconds: Double, level: Double) {
            self.seconds = seconds
            self.level = level
        }
    }
}

/// When each request of an open-model run is due: request k is sent when the planned arrivals (the integral of
/// the rate) reach k, so every second carries exactly the planned number of requests and a late request keeps
/// its intended time (latency counts from it).
package struct ArrivalSchedule: Sendable, Equatable {
    private struct Segment: Sendable, Equatable {
        var start: Double
        var seconds: Double
        var fromRate: Double
        var toRate: Double
        /// Requests planned before this segment.
        var arrivalsBefore: Double
        var arrivals: Double { (fromRate + toRate) / 2 * seconds }
    }

    private let segments: [Segment]
    /// Requests the schedule plans in all (`Int.max` for an endless constant rate).
    package let totalRequests: Int
    /// How long the schedule lasts, nil when it does not end.
    package let totalSeconds: Double?

    package init(stages: [BenchStages.Stage]) {
        var segments: [Segment] = []
        var time = 0.0, arrivals = 0.0, rate = 0.0
        for stage in stages {
            let segment = Segment(
                start: time, seconds: stage.seconds, fromRate: rate, toRate: stage.level, arrivalsBefore: arrivals)
            segments.append(segment)
            time += stage.seconds
            arrivals += segment.arrivals
            rate = stage.level
        }
        self.segments = segments
        // Request k goes out when the arrivals reach k, so k = 0 … ⌈arrivals⌉ - 1; the tolerance keeps a total that
        // is whole but for rounding (3 × 33.333…) from gaining a request.
        // Saturating, so a schedule made without `parse`'s bounds cannot trap here.
        let whole = (arrivals - 1e-6).rounded(.up)
        self.totalRequests = whole < 0x1p63 ? Int(whole) : .max
        self.totalSeconds = time
    }

    /// `rate` requests per second for ever (`--rate` without `--stages`).
    package init(constantRate rate: Double) {
        self.segments = [Segment(start: 0, seconds: .infinity, fromRate: rate, toRate: rate, arrivalsBefore: 0)]
        self.totalRequests = .max
        self.totalSeconds = nil
    }

    /// Seconds from the start at which request `index` (from 0) is due, or nil if the schedule has no such request.
    package func intendedSeconds(ofRequest index: Int) -> Double? {
        guard index < totalRequests else { return nil }
        let target = Double(index)
        for segment in segments where target < segment.arrivalsBefore + segment.arrivals || segment.seconds == .infinity
        {
            let remaining = target - segment.arrivalsBefore
            if segment.fromRate == segment.toRate {
                return segment.start + remaining / segment.fromRate
            }
            // Arrivals t seconds into the segment: r0·t + (r1 - r0)·t² / (2T). Solving for t in the form without
            // cancellation: t = 2m / (r0 + √(r0² + 2m(r1 - r0)/T)).
            let slope = (segment.toRate - segment.fromRate) / segment.seconds
            let discriminant = max(segment.fromRate * segment.fromRate + 2 * remaining * slope, 0)
            let denominator = segment.fromRate + discriminant.squareRoot()
            guard denominator > 0 else { return segment.start }
            return segment.start + min(2 * remaining / denominator, segment.seconds)
        }
        return nil
    }

    /// The planned requests in `[from, to)` seconds: what a second of the server's log should show.
    package func plannedArrivals(from start: Double, to end: Double) -> Double {
        arrivals(at: end) - arrivals(at: start)
    }

    /// Requests planned before `seconds` from the start.
    package func arrivals(at seconds: Double) -> Double {
        var total = 0.0
        for segment in segments {
            guard seconds > segment.start else { break }
            let t = min(seconds - segment.start, segment.seconds)
            // A stage of 0 s adds no arrivals; its slope (a jump over no time) would be ±∞ or NaN, and ∞ × 0 NaN.
            let slope =
                segment.seconds.isFinite && segment.seconds > 0
                ? (segment.toRate - segment.fromRate) / segment.seconds : 0
            total = segment.arrivalsBefore + segment.fromRate * t + slope * t * t / 2
        }
        return total
    }
}

/// How many requests may be in flight at each moment of a closed-model run: worker i sends requests while the
/// level is above i, and waits otherwise.
package struct ConcurrencySchedule: Sendable, Equatable {
    private let stages: [BenchStages.Stage]
    /// The highest level: how many workers the run needs.
    package let maxConcurrency: Int
    package let totalSeconds: Double

    package init(stages: [BenchStages.Stage]) {
        self.stages = stages
        self.maxConcurrency = Int(stages.map(\.level).max() ?? 0)
        self.totalSeconds = stages.reduce(0) { $0 + $1.seconds }
    }

    /// The level (requests in flight allowed) at `seconds` from the start; ramps are linear, 0 after the end.
    package func level(at seconds: Double) -> Double {
        var start = 0.0, previous = 0.0
        for stage in stages {
            if seconds < start + stage.seconds {
                return previous + (stage.level - previous) * (seconds - start) / stage.seconds
            }
            start += stage.seconds
            previous = stage.level
        }
        return 0
    }

    /// The first moment at or after `seconds` when worker `worker` (from 0) may send, or nil if it may not again
    /// before the run ends.
    package func nextActiveSeconds(worker: Int, atOrAfter seconds: Double) -> Double? {
        let needed = Double(worker)
        var start = 0.0, previous = 0.0
        for stage in stages {
            let end = start + stage.seconds
            defer {
                start = end
                previous = stage.level
            }
            guard end > seconds else { continue }
            let from = max(seconds, start)
            if level(at: from) > needed { return from }
            // The level rises past `needed` within this stage only on an upward ramp.
            guard stage.level > needed, stage.level > previous else { continue }
            let crossing = start + (needed - previous) / (stage.level - previous) * stage.seconds
            // Just past the crossing, where the level is strictly above `needed`.
            let after = crossing.nextUp + 1e-9
            if after < end { return max(after, from) }
        }
        return nil
    }
}
