import CLibCurl
import Glibc

/// A request body opened for one transfer: where the read callback takes bytes from.
final class OpenedBody {
    private enum Storage {
        case bytes([UInt8])
        case file(descriptor: Int32, closesDescriptor: Bool, offset: Int64, snapshot: FileSnapshot)
    }

    /// What the file looked like when the transfer started; it must look the same when the last byte goes out.
    private struct FileSnapshot: Equatable {
        let device: UInt
        let inode: UInt
        let size: Int64
        let modified: timespec

        static func == (lhs: FileSnapshot, rhs: FileSnapshot) -> Bool {
            lhs.device == rhs.device && lhs.inode == rhs.inode && lhs.size == rhs.size
                && lhs.modified.tv_sec == rhs.modified.tv_sec && lhs.modified.tv_nsec == rhs.modified.tv_nsec
        }

        init(_ status: stat) {
            device = UInt(status.st_dev)
            inode = UInt(status.st_ino)
            size = Int64(status.st_size)
            modified = status.st_mtim
        }
    }

    private let storage: Storage
    /// The bytes the body sends, announced as `Content-Length`.
    let length: Int64
    private var position: Int64 = 0
    private var isClosed = false
    /// Why the body stopped, when the read callback aborted the transfer.
    private(set) var failure: CurlewError?

    private init(storage: Storage, length: Int64) {
        self.storage = storage
        self.length = length
    }

    deinit { close() }

    /// Opens a body for a transfer; a file that cannot be sent as asked fails here, before anything is sent.
    static func open(_ body: CurlewRequest.Body) -> Result<OpenedBody, CurlewError> {
        switch body {
        case .bytes(let bytes):
            return .success(OpenedBody(storage: .bytes(bytes), length: Int64(bytes.count)))
        case .file(let file):
            return openFile(file)
        }
    }

    private static func openFile(_ file: FileBody) -> Result<OpenedBody, CurlewError> {
        let descriptor: Int32
        let closesDescriptor: Bool
        let name: String
        switch file.source {
        case .path(let path):
            descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return .failure(failed("cannot open \(path)", errno: errno)) }
            closesDescriptor = true
            name = path
        case .descriptor(let given):
            descriptor = given
            closesDescriptor = false
            name = "descriptor \(given)"
        }
        func fail(_ error: CurlewError) -> Result<OpenedBody, CurlewError> {
            if closesDescriptor { _ = Glibc.close(descriptor) }
            return .failure(error)
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return fail(failed("cannot read \(name)", errno: errno)) }
        guard status.st_mode & S_IFMT == S_IFREG else {
            return fail(failed("\(name) is not a regular file", errno: nil))
        }
        let size = Int64(status.st_size)
        let length = file.length ?? (size - file.offset)
        guard file.offset >= 0, length >= 0, file.offset + length <= size else {
            return fail(failed(
                "\(name) holds \(size) bytes, fewer than offset \(file.offset) + length \(length)", errno: nil))
        }
        let storage = Storage.file(
            descriptor: descriptor, closesDescriptor: closesDescriptor, offset: file.offset,
            snapshot: FileSnapshot(status))
        return .success(OpenedBody(storage: storage, length: length))
    }

    private static func failed(_ detail: String, errno code: Int32?) -> CurlewError {
        CurlewError(
            code: .requestBodyFailed, detail: detail + (code.map { ": \(String(cString: strerror($0)))" } ?? ""),
            osErrno: code)
    }

    /// Copies the next bytes into libcurl's buffer; returns the count, 0 at the end, or `CURL_READFUNC_ABORT`.
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        let wanted = Int(min(Int64(capacity), length - position))
        guard wanted > 0 else { return 0 }
        switch storage {
        case .bytes(let bytes):
            bytes.withUnsafeBytes { source in
                buffer.copyMemory(from: source.baseAddress! + Int(position), byteCount: wanted)
            }
            position += Int64(wanted)
            return wanted
        case .file(let descriptor, _, let offset, let snapshot):
            // The last chunk goes out only if the file is still what it was: a body must never be a mix of two
            // versions, or a prefix of a file that grew, sent as if it were complete.
            if position + Int64(wanted) == length, let change = change(of: descriptor, since: snapshot) {
                return abort(change)
            }
            let got = pread(descriptor, buffer, wanted, off_t(offset + position))
            if got < 0 { return abort(Self.failed("reading the body failed", errno: errno)) }
            if got == 0 { return abort(Self.failed("the file shrank while it was sent", errno: nil)) }
            position += Int64(got)
            return got
        }
    }

    private func change(of descriptor: Int32, since snapshot: FileSnapshot) -> CurlewError? {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return Self.failed("the file vanished while it was sent", errno: errno) }
        if status.st_nlink == 0 { return Self.failed("the file was deleted while it was sent", errno: nil) }
        if FileSnapshot(status) != snapshot { return Self.failed("the file changed while it was sent", errno: nil) }
        return nil
    }

    private func abort(_ error: CurlewError) -> Int {
        failure = error
        return Int(CURL_READFUNC_ABORT)
    }

    /// Rewinds for a 307/308 redirect or an authentication retry; every body here can be replayed.
    func seek(to offset: Int64) -> Bool {
        guard offset >= 0, offset <= length else { return false }
        position = offset
        return true
    }

    /// Closes a descriptor the engine opened; a caller's descriptor stays open. Safe to call more than once.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        if case .file(let descriptor, true, _, _) = storage { _ = Glibc.close(descriptor) }
    }
}
