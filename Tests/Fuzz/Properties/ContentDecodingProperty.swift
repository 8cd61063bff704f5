import CLibCurl

@testable import CurlewEngine

/// The engine's response decoding (`ResponseBodyDecoding` over `ContentDecoder`) under any bytes, in any pieces, to a
/// sink that pauses at any rhythm with libcurl's redelivery (the same bytes again, perhaps with the next piece joined
/// on): it never crashes, never hands the sink more than its buffer at once, and pausing changes nothing (the same
/// bytes and the same verdict as a sink that never pauses). A gzip body the engine's own request compression made
/// from the input decodes back to the input, whole.
enum ContentDecodingProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let coding = ContentCoding.allCases[input.number(below: ContentCoding.allCases.count)]
        let pieceSize = 1 + input.number(below: 600)
        let pauseEvery = 1 + input.number(below: 4)
        let joinsAfterPause = input.byte() & 1 == 1
        let roundTrip = input.byte() & 1 == 1
        let rest = input.rest()
        guard coding.isAvailable else { return nil }
        if roundTrip {
            guard let gzip = compressed(rest) else { return "the request compression failed" }
            let decoded = run(.gzip, gzip, pieceSize: pieceSize, pauseEvery: pauseEvery, joins: joinsAfterPause)
            if let failure = decoded.failure { return "a gzip body of \(rest.count) bytes failed: \(failure)" }
            if decoded.body != rest { return "a gzip body of \(rest.count) bytes decoded to other bytes" }
            if decoded.failureAtEnd != nil { return "a whole gzip body was reported cut short" }
            return decoded.oversized ? "the sink got more than the buffer at once" : nil
        }
        let steady = run(coding, rest, pieceSize: pieceSize, pauseEvery: 0, joins: false)
        let paused = run(coding, rest, pieceSize: pieceSize, pauseEvery: pauseEvery, joins: joinsAfterPause)
        if steady.oversized || paused.oversized { return "the sink got more than the buffer at once" }
        // A failure ends the body where it is found; up to there the sinks agree.
        if (steady.failure == nil) != (paused.failure == nil) {
            return "pausing changed the verdict: \(steady.failure ?? "none") / \(paused.failure ?? "none")"
        }
        if steady.failure == nil && steady.body != paused.body { return "pausing changed the decoded bytes" }
        if steady.failure == nil && (steady.failureAtEnd == nil) != (paused.failureAtEnd == nil) {
            return "pausing changed whether the body was whole"
        }
        return nil
    }

    private struct Outcome {
        var body: [UInt8] = []
        var failure: String?
        var failureAtEnd: String?
        var oversized = false
    }

    /// `encoded` in pieces of `pieceSize` through a decoding for `coding`, to a sink that pauses every `pauseEvery`-th
    /// store (never for 0); a paused piece is offered again, joined to the next when `joins`.
    private static func run(
        _ coding: ContentCoding, _ encoded: [UInt8], pieceSize: Int, pauseEvery: Int, joins: Bool
    ) -> Outcome {
        var outcome = Outcome()
        guard let decoding = ResponseBodyDecoding(.decode(coding)) else { return outcome }
        var pending = stride(from: 0, to: encoded.count, by: pieceSize).map {
            Array(encoded[$0..<min($0 + pieceSize, encoded.count)])
        }
        var stores = 0
        var offers = 0
        while !pending.isEmpty {
            offers += 1
            // Each pause is followed by a store that takes: a bound on offers, for a decoder that never moves on.
            if offers > 4 * (encoded.count + 2) * (pauseEvery + 1) + 1_000 {
                outcome.failure = "no progress"
                return outcome
            }
            let offered = pending.removeFirst()
            let answer: Int
            do {
                answer = try offered.withUnsafeBytes { piece in
                    try decoding.receive(piece) { decoded in
                        if decoded.count > ResponseBodyDecoding.outputCapacity { outcome.oversized = true }
                        stores += 1
                        if pauseEvery > 0 && stores % pauseEvery == 0 && stores % (2 * pauseEvery) != 0 {
                            return Int(CURL_WRITEFUNC_PAUSE)
                        }
                        outcome.body += decoded
                        return decoded.count
                    }
                }
            } catch let error as ContentDecodingError {
                outcome.failure = error.detail
                return outcome
            } catch {
                outcome.failure = "\(error)"
                return outcome
            }
            if answer == Int(CURL_WRITEFUNC_PAUSE) {
                if joins, !pending.isEmpty {
                    pending[0] = offered + pending[0]
                } else {
                    pending.insert(offered, at: 0)
                }
            } else if answer != offered.count {
                outcome.failure = "the write callback's answer \(answer) for \(offered.count) bytes"
                return outcome
            }
        }
        outcome.failureAtEnd = decoding.failureAtEndOfBody?.detail
        return outcome
    }

    /// `bytes` through the engine's gzip request compression.
    private static func compressed(_ bytes: [UInt8]) -> [UInt8]? {
        guard case .success(let source) = GzipBodySource.open(MemoryBodySource(bytes), level: 6) else { return nil }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let result = chunk.withUnsafeMutableBytes { source.read(into: $0) }
            switch result {
            case .bytes(let count): output += chunk[..<count]
            case .end: return output
            case .pause, .abort: return nil
            }
        }
    }
}
