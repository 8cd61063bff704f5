import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An append-only record of files the server accepted (2xx), one line each:
/// `done<TAB>size<TAB>mtime-ns<TAB>percent-encoded path<LF>`.
///
/// Each line goes to the kernel in a single `write` on an `O_APPEND` descriptor as soon as its response is in,
/// so a process killed at any instant (kill -9) leaves only whole lines, plus at most one torn line that the
/// next run ignores. `fdatasync` runs in the background at most every 100 ms and at the end, which bounds what a
/// power loss can take back to that window: those files are then sent again, never lost.
final class UploadJournal: Sendable {
    struct Entry: Sendable, Hashable {
        let size: Int64
        let modifiedNanoseconds: Int64
    }

    static let header = "# curlew upload journal v1\n"

    let path: String
    /// What earlier runs recorded, by relative path.
    let entries: [String: Entry]
    /// Lines that could not be read (a torn last line after a crash, or foreign text), skipped.
    let ignoredLines: Int
    private let descriptor: Int32
    private let unsynced = Atomic<Bool>(false)
    private let writeFailure = Mutex<String?>(nil)
    private let syncTask = Mutex<Task<Void, Never>?>(nil)

    init(path: String) throws {
        self.path = path
        let existing = FileManager.default.contents(atPath: path).map { Array($0) } ?? []
        (entries, ignoredLines) = Self.parse(existing)

        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CommandFailure("cannot open --journal \(path.debugDescription): \(String(cString: strerror(errno)))")
        }
        if existing.isEmpty {
            try append(Self.header)
        } else if existing.last != UInt8(ascii: "\n") {
            // Ends the torn line so the next record starts on a line of its own.
            try append("\n")
        }
        let task = Task.detached { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                syncIfNeeded()
            }
        }
        syncTask.withLock { $0 = task }
    }

    static func parse(_ bytes: [UInt8]) -> ([String: Entry], Int) {
        var entries: [String: Entry] = [:]
        var ignored = 0
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        // Whatever follows the last newline was never completed.
        if let last = lines.popLast(), !last.isEmpty { ignored += 1 }
        for line in lines where !line.isEmpty && line.first != UInt8(ascii: "#") {
            let fields = line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false)
            guard fields.count == 4, fields[0].elementsEqual("done".utf8),
                let size = Int64(String(decoding: fields[1], as: UTF8.self)),
                let modified = Int64(String(decoding: fields[2], as: UTF8.self)),
                let path = PathEncoding.decode(Substring(String(decoding: fields[3], as: UTF8.self))), !path.isEmpty
            else {
                ignored += 1
                continue
            }
            entries[path] = Entry(size: size, modifiedNanoseconds: modified)
        }
        return (entries, ignored)
    }

    /// Whether an earlier run sent this file as it is now.
    func isDone(_ item: UploadItem) -> Bool {
        entries[item.relativePath] == Entry(size: item.size, modifiedNanoseconds: item.modifiedNanoseconds)
    }

    /// Records a file the server accepted.
    func record(_ item: UploadItem) {
        let line = "done\t\(item.size)\t\(item.modifiedNanoseconds)\t\(PathEncoding.encodePath(item.relativePath))\n"
        do {
            try append(line)
            unsynced.store(true, ordering: .relaxed)
        } catch {
            writeFailure.withLock { $0 = $0 ?? "\(error)" }
        }
    }

    /// The first write error, if any: the run must not claim a journal it could not keep.
    var failure: String? { writeFailure.withLock { $0 } }

    /// Flushes to disk and closes; call once at the end.
    func finish() {
        syncTask.withLock { $0?.cancel() }
        syncIfNeeded()
        _ = fdatasync(descriptor)
        _ = close(descriptor)
    }

    private func syncIfNeeded() {
        if unsynced.exchange(false, ordering: .relaxed) {
            _ = fdatasync(descriptor)
        }
    }

    private func append(_ line: String) throws {
        var bytes = Array(line.utf8)
        let written = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            throw CommandFailure("cannot write --journal \(path.debugDescription): \(written < 0 ? String(cString: strerror(errno)) : "short write")")
        }
    }
}
