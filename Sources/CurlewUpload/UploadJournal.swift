import CurlewEngine
package import CurlewS3
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
/// A PUT to an http(s) target is announced first with `sending<TAB>size<TAB>mtime-ns<TAB>path`: a run killed while
/// the file was in flight leaves the server holding it or not, and the next run asks the server (HEAD) before it
/// sends such a file again, so a resumed run does not PUT a file twice.
///
/// Multipart uploads to S3 add three kinds of line, so a run killed at any moment resumes a file from its next
/// missing part: `upload<TAB>size<TAB>mtime-ns<TAB>part size<TAB>upload ID<TAB>path` when the upload is created,
/// `part<TAB>size<TAB>mtime-ns<TAB>upload ID<TAB>number<TAB>part length<TAB>ETag<TAB>base64 SHA-256<TAB>path` for
/// each part the store accepted, and `abort<TAB>upload ID<TAB>path` when a failed upload was aborted. IDs, ETags
/// and paths are percent-encoded.
///
/// A `target<TAB>percent-encoded destination` line names what the records are about (``bind(to:)``): the target
/// URL's scheme, host, port and path, or the S3 store's bucket, prefix and endpoint. A journal written before
/// journals named the host names the path alone (the bucket and prefix), until a run binds it to the whole
/// destination with a `target` line after it: the last `target` line is the one that holds.
///
/// Records are keyed by the relative path's exact bytes (``ExactPath``), never by `String` equality: `café` in NFC
/// and in NFD are two files, and the record of one must not stand for the other.
///
/// Each line goes to the kernel in a single `write` on an `O_APPEND` descriptor as soon as its response is in,
/// so a process killed at any instant (kill -9) leaves only whole lines, plus at most one torn line that the
/// next run ignores and cuts off. `fdatasync` runs in the background at most every 100 ms and at the end, which
/// bounds what a power loss can take back to that window: those files are then sent again, never lost.
package final class UploadJournal: S3UploadJournal {
    package typealias Entry = FileVersion

    package static let header = "# curlew upload journal v1\n"

    /// A multipart upload an earlier run started and did not finish or abort.
    package typealias Multipart = S3MultipartProgress

    package let path: String
    /// What earlier runs recorded, by relative path.
    package let entries: RecordsByExactPath<Entry>
    /// Multipart uploads in progress, by relative path.
    package let multipartUploads: RecordsByExactPath<Multipart>
    /// Files an earlier run started to PUT and has no `done` line for, by relative path.
    package let inFlight: RecordsByExactPath<Entry>
    /// Lines that could not be read (a torn last line after a crash, or foreign text), skipped.
    package let ignoredLines: Int
    /// The destination the records are about (``bind(to:)``), as the journal named it when opened.
    private let recordedDestination: String?
    private let descriptor: Int32
    private let unsynced = Atomic<Bool>(false)
    private let writeFailure = Mutex<String?>(nil)
    private let syncTask = Mutex<Task<Void, Never>?>(nil)
    /// Set by ``finish()``, which closes the descriptor once however often it is called.
    private let finished = Atomic<Bool>(false)

    /// Opens (or creates) the journal at `path` and reads what earlier runs recorded.
    ///
    /// - Throws: ``UploadError`` of kind `journal` when the file cannot be opened, written or cut, or when another
    ///   run (in this process or another) holds it open: two runs appending to one journal would each resume from
    ///   records the other is still changing.
    package init(path: String) throws(UploadError) {
        self.path = path
        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw UploadError(
                .journal, "cannot open --journal \(path.debugDescription): \(String(cString: strerror(errno)))")
        }
        // An advisory lock on the open file, released by the kernel when the descriptor closes, a kill -9 included.
        // Taken before the records are read, so a run never reads a journal another run is still writing.
        // A file system that cannot lock at all (Lustre mounted noflock: ENOSYS; NFSv3 without lockd: ENOLCK) keeps
        // the journal usable, unlocked, as it was before journals were locked.
        guard Self.lock(descriptor) || [ENOSYS, ENOLCK, EOPNOTSUPP].contains(errno) else {
            let reason =
                errno == EWOULDBLOCK
                ? "another run is using it; wait for that run to end, or give this one a journal of its own"
                : String(cString: strerror(errno))
            _ = close(descriptor)
            throw UploadError(.journal, "cannot lock --journal \(path.debugDescription): \(reason)")
        }
        let existing = FileManager.default.contents(atPath: path).map { Array($0) } ?? []
        recordedDestination = Self.recordedDestination(existing)
        let parsed = Self.parse(existing)
        (entries, multipartUploads, ignoredLines) = (parsed.entries, parsed.multipart, parsed.ignored)
        var inFlight = parsed.inFlight
        for (path, file) in parsed.inFlight where parsed.entries[path] == file { inFlight[path] = nil }
        self.inFlight = inFlight

        if existing.isEmpty {
            try append(Self.header)
        } else if existing.last != UInt8(ascii: "\n") {
            // Cuts the torn line off. Ended with a newline instead, it would read as a whole record the next time:
            // `done<TAB>5<TAB>7<TAB>a.txt` torn from `…<TAB>a.txt.bak` would mark a.txt done.
            let wholeLines = existing.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
            guard ftruncate(descriptor, off_t(wholeLines)) == 0 else {
                throw UploadError(
                    .journal,
                    "cannot cut the torn last line of --journal \(path.debugDescription): \(String(cString: strerror(errno)))"
                )
            }
        }
        // Holds the journal weakly: a journal dropped without ``finish()`` (an upload built and never run) is freed,
        // and its deinit closes the descriptor and so releases the lock.
        let task = Task.detached { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                guard let self else { return }
                self.syncIfNeeded()
            }
        }
        syncTask.withLock { $0 = task }
    }

    /// Takes the journal's lock, waiting up to 2 s for it: a process another thread of this one is starting holds a
    /// copy of every descriptor (and so of the lock) from its fork until its exec, so a journal finished a moment ago
    /// may still read as in use. A run that really holds it holds it longer, and is reported then.
    private static func lock(_ descriptor: Int32) -> Bool {
        let deadline = ContinuousClock.now + .seconds(2)
        while true {
            if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return true }
            guard errno == EWOULDBLOCK, ContinuousClock.now < deadline else { return false }
            usleep(10_000)
        }
    }

    package static func parse(
        _ bytes: [UInt8]
    ) -> (
        entries: RecordsByExactPath<Entry>, multipart: RecordsByExactPath<Multipart>,
        inFlight: RecordsByExactPath<Entry>, ignored: Int
    ) {
        var entries = RecordsByExactPath<Entry>()
        var inFlight = RecordsByExactPath<Entry>()
        var multipart = RecordsByExactPath<Multipart>()
        var ignored = 0
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        // Whatever follows the last newline was never completed.
        if let last = lines.popLast(), !last.isEmpty { ignored += 1 }
        for line in lines where !line.isEmpty && line.first != UInt8(ascii: "#") {
            let fields = line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false)
                .map { String(decoding: $0, as: UTF8.self) }
            func decoded(_ index: Int) -> String? {
                PercentEncoding.decode(fields[index]).flatMap { $0.isEmpty ? nil : $0 }
            }
            func entry() -> Entry? {
                guard let size = Int64(fields[1]), let modified = Int64(fields[2]) else { return nil }
                return Entry(size: size, modifiedNanoseconds: modified)
            }
            switch (fields.first, fields.count) {
            case ("done", 4):
                guard let file = entry(), let path = decoded(3) else { break }
                entries[path] = file
                continue
            case ("sending", 4):
                guard let file = entry(), let path = decoded(3) else { break }
                inFlight[path] = file
                continue
            case ("upload", 6):
                guard let file = entry(), let partSize = Int64(fields[3]), let id = decoded(4), let path = decoded(5)
                else { break }
                multipart[path] = Multipart(file: file, partSize: partSize, uploadID: id)
                continue
            case ("part", 9):
                guard let file = entry(), let id = decoded(3), let number = Int(fields[4]),
                    let length = Int64(fields[5]),
                    let etag = decoded(6), let path = decoded(8)
                else { break }
                if multipart[path]?.uploadID == id && multipart[path]?.file == file {
                    multipart[path]?.parts[number] = CompletedPart(
                        number: number, etag: etag, checksum: fields[7], size: length)
                }
                continue
            case ("target", 2):
                continue
            case ("abort", 3):
                guard let id = decoded(1), let path = decoded(2) else { break }
                if multipart[path]?.uploadID == id { multipart[path] = nil }
                continue
            default:
                break
            }
            ignored += 1
        }
        return (entries, multipart, inFlight, ignored)
    }

    /// A journal's records without opening it for writing (`--dry-run` changes nothing), after the check
    /// ``bind(to:)`` makes: a journal that names another destination is refused with the same error, so a dry run
    /// never reports as skipped the files another destination got while the real run is refused.
    package static func read(
        path: String, boundTo destination: JournalDestination
    ) throws(UploadError) -> RecordsByExactPath<Entry> {
        let bytes = try contents(path: path)
        let recorded = recordedDestination(bytes)
        if case .refused = binding(recorded: recorded, to: destination) {
            throw refusal(path: path, recorded: recorded ?? "", destination: destination)
        }
        return parse(bytes).entries
    }

    /// The journal's bytes; none for a journal that does not exist yet.
    private static func contents(path: String) throws(UploadError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            if FileManager.default.fileExists(atPath: path) {
                throw UploadError(.journal, "cannot read --journal \(path.debugDescription)")
            }
            return []
        }
        return Array(data)
    }

    /// Whether an earlier run sent this file as it is now.
    package func isDone(_ item: UploadItem) -> Bool {
        entries[item.relativePath] == Entry(size: item.size, modifiedNanoseconds: item.modifiedNanoseconds)
    }

    /// Whether an earlier run was sending this file, as it is now, when it stopped: the server may hold it.
    package func wasInFlight(_ item: UploadItem) -> Bool {
        inFlight[item.relativePath] == Entry(size: item.size, modifiedNanoseconds: item.modifiedNanoseconds)
    }

    /// Records that a PUT or a form POST of the file starts.
    package func recordSending(_ item: UploadItem) {
        appendRecord("sending\t\(item.size)\t\(item.modifiedNanoseconds)\t\(Self.field(path: item))\n")
    }

    /// Records a file the server accepted.
    package func record(_ item: UploadItem) {
        appendRecord("done\t\(item.size)\t\(item.modifiedNanoseconds)\t\(Self.field(path: item))\n")
    }

    /// The multipart upload an earlier run left for this file as it is now, if any.
    package func multipartUpload(of item: UploadItem) -> Multipart? {
        multipartUploads[item.relativePath].flatMap {
            $0.file == Entry(size: item.size, modifiedNanoseconds: item.modifiedNanoseconds) ? $0 : nil
        }
    }

    package func staleMultipartUpload(of item: UploadItem) -> Multipart? {
        multipartUploads[item.relativePath].flatMap {
            $0.file != Entry(size: item.size, modifiedNanoseconds: item.modifiedNanoseconds) ? $0 : nil
        }
    }

    package func recordMultipartStart(_ item: UploadItem, uploadID: String, partSize: Int64) {
        appendRecord(
            "upload\t\(item.size)\t\(item.modifiedNanoseconds)\t\(partSize)\t\(Self.field(uploadID))"
                + "\t\(Self.field(path: item))\n")
    }

    /// Called as soon as the store accepted the part, before any other part's result is looked at.
    package func recordPart(_ item: UploadItem, uploadID: String, part: CompletedPart) {
        appendRecord(
            "part\t\(item.size)\t\(item.modifiedNanoseconds)\t\(Self.field(uploadID))\t\(part.number)\t\(part.size)"
                + "\t\(Self.field(part.etag))\t\(part.checksum)\t\(Self.field(path: item))\n")
    }

    package func recordAbort(_ item: UploadItem, uploadID: String) {
        appendRecord("abort\t\(Self.field(uploadID))\t\(Self.field(path: item))\n")
    }

    /// A value as one tab-free field: percent-encoded, as `decoded` reads it back.
    private static func field(_ value: String) -> String { PercentEncoding.encodeComponent(value) }

    /// Ties the journal to the destination its records are about. A journal that names another destination is
    /// refused: its `done` lines would leave out files that destination never got (staging's files, on a run to
    /// production), and the run would report success. One that names none (new, or written by a version before
    /// journals named one) records it.
    ///
    /// A journal written before journals named the host names the path alone (``JournalDestination/pathOnlyName``).
    /// It is taken for this destination when that path is this destination's, as the version that wrote it took
    /// it, so that a run interrupted before an upgrade resumes after it rather than sending everything again; the
    /// journal is then bound to the whole destination, so from this run on another host or port is refused. Which
    /// host such a journal's records were about is recorded nowhere: refusing it would not make it any safer to use
    /// for the right host, only force every interrupted run to start over.
    package func bind(to destination: JournalDestination) throws(UploadError) {
        switch Self.binding(recorded: recordedDestination, to: destination) {
        case .bound:
            return
        case .toRecord:
            try append("target\t\(Self.field(destination.name))\n")
        case .refused:
            finish()
            throw Self.refusal(path: path, recorded: recordedDestination ?? "", destination: destination)
        }
    }

    /// What ``bind(to:)`` does with a journal that names `recorded` (nil: none): the one policy the real run and the
    /// dry run (``read(path:boundTo:)``) share.
    private enum Binding {
        /// The journal already names this destination.
        case bound
        /// The journal names none, or the path alone (a version before journals named the host): its records are
        /// taken for this destination, and a `target` line binds it to the whole destination.
        case toRecord
        /// The journal names another destination.
        case refused
    }

    private static func binding(recorded: String?, to destination: JournalDestination) -> Binding {
        guard let recorded else { return .toRecord }
        // Byte for byte: paths that differ only in Unicode normalization are two places on a server.
        if recorded.utf8.elementsEqual(destination.name.utf8) { return .bound }
        if recorded.utf8.elementsEqual(destination.pathOnlyName.utf8) { return .toRecord }
        return .refused
    }

    private static func refusal(path: String, recorded: String, destination: JournalDestination) -> UploadError {
        UploadError(
            .journal,
            "--journal \(path.debugDescription) records uploads to \(recorded), not \(destination.name): "
                + "give each destination a journal of its own")
    }

    /// The destination a journal's last `target<TAB>percent-encoded destination` line names, if it has one: a
    /// journal that named only the path is bound to the whole destination by a line after it. Whatever follows the
    /// last newline is a torn line, as ``parse(_:)`` reads it: a run killed while re-binding the journal must not
    /// leave half a destination that refuses the next run.
    private static func recordedDestination(_ bytes: [UInt8]) -> String? {
        let prefix = Array("target\t".utf8)
        let wholeLines = bytes[..<(bytes.lastIndex(of: UInt8(ascii: "\n")) ?? bytes.startIndex)]
        for line in wholeLines.split(separator: UInt8(ascii: "\n")).reversed() where line.starts(with: prefix) {
            return PercentEncoding.decode(String(decoding: line.dropFirst(prefix.count), as: UTF8.self))
        }
        return nil
    }

    /// The file's relative path as a field: its segments percent-encoded, `/` kept.
    private static func field(path item: UploadItem) -> String {
        PercentEncoding.encodeEachSegment(of: item.relativePath)
    }

    private func appendRecord(_ line: String) {
        do {
            try append(line)
            unsynced.store(true, ordering: .relaxed)
        } catch {
            writeFailure.withLock { $0 = $0 ?? "\(error)" }
        }
    }

    /// The first write error, if any: the run must not claim a journal it could not keep.
    package var failure: String? { writeFailure.withLock { $0 } }

    /// Flushes to disk, closes and so releases the lock; call at the end. Later calls do nothing.
    package func finish() {
        syncTask.withLock { $0?.cancel() }
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        syncIfNeeded()
        _ = fdatasync(descriptor)
        _ = close(descriptor)
    }

    deinit {
        syncTask.withLock { $0?.cancel() }
        if !finished.load(ordering: .acquiring) {
            _ = fdatasync(descriptor)
            _ = close(descriptor)
        }
    }

    private func syncIfNeeded() {
        if unsynced.exchange(false, ordering: .relaxed) {
            _ = fdatasync(descriptor)
        }
    }

    private func append(_ line: String) throws(UploadError) {
        var bytes = Array(line.utf8)
        let written = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            throw UploadError(
                .journal,
                "cannot write --journal \(path.debugDescription): \(written < 0 ? String(cString: strerror(errno)) : "short write")"
            )
        }
    }
}

/// What a journal's records are about (``UploadJournal/bind(to:)``), as it names it.
package struct JournalDestination: Sendable, Equatable {
    /// The destination as a journal records it: the URL's scheme, host and port and its path (an S3 store's bucket,
    /// prefix and endpoint). Never a credential: no user-info, no query value.
    package let name: String
    /// What a journal written before journals named the host recorded for this destination: the path alone (the
    /// bucket and prefix).
    package let pathOnlyName: String

    package init(name: String, pathOnlyName: String) {
        self.name = name
        self.pathOnlyName = pathOnlyName
    }
}
