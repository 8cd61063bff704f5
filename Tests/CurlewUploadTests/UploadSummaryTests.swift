import CurlewUpload
import Foundation
import Testing

/// Shards' summaries added up as `curlew merge` does: every count summed once, rates over the whole run's window.
@Suite struct UploadSummaryTests {
    /// A shard's summary as `curlew upload --json` prints it.
    private func shard(
        uploaded: Int, bytes: Int, startedAt: Double, seconds: Double, failure: String? = nil,
        resentAfterCrash: [String]? = nil
    ) throws -> UploadSummary {
        let failures = failure.map { #"[{"path":"\#($0)","error":"HTTP 500"}]"# } ?? "[]"
        let resent = resentAfterCrash.map {
            #","resentAfterCrash":["# + $0.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        }
        let json = """
            {"source":"/data","url":"http://x/up/","mode":"put","concurrency":4,"files":\(uploaded + 1),
             "uploaded":\(uploaded),"skipped":1,"alreadyThere":0,"excluded":2,"failed":\(failure == nil ? 0 : 1),
             "notStarted":0,"bytes":\(bytes),"durationSeconds":\(seconds),"filesPerSecond":0,"megabytesPerSecond":0,
             "retries":1,"connectionsOpened":3,"statusCodes":{"201":\(uploaded)},"interrupted":false,"alreadyThereByRule":{},
             "failures":\(failures),"startedAt":\(startedAt),"journal":"/j"\(resent ?? "")}
            """
        return try JSONDecoder().decode(UploadSummary.self, from: Data(json.utf8))
    }

    @Test func mergingAddsEveryCountAndRatesOverTheWholeWindow() throws {
        let merged = UploadSummary(merging: [
            try shard(uploaded: 10, bytes: 3_000_000, startedAt: 100, seconds: 2, failure: "b/z.txt"),
            try shard(uploaded: 30, bytes: 1_000_000, startedAt: 101, seconds: 3, failure: "a/y.txt"),
        ])
        #expect(merged.uploaded == 40 && merged.files == 42 && merged.skipped == 2 && merged.excluded == 4)
        #expect(merged.failed == 2 && merged.retries == 2 && merged.connectionsOpened == 6)
        #expect(merged.bytes == 4_000_000 && merged.statusCodes == ["201": 40])
        #expect(merged.failures.map(\.path) == ["a/y.txt", "b/z.txt"], "sorted by path")
        // From the first start (100) to the last end (101 + 3).
        #expect(merged.startedAt == 100 && merged.durationSeconds == 4)
        #expect(merged.filesPerSecond == 10 && merged.megabytesPerSecond == 1)
        #expect(merged.source == "2 shards" && merged.journal == nil)
    }

    /// Forms resent after a crash stay named, whichever shard resent them; a run without any prints no key.
    @Test func mergingKeepsEveryFormResentAfterACrash() throws {
        let merged = UploadSummary(merging: [
            try shard(uploaded: 1, bytes: 1, startedAt: 1, seconds: 1, resentAfterCrash: ["b.bin"]),
            try shard(uploaded: 1, bytes: 1, startedAt: 1, seconds: 1),
            try shard(uploaded: 1, bytes: 1, startedAt: 1, seconds: 1, resentAfterCrash: ["a.bin"]),
        ])
        #expect(merged.resentAfterCrash == ["a.bin", "b.bin"])
        let quiet = try shard(uploaded: 1, bytes: 1, startedAt: 1, seconds: 1)
        #expect(quiet.resentAfterCrash == nil)
        #expect(!String(decoding: try JSONEncoder().encode(quiet), as: UTF8.self).contains("resentAfterCrash"))
    }

    @Test func aRunThatTookNoTimeHasNoRates() throws {
        let merged = UploadSummary(merging: [try shard(uploaded: 0, bytes: 0, startedAt: 5, seconds: 0)])
        #expect(merged.durationSeconds == 0 && merged.filesPerSecond == 0 && merged.megabytesPerSecond == 0)
        #expect(merged.source == "/data")
    }
}
