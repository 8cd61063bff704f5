import CurlewEngine
import CurlewS3
import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewUpload

@Suite struct UploadJournalTests {
    static let journal = """
        # curlew upload journal v1
        done\t10\t111\tsmall%20file.txt
        upload\t50\t222\t16\tID%2F1\tbig.bin
        part\t50\t222\tID%2F1\t1\t16\t%22e1%22\tc1==\tbig.bin
        part\t50\t222\tID%2F1\t3\t16\t%22e3%22\tc3==\tbig.bin
        part\t50\t222\tOTHER\t2\t16\t%22x%22\tcx==\tbig.bin
        upload\t70\t333\t16\tID2\tgone.bin
        part\t70\t333\tID2\t1\t16\t%22g%22\tg==\tgone.bin
        abort\tID2\tgone.bin
        part\t50\t222\tID%2F1\t2\t16\t%22e2
        """

    @Test func partsOfTheCurrentUploadAreKeptAndATornLastLineIsIgnored() {
        let (done, multipart, _, ignored) = UploadJournal.parse(Array(Self.journal.utf8))
        #expect(done == ["small file.txt": UploadJournal.Entry(size: 10, modifiedNanoseconds: 111)])
        let big = multipart["big.bin"]
        #expect(big?.uploadID == "ID/1")
        #expect(big?.partSize == 16)
        #expect(big?.parts.keys.sorted() == [1, 3])
        #expect(big?.parts[1] == CompletedPart(number: 1, etag: "\"e1\"", checksum: "c1==", size: 16))
        #expect(multipart["gone.bin"] == nil, "an aborted upload is not resumed")
        #expect(ignored == 1)
    }

    @Test func aPartOfAnotherVersionOfTheFileIsNotKept() {
        let text = "upload\t50\t222\t16\tID\tf\npart\t51\t999\tID\t1\t16\te\tc\tf\n"
        let (_, multipart, _, _) = UploadJournal.parse(Array(text.utf8))
        #expect(multipart["f"]?.parts.isEmpty == true)
    }

    /// A run killed mid-write leaves `done<TAB>5<TAB>7<TAB>a.txt` of a record for `a.txt.bak`. The next run used to
    /// end that line with a newline, and the run after read it as a record for `a.txt` (found by the upload-journal
    /// fuzz target's corpus).
    @Test func aTornLastLineIsCutOffSoNoLaterRunReadsItAsARecord() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        let whole = "# curlew upload journal v1\ndone\t3\t9\tb.txt\n"
        try Data((whole + "done\t5\t7\ta.txt").utf8).write(to: URL(fileURLWithPath: path))
        let resumed = try UploadJournal(path: path)
        #expect(resumed.entries.keys.sorted() == ["b.txt"])
        #expect(resumed.ignoredLines == 1)
        resumed.record(UploadItem(relativePath: "c.txt", absolutePath: "/c.txt", size: 1, modifiedNanoseconds: 2))
        resumed.finish()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == whole + "done\t1\t2\tc.txt\n")
        let destination = JournalDestination(name: "https://h:443/f/", pathOnlyName: "/f/")
        #expect(try UploadJournal.read(path: path, boundTo: destination).keys.sorted() == ["b.txt", "c.txt"])
    }

    /// What an S3 run reads from a journal file: the multipart upload recorded for the file as it is now is the one
    /// to resume, one recorded for an earlier version (the file changed since) is the stale one to abort, an aborted
    /// one is neither, and once the run records the abort no later run sees it again.
    @Test func anUploadOfTheFileAsItIsResumesAndOneOfAnEarlierVersionIsStale() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        try Data(Self.journal.utf8).write(to: URL(fileURLWithPath: path))
        func big(modified: Int64) -> UploadItem {
            UploadItem(relativePath: "big.bin", absolutePath: "/big.bin", size: 50, modifiedNanoseconds: modified)
        }
        let journal = try UploadJournal(path: path)
        #expect(journal.multipartUpload(of: big(modified: 222))?.uploadID == "ID/1")
        #expect(journal.staleMultipartUpload(of: big(modified: 222)) == nil)
        #expect(journal.multipartUpload(of: big(modified: 999)) == nil)
        let stale = journal.staleMultipartUpload(of: big(modified: 999))
        #expect(stale?.uploadID == "ID/1")
        #expect(stale?.parts.keys.sorted() == [1, 3])
        let gone = UploadItem(relativePath: "gone.bin", absolutePath: "/gone.bin", size: 71, modifiedNanoseconds: 1)
        #expect(journal.staleMultipartUpload(of: gone) == nil, "an aborted upload is not stale")
        journal.recordAbort(big(modified: 999), uploadID: "ID/1")
        journal.finish()
        let reopened = try UploadJournal(path: path)
        defer { reopened.finish() }
        #expect(reopened.staleMultipartUpload(of: big(modified: 999)) == nil)
        #expect(reopened.multipartUpload(of: big(modified: 222)) == nil)
    }

    @Test func aFileSentButNotAcknowledgedIsInFlightUntilItsDoneLine() throws {
        let text = "sending\t10\t111\ta.txt\nsending\t20\t222\tb.txt\ndone\t20\t222\tb.txt\n"
        let (done, _, inFlight, ignored) = UploadJournal.parse(Array(text.utf8))
        #expect(done.keys.sorted() == ["b.txt"])
        #expect(inFlight["a.txt"] == UploadJournal.Entry(size: 10, modifiedNanoseconds: 111))
        #expect(ignored == 0)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let journal = try UploadJournal(path: path)
        defer { journal.finish() }
        #expect(journal.inFlight.keys.sorted() == ["a.txt"], "a done line settles an earlier sending line")
    }

    /// `café` spelled with `é` (NFC) and with `e` and a combining acute accent (NFD) are two files on Linux, whose
    /// names are bytes; Swift's `String` compares them as equal. Keyed by `String`, the journal's record of one
    /// stood for the other too, and a resumed run skipped a file it never sent.
    @Test func namesThatDifferOnlyInUnicodeNormalizationAreRecordedApart() throws {
        let composed = "caf\u{E9}.txt"
        let decomposed = "cafe\u{301}.txt"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        func item(_ name: String) -> UploadItem {
            UploadItem(relativePath: name, absolutePath: "/" + name, size: 4, modifiedNanoseconds: 7)
        }
        let first = try UploadJournal(path: path)
        first.record(item(composed))
        first.recordMultipartStart(item(composed), uploadID: "ID", partSize: 16)
        first.finish()

        let resumed = try UploadJournal(path: path)
        defer { resumed.finish() }
        #expect(resumed.isDone(item(composed)))
        #expect(!resumed.isDone(item(decomposed)), "the record of the NFC name does not stand for the NFD one")
        #expect(resumed.multipartUpload(of: item(decomposed)) == nil)
        #expect(resumed.multipartUpload(of: item(composed))?.uploadID == "ID")

        let both = "done\t4\t7\t\(composed)\ndone\t5\t8\t\(decomposed)\nsending\t6\t9\t\(composed)\n"
        let (done, _, inFlight, _) = UploadJournal.parse(Array(both.utf8))
        #expect(done.count == 2)
        #expect(inFlight[decomposed] == nil)
        #expect(done[composed] == UploadJournal.Entry(size: 4, modifiedNanoseconds: 7))
        #expect(done[decomposed] == UploadJournal.Entry(size: 5, modifiedNanoseconds: 8))
    }

    /// Two runs appending to one journal would each resume from records the other is still changing: the second
    /// run is refused while the first holds the journal, and opens it once the first has finished.
    @Test func aJournalIsRefusedToASecondRunUntilTheFirstFinishes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        let first = try UploadJournal(path: path)
        first.record(UploadItem(relativePath: "a.txt", absolutePath: "/a.txt", size: 1, modifiedNanoseconds: 2))
        let refusal = #expect(throws: UploadError.self) { try UploadJournal(path: path) }
        #expect(refusal?.kind == .journal)
        #expect(refusal?.description.contains("another run is using it") == true, "\(String(describing: refusal))")
        first.finish()
        first.finish()
        let second = try UploadJournal(path: path)
        defer { second.finish() }
        #expect(second.entries.keys.sorted() == ["a.txt"])
    }

    /// An upload built and never run drops its journal without finishing it: the journal is freed and its lock
    /// released, so the next run in the same process can open it (the background sync task held it for good).
    @Test func aJournalDroppedWithoutFinishingReleasesItsLock() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        weak var dropped: UploadJournal?
        do {
            let journal = try UploadJournal(path: path)
            dropped = journal
        }
        // The sync task holds the journal for the instant of a sync every 100 ms, so the last release may be its.
        // Each wait is bounded on its own (one 2 s deadline for both was once spent by a stall of the test process).
        try await waitUntil(timeout: .seconds(2), pollInterval: .milliseconds(5), "the dropped journal to be freed") {
            dropped == nil
        }
        #expect(dropped == nil)
        // Its deinit may still be closing the descriptor on the sync task's thread.
        var reopened: UploadJournal?
        try await waitUntil(timeout: .seconds(2), pollInterval: .milliseconds(5), "the journal to open again") {
            reopened = try? UploadJournal(path: path)
            return reopened != nil
        }
        #expect(reopened != nil)
        reopened?.finish()
    }

    /// A run killed while it re-bound a journal (a path-only one, or any `target` line) leaves half a `target` line
    /// after the last newline. That torn line was taken as the recorded destination, and the next run to the right
    /// destination was refused once; it is ignored, as every torn last line is.
    @Test func aTornTargetLineIsNotTheRecordedDestination() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        let destination = JournalDestination(name: "https://h:443/f/", pathOnlyName: "/f/")
        let text =
            UploadJournal.header + "target\t\(PercentEncoding.encodeComponent(destination.name))\n"
            + "done\t1\t2\ta.txt\ntarget\thttps://h:4"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))

        #expect(try UploadJournal.read(path: path, boundTo: destination).keys == ["a.txt"])
        let journal = try UploadJournal(path: path)
        defer { journal.finish() }
        try journal.bind(to: destination)
        #expect(journal.entries.keys == ["a.txt"])
    }

    /// `--dry-run` reads a journal without opening it for writing. It used to read any journal's records as skips,
    /// so a dry run to production with staging's journal listed staging's files as skipped while the real run was
    /// refused. It is refused with the real run's error, and writes nothing; a path-only journal of an earlier
    /// version is read for its path, as the real run takes it.
    @Test func aDryRunReadIsRefusedAsTheRunIsAndWritesNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("j").path
        let staging = JournalDestination(name: "https://staging:443/files/", pathOnlyName: "/files/")
        let production = JournalDestination(name: "https://prod:443/files/", pathOnlyName: "/files/")
        func write(target: String) throws -> String {
            let text =
                UploadJournal.header + "target\t\(PercentEncoding.encodeComponent(target))\ndone\t1\t2\ta.txt\n"
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            return text
        }

        let stagings = try write(target: staging.name)
        #expect(try UploadJournal.read(path: path, boundTo: staging).keys == ["a.txt"])
        let dryRefusal = #expect(throws: UploadError.self) {
            try UploadJournal.read(path: path, boundTo: production)
        }
        #expect(dryRefusal?.kind == .journal)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == stagings, "a dry run writes nothing")
        let journal = try UploadJournal(path: path)
        let refusal = #expect(throws: UploadError.self) { try journal.bind(to: production) }
        #expect(dryRefusal?.description == refusal?.description && refusal != nil)

        let pathOnly = try write(target: "/files/")
        #expect(try UploadJournal.read(path: path, boundTo: production).keys == ["a.txt"])
        #expect(try String(contentsOfFile: path, encoding: .utf8) == pathOnly, "a dry run binds nothing")
        let elsewhere = JournalDestination(name: "https://prod:443/other/", pathOnlyName: "/other/")
        #expect(throws: UploadError.self) { try UploadJournal.read(path: path, boundTo: elsewhere) }
    }
}
