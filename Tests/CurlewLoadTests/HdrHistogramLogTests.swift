import CLibCurl
import Foundation
import Testing

@testable import CurlewLoad

@Suite struct HdrHistogramLogTests {
    @Test func countsIndexIsHdrHistogramsForThreeDigits() {
        let layout = HdrHistogramEncoding.CountsLayout(significantDigits: 3)
        // Bucket 0 holds 0…2047 one by one; every later bucket holds the upper half of its range at half the
        // resolution of the one before.
        #expect(layout.index(of: 0) == 0)
        #expect(layout.index(of: 2047) == 2047)
        #expect(layout.index(of: 2048) == 2048)
        #expect(layout.index(of: 2049) == 2048)
        #expect(layout.index(of: 4096) == 3072)
        #expect(layout.index(of: 60_000_000) > layout.index(of: 59_000_000))
    }

    @Test func payloadHasTheV2HeaderAndZeroRunEncodedCounts() {
        var histogram = BenchTally.emptyHistogram()
        _ = histogram.record(1)
        _ = histogram.record(5)
        let payload = HdrHistogramEncoding.payload(histogram)
        #expect(Array(payload[0..<4]) == [0x1c, 0x84, 0x93, 0x13])
        // Payload length, normalizing offset 0, 3 digits, lowest 1.
        #expect(Array(payload[4..<8]) == [0, 0, 0, 4])
        #expect(Array(payload[8..<16]) == [0, 0, 0, 0, 0, 0, 0, 3])
        #expect(Array(payload[16..<24]) == [0, 0, 0, 0, 0, 0, 0, 1])
        // Counts [0, 1, 0, 0, 0, 1]: a single zero as 0, then 1 (ZigZag 2), three zeros as -3 (ZigZag 5), then 1.
        #expect(Array(payload[40...]) == [0x00, 0x02, 0x05, 0x02])
    }

    @Test func compressedFormInflatesToThePayload() throws {
        var histogram = BenchTally.emptyHistogram()
        for value in [10, 200, 3_000, 40_000, 500_000] as [UInt64] { _ = histogram.record(value, count: 3) }
        let compressed = try HdrHistogramEncoding.compressed(histogram)
        #expect(Array(compressed[0..<4]) == [0x1c, 0x84, 0x93, 0x14])
        let length = compressed[4..<8].reduce(0) { $0 << 8 | Int($1) }
        #expect(length == compressed.count - 8)
        let payload = HdrHistogramEncoding.payload(histogram)
        var inflated = [UInt8](repeating: 0, count: payload.count + 16)
        var inflatedLength = uLong(inflated.count)
        let status = Array(compressed[8...]).withUnsafeBufferPointer { input in
            uncompress(&inflated, &inflatedLength, input.baseAddress, uLong(input.count))
        }
        #expect(status == Z_OK)
        #expect(Array(inflated[..<Int(inflatedLength)]) == payload)
        #expect(try HdrHistogramEncoding.base64(histogram).hasPrefix("HISTF"))
    }

    @Test func encodedHistogramsReadBackBucketForBucket() throws {
        var histogram = BenchTally.emptyHistogram()
        for value: UInt64 in [1, 2, 3, 2047, 2048, 2049, 4097, 150_000, 59_999_999] {
            _ = histogram.record(value, count: value % 5 + 1)
        }
        _ = histogram.record(70_000_000)  // beyond the initial range: grown on demand
        let read = try HdrHistogramEncoding.histogram(base64: Substring(HdrHistogramEncoding.base64(histogram)))
        #expect(read.totalCount == histogram.totalCount)
        #expect(
            Array(read.recordedValues().map { ($0.value, $0.count) }).elementsEqual(
                histogram.recordedValues().map { ($0.value, $0.count) }, by: ==))
        // The encoding keeps buckets, not values: every percentile falls in the same bucket (the largest ones are
        // capped at the maximum, which the encoding knows only to its bucket).
        let layout = HdrHistogramEncoding.CountsLayout(significantDigits: 3)
        for percentile in [1.0, 50, 90, 99, 99.9, 99.99] {
            #expect(
                layout.index(of: read.valueAtPercentile(percentile))
                    == layout.index(of: histogram.valueAtPercentile(percentile)))
        }
        #expect(throws: HdrHistogramEncoding.Failure.self) {
            try HdrHistogramEncoding.histogram(base64: "bm90IGEgaGlzdG9ncmFt")
        }
        #expect(throws: HdrHistogramEncoding.Failure.self) { try HdrHistogramEncoding.histogram(base64: "!!") }
    }

    /// A V2 encoding with `counts` (ZigZag LEB128 bytes) after a payload header for 3 digits from 1.
    private func encoding(counts: [UInt8]) -> Substring {
        var payload: [UInt8] = []
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { payload += $0 } }
        append(HdrHistogramEncoding.encodingCookie)
        append(UInt32(counts.count))
        append(UInt32(0))
        append(UInt32(3))
        append(UInt64(1))
        append(UInt64(60_000_000))
        append((1.0).bitPattern)
        payload += counts
        var length = compressBound(uLong(payload.count))
        var deflated = [UInt8](repeating: 0, count: Int(length))
        _ = compress2(&deflated, &length, payload, uLong(payload.count), Z_DEFAULT_COMPRESSION)
        var wrapped: [UInt8] = []
        withUnsafeBytes(of: HdrHistogramEncoding.compressionCookie.bigEndian) { wrapped += $0 }
        withUnsafeBytes(of: UInt32(length).bigEndian) { wrapped += $0 }
        return Substring(Data(wrapped + deflated[..<Int(length)]).base64EncodedString())
    }

    /// A zero run past every value a histogram holds used to put the next count at value 0, a run of Int64.min zeros
    /// trapped, and so did latencies whose sum overflows HdrHistogram's (the first and last found by the hdr-log
    /// fuzz target): such encodings are refused.
    @Test(arguments: [
        [0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x02] as [UInt8],  // 2^55 + 1 zeros, then a 1
        [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02],  // a run of -Int64.min zeros, then a 1
        [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
        // 30,000 zeros, then 2^40 latencies of ~4 days: their sum would trap HdrHistogram's mean.
        [0xDF, 0xD4, 0x03, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40],
    ])
    func countsThatCannotReadBackAsWrittenAreRefused(counts: [UInt8]) {
        #expect(throws: HdrHistogramEncoding.Failure.self) {
            try HdrHistogramEncoding.histogram(base64: encoding(counts: counts))
        }
    }

    /// A histogram may hold latencies adding up to its share of 2^64 µs: as much as its run's shards leave it. The
    /// intervals of one log share one budget, since the merge adds the intervals that fall in one slot.
    @Test func aHistogramsLatenciesMayAddUpToItsShareOfTheMergesSum() throws {
        var histogram = BenchTally.emptyHistogram()
        _ = histogram.record(1_000_000_000, count: 200_000)
        let text = Substring(try HdrHistogramEncoding.base64(histogram))
        let single = try HdrHistogramEncoding.histogram(base64: text, latencyLimit: .max)
        #expect(single.totalCount == 200_000)
        #expect(throws: HdrHistogramEncoding.Failure.self) { try HdrHistogramEncoding.histogram(base64: text) }
        #expect(throws: HdrHistogramEncoding.Failure.self) {
            try HdrHistogramEncoding.histogram(
                base64: text, latencyLimit: HdrHistogramEncoding.latencyLimit(shards: 1_000_000))
        }

        let path = NSTemporaryDirectory() + "curlew-\(UUID().uuidString).hlog"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try HdrHistogramLogWriter(path: path, startTime: Date(timeIntervalSince1970: 1_700_000_000))
        for second in 0..<3 {
            try writer.append(
                BenchInterval(
                    startSeconds: Double(second), endSeconds: Double(second + 1), histogram: histogram, failed: 0,
                    statusCounts: [:], totalRequests: 200_000 * (second + 1), totalFailed: 0))
        }
        writer.close()
        // Each interval's latencies add up to about 2 × 10^14 µs.
        #expect(try HdrHistogramLogReader.read(path: path, latencyLimit: 700_000_000_000_000).entries.count == 3)
        // Each interval alone is within 2.5 × 10^14; the three together are not.
        #expect(throws: HdrHistogramEncoding.Failure.self) {
            try HdrHistogramLogReader.read(path: path, latencyLimit: 250_000_000_000_000)
        }
    }

    @Test func zeroRunsAndCountsReadBackAtTheirValues() throws {
        // 3 zeros (ZigZag 5), then 2 at index 3.
        let histogram = try HdrHistogramEncoding.histogram(base64: encoding(counts: [0x05, 0x04]))
        #expect(histogram.totalCount == 2)
        #expect(histogram.max == 3)
    }

    @Test func theLogWriterOutputReadsBackWithItsStartTime() throws {
        let path = NSTemporaryDirectory() + "curlew-\(UUID().uuidString).hlog"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try HdrHistogramLogWriter(path: path, startTime: Date(timeIntervalSince1970: 1_700_000_000.25))
        var histogram = BenchTally.emptyHistogram()
        _ = histogram.record(1234, count: 3)
        try writer.append(
            BenchInterval(
                startSeconds: 0, endSeconds: 1, histogram: histogram, failed: 0, statusCounts: [:], totalRequests: 3,
                totalFailed: 0))
        try writer.append(
            BenchInterval(
                startSeconds: 1, endSeconds: 2.5, histogram: BenchTally.emptyHistogram(), failed: 0, statusCounts: [:],
                totalRequests: 3, totalFailed: 0))
        writer.close()
        let log = try HdrHistogramLogReader.read(path: path)
        #expect(log.startTime == 1_700_000_000.25)
        #expect(log.entries.map(\.startSeconds) == [0, 1])
        #expect(log.entries.map(\.lengthSeconds) == [1, 1.5])
        #expect(log.entries.map(\.histogram.totalCount) == [3, 0])
    }
}
