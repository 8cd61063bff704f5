import CLibCurl
import Foundation

@testable import CurlewLoad

/// The `--hdr-log` interval log (HdrHistogram's format 1.3 with V2 compressed histograms), as `curlew merge` reads
/// it back. The first byte picks one of three cases:
///
/// - what `HdrHistogramLogWriter` writes reads back as the same intervals, count for count;
/// - that file with a byte changed, bytes cut off or inserted is refused with a message, or reads back as intervals
///   whose histograms are each one of the written ones: a histogram never changes silently (a line that became a
///   comment is gone, which the merge's check against the shard's interval counts catches);
/// - a histogram whose payload (header fields and counts) comes from the input, compressed and wrapped as the format
///   says, is refused, or reads back as exactly the counts a decoder written here from the format finds in it.
enum HdrLogProperty {
    /// Counts by counts-array index (the format's own coordinates).
    typealias Counts = [UInt64: UInt64]

    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        switch input.byte() % 3 {
        case 0, 1:
            let mutates = bytes.first.map { $0 % 3 == 1 } ?? false
            return checkWrittenLog(&input, mutated: mutates)
        default:
            return checkCraftedPayload(&input)
        }
    }

    private static func checkWrittenLog(_ input: inout FuzzInput, mutated: Bool) -> String? {
        var intervals: [BenchInterval] = []
        for number in 0..<input.number(below: 5) {
            var histogram = BenchTally.emptyHistogram()
            for _ in 0..<input.number(below: 6) {
                // Values from 0 to 4.5 minutes in microseconds, at every resolution the layout has, counted up to
                // 4096 times: within what a reader takes back (HdrHistogramEncoding.latencyLimit).
                let value = UInt64(input.number(below: 1 << 16)) << UInt64(input.byte() % 13)
                _ = histogram.record(value, count: UInt64(1 + input.number(below: 1 << 12)))
            }
            intervals.append(
                BenchInterval(
                    startSeconds: Double(number), endSeconds: Double(number) + 1, histogram: histogram, failed: 0,
                    statusCounts: [:], totalRequests: 0, totalFailed: 0))
        }
        let path = NSTemporaryDirectory() + "curlew-fuzz-\(getpid())-\(UUID().uuidString).hlog"
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let writer = try HdrHistogramLogWriter(path: path, startTime: Date(timeIntervalSince1970: 1_795_514_400))
            for interval in intervals { try writer.append(interval) }
            writer.close()
        } catch {
            return "the log cannot be written: \(error)"
        }
        let written = intervals.map { counts(of: $0.histogram) }
        if mutated {
            guard var file = FileManager.default.contents(atPath: path).map(Array.init), !file.isEmpty else {
                return "the log is empty"
            }
            let position = input.number(below: file.count)
            switch input.byte() % 3 {
            case 0: file[position] ^= max(input.byte(), 1)
            case 1: file.removeSubrange(position...)
            default: file.insert(contentsOf: input.field(), at: position)
            }
            _ = FileManager.default.createFile(atPath: path, contents: Data(file))
        }
        let entries: [HdrHistogramLogEntry]
        do {
            entries = try HdrHistogramLogReader.read(path: path).entries
        } catch {
            return mutated && error.description.contains(path) ? nil : "the log is refused: \(error)"
        }
        for (number, entry) in entries.enumerated() {
            if let failure = inconsistency(entry.histogram) { return "interval \(number): \(failure)" }
            let read = counts(of: entry.histogram)
            if mutated ? !written.contains(read) : read != written[number] {
                return
                    "interval \(number) reads back as \(read), written \(mutated ? "\(written)" : "\(written[number])")"
            }
        }
        if !mutated {
            guard entries.count == intervals.count else { return "\(intervals.count) intervals, \(entries.count) read" }
            for (entry, interval) in zip(entries, intervals)
            where abs(entry.startSeconds - interval.startSeconds) > 0.001
                || abs(entry.lengthSeconds - (interval.endSeconds - interval.startSeconds)) > 0.001
            {
                return "an interval of \(interval.startSeconds) s reads back at \(entry.startSeconds) s"
            }
        }
        return nil
    }

    private static func checkCraftedPayload(_ input: inout FuzzInput) -> String? {
        var payload: [UInt8] = []
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { payload += $0 } }
        let flags = input.byte()
        let countBytes = input.rest()
        append(flags & 1 == 0 ? HdrHistogramEncoding.encodingCookie : 0x1c84_9301)
        append(flags & 2 == 0 ? UInt32(countBytes.count) : UInt32(countBytes.count) &+ UInt32(flags >> 4))
        append(UInt32(0))
        append(UInt32(flags & 4 == 0 ? 3 : 2))
        append(UInt64(flags & 8 == 0 ? 1 : 1000))
        append(UInt64(3_600_000_000))
        append((1.0).bitPattern)
        payload += countBytes
        var bound = compressBound(uLong(payload.count))
        var deflated = [UInt8](repeating: 0, count: Int(bound))
        guard compress2(&deflated, &bound, payload, uLong(payload.count), Z_DEFAULT_COMPRESSION) == Z_OK else {
            return "zlib cannot compress"
        }
        var wrapped: [UInt8] = []
        withUnsafeBytes(of: HdrHistogramEncoding.compressionCookie.bigEndian) { wrapped += $0 }
        withUnsafeBytes(of: UInt32(bound).bigEndian) { wrapped += $0 }
        wrapped += deflated[..<Int(bound)]
        let expected = Reference.counts(
            payload: countBytes,
            declaredLength: Int(UInt32(countBytes.count) &+ (flags & 2 == 0 ? 0 : UInt32(flags >> 4))))
        let histogram: LatencyHistogram
        do {
            histogram = try HdrHistogramEncoding.histogram(base64: Substring(Data(wrapped).base64EncodedString()))
        } catch {
            return error.description.isEmpty ? "a refusal without a message" : nil
        }
        // A foreign cookie, 2 digits or a lowest value of 1000 is not what curlew reads.
        guard flags & 0b1101 == 0, let expected else {
            return "a payload the format does not allow (flags \(flags & 0x0F)) is read as \(counts(of: histogram))"
        }
        if let failure = inconsistency(histogram) { return failure }
        let read = counts(of: histogram)
        return read == expected ? nil : "the payload holds \(expected), read as \(read)"
    }

    /// The histogram's counts by index, as HdrHistogram's layout for 3 digits from 1 places them.
    static func counts(of histogram: LatencyHistogram) -> Counts {
        let layout = HdrHistogramEncoding.CountsLayout(significantDigits: 3)
        var counts: Counts = [:]
        for bucket in histogram.recordedValues() where bucket.count > 0 {
            counts[UInt64(layout.index(of: bucket.value)), default: 0] += UInt64(bucket.count)
        }
        return counts
    }

    /// A total that is not the sum of the counts: a count that wrapped around, or was lost.
    static func inconsistency(_ histogram: LatencyHistogram) -> String? {
        var sum: UInt64 = 0
        for bucket in histogram.recordedValues() {
            let (added, overflow) = sum.addingReportingOverflow(UInt64(bucket.count))
            if overflow { return "its counts add up beyond 2^64" }
            sum = added
        }
        return sum == histogram.totalCount ? nil : "its total is \(histogram.totalCount), its counts add up to \(sum)"
    }

    /// The V2 counts array as the format describes it: each entry a ZigZag LEB128 number (at most 9 bytes, the
    /// ninth holding 8 bits); a negative entry is a run of that many zero counts.
    private enum Reference {
        static func counts(payload: [UInt8], declaredLength: Int) -> Counts? {
            guard declaredLength <= payload.count else { return nil }
            var counts: Counts = [:]
            var index: UInt64 = 0
            var total: UInt64 = 0
            var position = 0
            while position < declaredLength {
                var raw: UInt64 = 0
                for step in 0..<9 {
                    guard position < declaredLength else { return nil }
                    let byte = payload[position]
                    position += 1
                    if step == 8 {
                        raw |= UInt64(byte) << 56
                        break
                    }
                    raw |= UInt64(byte & 0x7F) << UInt64(7 * step)
                    if byte & 0x80 == 0 { break }
                }
                let isNegative = raw & 1 == 1
                let magnitude = isNegative ? (raw >> 1) + 1 : raw >> 1
                if isNegative {
                    // Zeros past every index are no count: only a count there is beyond the format.
                    let (next, overflow) = index.addingReportingOverflow(magnitude)
                    index = overflow ? .max : next
                } else {
                    if magnitude > 0 {
                        counts[index] = magnitude
                        let (sum, overflow) = total.addingReportingOverflow(magnitude)
                        if overflow { return nil }
                        total = sum
                    }
                    let (next, overflow) = index.addingReportingOverflow(1)
                    index = overflow ? .max : next
                }
            }
            return counts
        }
    }
}
