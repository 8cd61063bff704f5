import CLibCurl
import Testing

@testable import CurlewEngine

/// The shell between libcurl's write callback and the sink for a content-encoded body: bounded pieces whatever the
/// ratio, and a sink that pauses gets every decoded byte exactly once when libcurl offers the same bytes again.
@Suite struct ResponseBodyDecodingTests {
    static let pause = Int(CURL_WRITEFUNC_PAUSE)

    /// How libcurl offers the bytes the sink paused on.
    enum Redelivery: CaseIterable {
        /// The same bytes (libcurl 7.88).
        case same
        /// The same bytes with the next piece joined on (libcurl 8 adds what came in meanwhile).
        case joined
        /// The same bytes in two pieces (no libcurl does so; the decoding must not decode them twice).
        case split
    }

    /// Offers `pieces` as libcurl does to a sink that pauses on every `pauseEvery`-th store, offering the bytes it
    /// paused on again as `redelivery` says. Returns what the sink took and how many pauses it made.
    func run(
        _ encoded: [UInt8], pieceSize: Int, pauseEvery: Int, redelivery: Redelivery
    ) throws -> (body: [UInt8], pauses: Int) {
        let decoding = try #require(ResponseBodyDecoding(.decode(.gzip)))
        var body: [UInt8] = []
        var stores = 0
        var pauses = 0
        var pending = ContentEncoding.pieces(encoded, size: pieceSize)
        while !pending.isEmpty {
            let offered = pending.removeFirst()
            let answer = try offered.withUnsafeBytes { bytes in
                try decoding.receive(bytes) { decoded in
                    stores += 1
                    if stores % pauseEvery == 0 { return Self.pause }
                    body += decoded
                    return decoded.count
                }
            }
            if answer == Self.pause {
                pauses += 1
                switch redelivery {
                case .joined where !pending.isEmpty:
                    pending[0] = offered + pending[0]
                case .split where offered.count > 1:
                    let half = offered.count / 2
                    pending.insert(contentsOf: [Array(offered[..<half]), Array(offered[half...])], at: 0)
                default:
                    pending.insert(offered, at: 0)
                }
            } else {
                #expect(answer == offered.count)
            }
        }
        #expect(decoding.failureAtEndOfBody == nil)
        return (body, pauses)
    }

    @Test(arguments: Redelivery.allCases)
    func aSinkThatPausesGetsEveryDecodedByteOnce(redelivery: Redelivery) throws {
        let body = ContentEncoding.sampleBody(size: 1_000_000)
        let encoded = ContentEncoding.gzip(body)
        for (pieceSize, pauseEvery) in [(16_384, 2), (1000, 3), (encoded.count, 2)] {
            let result = try run(encoded, pieceSize: pieceSize, pauseEvery: pauseEvery, redelivery: redelivery)
            #expect(result.body == body, "pieces of \(pieceSize), a pause every \(pauseEvery) stores")
            #expect(result.pauses > 0)
        }
    }

    @Test func aHighlyCompressedBodyReachesTheSinkInBoundedPieces() throws {
        // 64 MiB of zeros is about 64 KiB of gzip: one piece of it expands a thousandfold.
        let encoded = ContentEncoding.gzip([UInt8](repeating: 0, count: 64 << 20))
        let decoding = try #require(ResponseBodyDecoding(.decode(.gzip)))
        var largest = 0
        var total = 0
        let answer = try encoded.withUnsafeBytes { bytes in
            try decoding.receive(bytes) { decoded in
                largest = max(largest, decoded.count)
                total += decoded.count
                // A collecting sink at its limit says no: the decoding stops there.
                return total > 8 << 20 ? 0 : decoded.count
            }
        }
        #expect(answer == 0)
        #expect(largest <= ResponseBodyDecoding.outputCapacity)
        #expect(total <= 8 << 20 + ResponseBodyDecoding.outputCapacity)
    }

    @Test func aCodingTheEngineDoesNotDecodeFailsOnTheFirstByte() throws {
        let decoding = try #require(ResponseBodyDecoding(.unsupported("compress")))
        let error = try #require(throws: ContentDecodingError.self) {
            _ = try [UInt8]("x".utf8).withUnsafeBytes { bytes in try decoding.receive(bytes) { $0.count } }
        }
        #expect(error.detail.contains("compress"))
        #expect(ResponseBodyDecoding(.identity) == nil)
    }
}
