import CurlewTestSupport
import Foundation

/// Percentiles of a sharded bench run computed without curlew: HdrHistogram's Python implementation (the `hdrh`
/// module of pip's `hdrhistogram`, which `make test` installs) adds up every interval of every shard's `.hlog` in a
/// folder into one histogram.
enum HdrhReference {
    struct Result {
        /// Requests in all intervals of all shards.
        let total: Int
        /// `p50`, `p90`, `p99`, `p99_9` in microseconds, keyed as in curlew's `latencyMicroseconds`.
        let percentiles: [String: Double]
    }

    static let keys = ["p50", "p90", "p99", "p99_9"]

    static let script = """
        import glob, json, sys
        from hdrh.histogram import HdrHistogram
        from hdrh.log import HistogramLogReader
        merged = HdrHistogram(1, 60000000, 3)
        for path in sorted(glob.glob(sys.argv[1] + "/bench-shard-*.hlog")):
            reader = HistogramLogReader(path, HdrHistogram(1, 60000000, 3))
            while True:
                h = reader.get_next_interval_histogram()
                if h is None: break
                merged.add(h)
        print(json.dumps({"total": merged.get_total_count(),
                          "p50": merged.get_value_at_percentile(50), "p90": merged.get_value_at_percentile(90),
                          "p99": merged.get_value_at_percentile(99), "p99_9": merged.get_value_at_percentile(99.9)}))
        """

    /// Sums the interval logs `bench-shard-*.hlog` in `directory`.
    static func summingShardLogs(in directory: String) async throws -> Result {
        let output = try await CurlewBinary.runProgram(["python3", "-c", script, directory])
        guard output.status == 0 else {
            throw TestSupportError("python3 hdrh failed (exit \(output.status)): \(output.stderr)")
        }
        let json = try output.json()
        var percentiles: [String: Double] = [:]
        for key in keys { percentiles[key] = (json[key] as? NSNumber)?.doubleValue }
        return Result(total: json["total"] as? Int ?? -1, percentiles: percentiles)
    }
}
