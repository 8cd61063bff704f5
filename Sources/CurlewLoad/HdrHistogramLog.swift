import CLibCurl
package import Foundation
import Histogram

/// HdrHistogram's compressed V2 encoding of a histogram, as the Java, C, Go and Python implementations read it
/// (`HISTF…` in base64). hdrhistogram-swift 0.2.0 has only JSON (Codable), so the wire format is written here:
///
/// - payload: encoding cookie, payload length, normalizing index offset (0), significant digits, lowest and highest
///   trackable values, the integer-to-double ratio (1.0), all big-endian; then the counts array up to the max
///   value's index, each count ZigZag-LEB128 encoded and runs of zeros written as their negated length;
/// - wrapper: compression cookie, the deflated payload's length, the payload deflated with zlib.
package enum HdrHistogramEncoding {
    // The low nibble pair 0x10 is the word-size field the Java implementation sets for V2.
    package static let encodingCookie: UInt32 = 0x1c84_9303 | 0x10
    package static let compressionCookie: UInt32 = 0x1c84_9304 | 0x10

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// The compressed encoding in base64.
    package static func base64(_ histogram: LatencyHistogram) throws(Failure) -> String {
        Data(try compressed(histogram)).base64EncodedString()
    }

    package static func compressed(_ histogram: LatencyHistogram) throws(Failure) -> [UInt8] {
        let payload = self.payload(histogram)
        var bound = compressBound(uLong(payload.count))
        var deflated = [UInt8](repeating: 0, count: Int(bound))
        let status = deflated.withUnsafeMutableBufferPointer { output in
            payload.withUnsafeBufferPointer { input in
                compress2(output.baseAddress, &bound, input.baseAddress, uLong(input.count), Z_DEFAULT_COMPRESSION)
            }
        }
        guard status == Z_OK else { throw Failure(description: "zlib compress2 failed (\(status))") }
        var encoded: [UInt8] = []
        encoded.reserveCapacity(8 + Int(bound))
        appendBigEndian(compressionCookie, to: &encoded)
        appendBigEndian(UInt32(bound), to: &encoded)
        encoded += deflated[..<Int(bound)]
        return encoded
    }

    /// The uncompressed V2 payload.
    package static func payload(_ histogram: LatencyHistogram) -> [UInt8] {
        let layout = CountsLayout(significantDigits: 3)
        var counts: [UInt64] = []
        if histogram.totalCount > 0 {
            counts = [UInt64](repeating: 0, count: layout.index(of: histogram.max) + 1)
            for bucket in histogram.recordedValues() { counts[layout.index(of: bucket.value)] += UInt64(bucket.count) }
        }
        var encodedCounts: [UInt8] = []
        var index = 0
        while index < counts.count {
            let count = counts[index]
            index += 1
            var zeros = 0
            if count == 0 {
                zeros = 1
                while index < counts.count && counts[index] == 0 {
                    zeros += 1
                    index += 1
                }
            }
            appendZigZag(zeros > 1 ? -Int64(zeros) : Int64(count), to: &encodedCounts)
        }
        // The reader sizes its counts array from the highest trackable value: keep it above every index written.
        let highest = max(60_000_000, histogram.totalCount > 0 ? histogram.max * 2 : 0)
        var payload: [UInt8] = []
        payload.reserveCapacity(40 + encodedCounts.count)
        appendBigEndian(encodingCookie, to: &payload)
        appendBigEndian(UInt32(encodedCounts.count), to: &payload)
        appendBigEndian(UInt32(0), to: &payload)
        appendBigEndian(UInt32(3), to: &payload)
        appendBigEndian(UInt64(1), to: &payload)
        appendBigEndian(highest, to: &payload)
        appendBigEndian((1.0).bitPattern, to: &payload)
        payload += encodedCounts
        return payload
    }

    /// Where HdrHistogram keeps a value's count, for lowest discernible value 1: the same formula in every
    /// implementation, so an index written here is the reader's index for the same value.
    package struct CountsLayout {
        package let subBucketHalfCountMagnitude: Int
        package let subBucketHalfCount: Int
        package let subBucketMask: UInt64
        package let leadingZeroCountBase: Int

        package init(significantDigits: Int) {
            let largestWithSingleUnitResolution = 2 * pow(10.0, Double(significantDigits))
            let subBucketCountMagnitude = Int(log2(largestWithSingleUnitResolution).rounded(.up))
            subBucketHalfCountMagnitude = max(subBucketCountMagnitude, 1) - 1
            subBucketHalfCount = 1 << subBucketHalfCountMagnitude
            subBucketMask = UInt64((1 << subBucketCountMagnitude) - 1)
            leadingZeroCountBase = 64 - subBucketHalfCountMagnitude - 1
        }

        package func index(of value: UInt64) -> Int {
            let bucket = leadingZeroCountBase - (value | subBucketMask).leadingZeroBitCount
            let subBucket = Int(value >> UInt64(bucket))
            return ((bucket + 1) << subBucketHalfCountMagnitude) + (subBucket - subBucketHalfCount)
        }
    }

    private static func appendBigEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes += $0 }
    }

    /// ZigZag, then LEB128 (HdrHistogram's variant writes a ninth byte of 8 bits, which counts below 2^56 never
    /// reach).
    private static func appendZigZag(_ value: Int64, to bytes: inout [UInt8]) {
        var remaining = UInt64(bitPattern: (value << 1) ^ (value >> 63))
        while remaining >= 0x80 {
            bytes.append(UInt8(remaining & 0x7f) | 0x80)
            remaining >>= 7
        }
        bytes.append(UInt8(remaining))
    }
}

/// Writes an HdrHistogram interval log (format 1.3), one line per interval, as HdrHistogram's log readers (Java
/// `HistogramLogReader`, Python `hdrh.log`, `HistogramLogAnalyzer`) load it. Values are microseconds; the
/// `Interval_Max` column is in milliseconds.
package struct HdrHistogramLogWriter {
    private let handle: FileHandle
    package let path: String

    package init(path: String, startTime: Date) throws(HdrHistogramEncoding.Failure) {
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else {
            throw HdrHistogramEncoding.Failure(description: "cannot create --hdr-log \(path.debugDescription)")
        }
        self.handle = handle
        self.path = path
        let seconds = startTime.timeIntervalSince1970
        let formatter = ISO8601DateFormatter()
        let header = """
            #[Logged with curlew bench; latencies in microseconds]
            #[Histogram log format version 1.3]
            #[StartTime: \(String(format: "%.3f", seconds)) (seconds since epoch), \(formatter.string(from: startTime))]
            #[BaseTime: \(String(format: "%.3f", seconds)) (seconds since epoch)]
            "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"

            """
        try write(header)
    }

    package func append(_ interval: BenchInterval) throws(HdrHistogramEncoding.Failure) {
        let max = interval.histogram.totalCount > 0 ? Double(interval.histogram.max) / 1_000 : 0
        let line = String(
            format: "%.3f,%.3f,%.3f,", interval.startSeconds, interval.endSeconds - interval.startSeconds, max)
        try write(line + HdrHistogramEncoding.base64(interval.histogram) + "\n")
    }

    private func write(_ text: String) throws(HdrHistogramEncoding.Failure) {
        do {
            try handle.write(contentsOf: Data(text.utf8))
        } catch {
            throw HdrHistogramEncoding.Failure(
                description: "cannot write --hdr-log \(path.debugDescription): \(error.localizedDescription)")
        }
    }

    package func close() {
        try? handle.close()
    }
}

extension HdrHistogramEncoding {
    /// Reads the compressed V2 encoding back (what `base64(_:)` writes and other HdrHistogram implementations
    /// write with 3 significant digits and a lowest discernible value of 1): `curlew merge` adds up the shards'
    /// interval histograms from their `--hdr-log`s.
    package static func histogram(
        base64 text: Substring, latencyLimit: UInt64 = latencyLimit
    ) throws(Failure) -> LatencyHistogram {
        try read(base64: text, latencyLimit: latencyLimit).histogram
    }

    /// The histogram, and a bound on what its latencies add up to (µs, at most `latencyLimit`).
    package static func read(
        base64 text: Substring, latencyLimit: UInt64
    ) throws(Failure) -> (histogram: LatencyHistogram, latency: UInt64) {
        guard let data = Data(base64Encoded: String(text)) else { throw Failure(description: "not base64") }
        let bytes = [UInt8](data)
        guard bytes.count >= 8, readBigEndian(UInt32.self, bytes, at: 0) == compressionCookie else {
            throw Failure(description: "not a compressed HdrHistogram (V2) encoding")
        }
        let length = Int(readBigEndian(UInt32.self, bytes, at: 4))
        guard bytes.count >= 8 + length else { throw Failure(description: "the encoding is cut short") }
        let payload = try inflate(Array(bytes[8..<(8 + length)]))
        guard payload.count >= 40, readBigEndian(UInt32.self, payload, at: 0) == encodingCookie else {
            throw Failure(description: "not a V2 HdrHistogram payload")
        }
        let countsLength = Int(readBigEndian(UInt32.self, payload, at: 4))
        let digits = Int(readBigEndian(UInt32.self, payload, at: 12))
        let lowest = readBigEndian(UInt64.self, payload, at: 16)
        guard digits == 3, lowest == 1 else {
            throw Failure(
                description: "a histogram of \(digits) significant digits from \(lowest) (curlew writes 3 from 1)")
        }
        guard payload.count >= 40 + countsLength else { throw Failure(description: "the counts are cut short") }
        var counts = CountsReader(latencyLimit: latencyLimit)
        var position = 40
        let end = 40 + countsLength
        while position < end {
            let count = try readZigZag(payload, at: &position, end: end)
            if count < 0 {
                counts.skip(count == .min ? .max : Int(-count))
            } else {
                try counts.add(UInt64(count))
            }
        }
        return (counts.histogram, counts.latency)
    }

    /// Builds a histogram from counts given index by index (the V2 encoding's order, or a counts array), refusing
    /// what would not read back as written: a count past ``highestIndex`` (HdrHistogram's value arithmetic would
    /// wrap it to another value), counts that add up past `Int64.max` (the histogram's total would wrap), or
    /// latencies that add up past a limit (HdrHistogram's running sum of latencies traps when it overflows, so the
    /// histograms a merge adds must stay under it together).
    package struct CountsReader {
        private let layout = CountsLayout(significantDigits: 3)
        private let latencyLimit: UInt64
        private(set) var index = 0
        private var total: UInt64 = 0
        /// A bound on what the latencies counted so far add up to: each count at its bucket's upper end.
        package private(set) var latency: UInt64 = 0
        package private(set) var histogram = BenchTally.emptyHistogram()

        private let exactMinimum: UInt64?

        /// - Parameters:
        ///   - latencyLimit: the most the latencies may add up to, in µs: ``latencyLimit(shards:)`` for a histogram
        ///     that will be added to the other shards' of its run.
        ///   - exactMinimum: the smallest value counted, as its run recorded it: the first count is recorded at it
        ///     rather than at its bucket's lowest value when it falls in that bucket, so the histogram's `min` is
        ///     the run's (its `max` is raised to the run's after reading, with a count of 0).
        package init(latencyLimit: UInt64 = HdrHistogramEncoding.latencyLimit, exactMinimum: UInt64? = nil) {
            self.latencyLimit = latencyLimit
            self.exactMinimum = exactMinimum
        }

        /// Moves past `count` zero counts.
        package mutating func skip(_ count: Int) {
            // Saturates past the last index: a count there is refused, zeros are not.
            index = count > highestIndex + 1 - index ? highestIndex + 1 : index + count
        }

        /// The count at the current index, then moves to the next one.
        package mutating func add(_ count: UInt64) throws(Failure) {
            defer { skip(1) }
            guard count > 0 else { return }
            guard index <= highestIndex else {
                throw Failure(description: "a count at index \(index), past the largest value a histogram holds")
            }
            let (sum, overflow) = total.addingReportingOverflow(count)
            guard !overflow, sum <= UInt64(Int64.max) else {
                throw Failure(description: "the counts add up past \(Int64.max)")
            }
            total = sum
            // Above every value counted at this index: the next index's lowest value.
            let (weight, weightOverflow) = count.multipliedReportingOverflow(by: layout.value(at: index + 1))
            let (latency, latencyOverflow) = self.latency.addingReportingOverflow(weight)
            guard !weightOverflow, !latencyOverflow, latency <= latencyLimit else {
                throw Failure(description: "the latencies add up past \(latencyLimit) µs")
            }
            self.latency = latency
            var value = layout.value(at: index)
            if total == count, let exactMinimum, layout.index(of: exactMinimum) == index { value = exactMinimum }
            guard histogram.record(value, count: count) else {
                throw Failure(description: "the value at index \(index) does not fit in a histogram")
            }
        }
    }

    /// The most the latencies of one histogram read back may add up to when nothing says how many will be added
    /// together: 2^47 µs (4.5 years, 140 million requests of a second each), so that HdrHistogram's running sum of
    /// latencies cannot overflow even in the merge of 100,000 shards' histograms.
    package static let latencyLimit: UInt64 = 1 << 47

    /// The most the latencies of one shard's histogram (or of one of its intervals) may add up to when the run has
    /// `shards` shards: their sum in the merge still fits HdrHistogram's running sum. An unsharded run may reach
    /// 2^64 µs, so an overloaded open-model run or a long soak, whose latencies from the schedule add up fast, merges
    /// and compares as it was recorded.
    package static func latencyLimit(shards: Int) -> UInt64 {
        UInt64.max / UInt64(clamping: max(shards, 1))
    }

    /// The last counts index read back: values up to 2^62 µs (146,000 years), far past any latency, and low enough
    /// that neither the index arithmetic nor the histogram's growth overflows.
    package static let highestIndex = CountsLayout(significantDigits: 3).index(of: 1 << 62)

    private static func readBigEndian<T: FixedWidthInteger>(_: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        var value: T = 0
        for byte in bytes[offset..<(offset + MemoryLayout<T>.size)] { value = value << 8 | T(byte) }
        return value
    }

    private static func readZigZag(_ bytes: [UInt8], at position: inout Int, end: Int) throws(Failure) -> Int64 {
        var value: UInt64 = 0
        for step in 0..<9 {
            guard position < end else { throw Failure(description: "a count is cut short") }
            let byte = bytes[position]
            position += 1
            if step == 8 {
                value |= UInt64(byte) << 56
                break
            }
            value |= UInt64(byte & 0x7f) << UInt64(7 * step)
            if byte & 0x80 == 0 { break }
        }
        return Int64(bitPattern: (value >> 1) ^ (0 &- (value & 1)))
    }

    private static func inflate(_ compressed: [UInt8]) throws(Failure) -> [UInt8] {
        // The payload's length is inside the payload: grow the buffer until it fits (counts arrays stay well
        // under a megabyte: 3 digits up to an hour are ~30,000 counts).
        var capacity = max(compressed.count * 8, 4096)
        while capacity <= 64 << 20 {
            var output = [UInt8](repeating: 0, count: capacity)
            var produced = uLong(capacity)
            let status = output.withUnsafeMutableBufferPointer { out in
                compressed.withUnsafeBufferPointer { input in
                    uncompress(out.baseAddress, &produced, input.baseAddress, uLong(input.count))
                }
            }
            if status == Z_OK { return Array(output[..<Int(produced)]) }
            guard status == Z_BUF_ERROR else {
                throw Failure(description: "zlib cannot inflate the histogram (\(status))")
            }
            capacity *= 4
        }
        throw Failure(description: "the histogram inflates beyond 64 MiB")
    }
}

extension HdrHistogramEncoding.CountsLayout {
    /// The lowest value counted at `index`: the inverse of `index(of:)`.
    package func value(at index: Int) -> UInt64 {
        var bucket = (index >> subBucketHalfCountMagnitude) - 1
        var subBucket = (index & (subBucketHalfCount - 1)) + subBucketHalfCount
        if bucket < 0 {
            subBucket -= subBucketHalfCount
            bucket = 0
        }
        return UInt64(subBucket) << UInt64(bucket)
    }
}

/// One line of an HdrHistogram interval log: when it started (seconds after the log's start time), how long it
/// lasted, and its latencies.
package struct HdrHistogramLogEntry {
    package var startSeconds: Double
    package var lengthSeconds: Double
    package var histogram: LatencyHistogram
}

/// Reads the interval logs `HdrHistogramLogWriter` writes.
package enum HdrHistogramLogReader {
    /// The start time (seconds since 1970) and the entries, in order.
    /// - Parameter latencyLimit: the most the latencies of all the intervals together may add up to, in µs
    ///   (``HdrHistogramEncoding/latencyLimit(shards:)`` for a shard's log): the merge adds intervals of different
    ///   shards, and a changed log could put many of one shard's in one slot.
    package static func read(
        path: String, latencyLimit: UInt64 = HdrHistogramEncoding.latencyLimit
    ) throws(HdrHistogramEncoding.Failure) -> (startTime: Double?, entries: [HdrHistogramLogEntry]) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw HdrHistogramEncoding.Failure(description: "cannot read \(path.debugDescription)")
        }
        var startTime: Double?
        var entries: [HdrHistogramLogEntry] = []
        var latencyLeft = latencyLimit
        for (number, line) in String(decoding: data, as: UTF8.self).split(separator: "\n").enumerated() {
            if line.hasPrefix("#[StartTime: ") {
                startTime = Double(line.dropFirst("#[StartTime: ".count).prefix { $0 != " " })
                continue
            }
            if line.hasPrefix("#") || line.hasPrefix("\"") || line.isEmpty { continue }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == 4, let start = Double(fields[0]), let length = Double(fields[1]) else {
                throw HdrHistogramEncoding.Failure(
                    description: "\(path.debugDescription) line \(number + 1) is not an interval")
            }
            do {
                let read = try HdrHistogramEncoding.read(base64: fields[3], latencyLimit: latencyLeft)
                latencyLeft -= read.latency
                entries.append(
                    HdrHistogramLogEntry(startSeconds: start, lengthSeconds: length, histogram: read.histogram))
            } catch {
                throw HdrHistogramEncoding.Failure(
                    description: "\(path.debugDescription) line \(number + 1): \(error.description)")
            }
        }
        return (startTime, entries)
    }
}
