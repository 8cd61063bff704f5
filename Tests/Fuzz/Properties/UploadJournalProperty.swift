import CurlewS3
import Foundation

@testable import CurlewUpload

#if canImport(Glibc)
import Glibc
#endif

/// `curlew upload --journal` across runs that crash: torn, duplicated and foreign lines never mark a file done
/// that was not recorded whole.
///
/// The input is a few runs. Each run opens the journal as `curlew upload` does (`UploadJournal(path:)`, which reads
/// what earlier runs left), writes records through the journal's own writer (`done`, `sending`, multipart `upload`,
/// `part` and `abort` lines for a few files whose names are prefixes of each other), and between records duplicates
/// a whole line or appends a line of foreign text. A run ends cleanly, or crashes: its last line is cut at any byte
/// (a kill or power loss mid-write), or bytes that end in no newline follow it (a power loss that extended the
/// file). Every journal opened, and the file read at the end, must then give as done:
///
/// - only files with a `done` record written whole, each at a version so recorded (a torn line, completed or not by
///   a later run, is no record);
/// - every file with a `done` record written whole: the format promises that whole lines are kept and at most a
///   torn last line is lost (UploadJournal's documentation), and foreign lines are skipped, not fatal;
/// - when no line was duplicated, each file at the version of its last whole `done` record.
///
/// A line cut in the middle of the file and followed by more lines is not a damage the format detects (its lines
/// carry no checksum): the writer never leaves one, which is what the crashes here check.
enum UploadJournalProperty {
    private static let paths = ["a", "a.txt", "a.txt.bak", "dir/b c", "dir/b c/ሴ%"]

    private struct Model {
        var whole: [(path: String, version: FileVersion)] = []
        var duplicated = false
    }

    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let directory = base + "/curlew-fuzz-journal-\(getpid())-\(UUID().uuidString)"
        guard (try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)) != nil
        else { return "cannot create \(directory)" }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/journal"
        var model = Model()
        for run in 0..<(1 + input.number(below: 4)) {
            let journal: UploadJournal
            do {
                journal = try UploadJournal(path: path)
            } catch {
                return "run \(run) cannot open the journal: \(error)"
            }
            if let failure = verify(journal.entries, against: model, when: "run \(run) opens the journal") {
                journal.finish()
                return failure
            }
            // Where the last line written starts, and the done record it holds.
            var lastLine: (start: Int, done: (path: String, version: FileVersion)?)?
            for _ in 0..<input.number(below: 8) {
                let start = size(of: path)
                let item = UploadItem(
                    relativePath: paths[Int(input.byte()) % paths.count], absolutePath: "/dev/null",
                    size: Int64(input.byte() % 4), modifiedNanoseconds: Int64(input.byte() % 4) * 1_000_000_007)
                var done: (path: String, version: FileVersion)?
                switch input.byte() % 8 {
                case 0, 1:
                    journal.record(item)
                    done = (item.relativePath, item.version)
                    model.whole.append(done!)
                case 2: journal.recordSending(item)
                case 3: journal.recordMultipartStart(item, uploadID: input.text(), partSize: 16)
                case 4:
                    journal.recordPart(
                        item, uploadID: input.text(),
                        part: CompletedPart(
                            number: 1 + Int(input.byte()), etag: input.text(), checksum: "c==", size: 16))
                case 5: journal.recordAbort(item, uploadID: input.text())
                case 6:
                    // A whole line again (a record written twice).
                    let lines = wholeLines(of: path)
                    guard !lines.isEmpty else { continue }
                    let line = lines[input.number(below: lines.count)]
                    append(line + [0x0A], to: path)
                    if let record = doneRecord(line) {
                        model.whole.append(record)
                        model.duplicated = true
                        done = record
                    }
                default:
                    // Foreign text on a line of its own, but never text that is itself a whole done record.
                    var garbage = input.field().filter { $0 != 0x0A }
                    if doneRecord(garbage) != nil { garbage.insert(UInt8(ascii: "x"), at: 0) }
                    append(garbage + [0x0A], to: path)
                }
                if let failure = journal.failure { return "a write failed: \(failure)" }
                lastLine = (start, done)
            }
            journal.finish()
            switch input.byte() % 4 {
            case 0:
                // Killed mid-write: the last line is cut at any byte, newline included.
                guard let lastLine else { break }
                let end = size(of: path)
                guard end > lastLine.start else { break }
                let cut = lastLine.start + input.number(below: end - lastLine.start)
                guard truncate(path, off_t(cut)) == 0 else { return "cannot cut the journal" }
                if let done = lastLine.done, let index = model.whole.lastIndex(where: { $0 == done }) {
                    model.whole.remove(at: index)
                }
            case 1:
                // A power loss that extended the file: bytes, NULs or text, with no newline after them.
                let tail = input.field().filter { $0 != 0x0A }
                append(tail.isEmpty ? [0, 0, 0] : tail, to: path)
            default:
                break
            }
        }
        guard let bytes = FileManager.default.contents(atPath: path) else { return "the journal is gone" }
        return verify(UploadJournal.parse(Array(bytes)).entries, against: model, when: "the journal is read at the end")
    }

    private static func verify(
        _ entries: RecordsByExactPath<FileVersion>, against model: Model, when moment: String
    ) -> String? {
        for (path, version) in entries where !model.whole.contains(where: { $0 == (path, version) }) {
            return "\(moment): \(path.debugDescription) is done at \(version), which no whole record says"
        }
        for (path, version) in model.whole {
            guard let found = entries[path] else {
                return "\(moment): \(path.debugDescription), recorded whole, is not done"
            }
            if !model.duplicated, model.whole.last(where: { $0.path == path })?.version != found {
                return "\(moment): \(path.debugDescription) is done at \(found), not at its last record \(version)"
            }
        }
        return nil
    }

    /// The path and version of a whole `done` line, read as the journal does.
    private static func doneRecord(_ line: [UInt8]) -> (path: String, version: FileVersion)? {
        UploadJournal.parse(line + [0x0A]).entries.first.map { ($0.key, $0.value) }
    }

    private static func wholeLines(of path: String) -> [[UInt8]] {
        guard let bytes = FileManager.default.contents(atPath: path) else { return [] }
        return Array(bytes).split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map(Array.init)
    }

    private static func size(of path: String) -> Int {
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : 0
    }

    private static func append(_ bytes: [UInt8], to path: String) {
        guard let handle = FileHandle(forWritingAtPath: path) else { return }
        defer { try? handle.close() }
        _ = try? handle.seekToEnd()
        try? handle.write(contentsOf: Data(bytes))
    }
}
