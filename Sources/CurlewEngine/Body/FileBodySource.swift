import Glibc

/// A regular file's bytes, read with `pread` as libcurl asks: constant memory, replayable, and an error
/// instead of a short or mixed body if the file cannot be read or changes while it is sent.
final class FileBodySource: BodySource {
    /// What the file looked like when the body was measured; it must look the same when the last byte goes out.
    struct Snapshot: Equatable {
        let device: UInt
        let inode: UInt
        let size: Int64
        let modifiedSeconds: Int
        let modifiedNanoseconds: Int

        init(_ status: stat) {
            device = UInt(status.st_dev)
            inode = UInt(status.st_ino)
            size = Int64(status.st_size)
            modifiedSeconds = status.st_mtim.tv_sec
            modifiedNanoseconds = status.st_mtim.tv_nsec
        }
    }

    /// A file measured but not yet opened: multipart forms announce their length before they reach the file.
    struct Measured {
        let file: FileBody
        let length: Int64
        let snapshot: Snapshot
    }

    private let descriptor: Int32
    private let closesDescriptor: Bool
    private let offset: Int64
    private let snapshot: Snapshot
    private let byteCount: Int64
    private var position: Int64 = 0
    private var isClosed = false

    private init(descriptor: Int32, closesDescriptor: Bool, offset: Int64, length: Int64, snapshot: Snapshot) {
        self.descriptor = descriptor
        self.closesDescriptor = closesDescriptor
        self.offset = offset
        self.byteCount = length
        self.snapshot = snapshot
    }

    deinit { close() }

    var length: Int64? { byteCount }

    /// Measures a file without keeping it open: its length as it will be sent, and its identity.
    static func measure(_ file: FileBody) -> Result<Measured, CurlewError> {
        open(file).map { source in
            defer { source.close() }
            return Measured(file: file, length: source.byteCount, snapshot: source.snapshot)
        }
    }

    /// Opens a measured file, failing if it is no longer the file that was measured.
    static func open(_ measured: Measured) -> Result<FileBodySource, CurlewError> {
        open(measured.file).flatMap { source in
            guard source.snapshot == measured.snapshot, source.byteCount == measured.length else {
                source.close()
                return .failure(.requestBody("\(measured.file.name) changed before it was sent"))
            }
            return .success(source)
        }
    }

    /// Opens a file body; a file that cannot be sent as asked fails here, before anything is sent.
    static func open(_ file: FileBody) -> Result<FileBodySource, CurlewError> {
        let descriptor: Int32
        let closesDescriptor: Bool
        switch file.source {
        case .path(let path):
            // Non-blocking: this may run on an event loop, and a blocking open of a FIFO with no writer (a path
            // replaced by `mkfifo` after it was chosen) would hold the loop, and every transfer on it, for ever. The
            // FIFO opens at once and is refused below as not a regular file.
            descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard descriptor >= 0 else { return .failure(.requestBody("cannot open \(path)", errno: errno)) }
            closesDescriptor = true
        case .descriptor(let given):
            descriptor = given
            closesDescriptor = false
        }
        func fail(_ error: CurlewError) -> Result<FileBodySource, CurlewError> {
            if closesDescriptor { _ = Glibc.close(descriptor) }
            return .failure(error)
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            return fail(.requestBody("cannot read \(file.name)", errno: errno))
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            return fail(.requestBody("\(file.name) is not a regular file"))
        }
        // O_NONBLOCK was for the open only: a file system that honours it on a regular file (FUSE may) could make
        // pread answer EAGAIN mid-body.
        if closesDescriptor, fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK) != 0 {
            return fail(.requestBody("cannot read \(file.name)", errno: errno))
        }
        let size = Int64(status.st_size)
        let length = file.length ?? (size - file.offset)
        guard file.offset >= 0, length >= 0, file.offset + length <= size else {
            return fail(
                .requestBody("\(file.name) holds \(size) bytes, fewer than offset \(file.offset) + length \(length)"))
        }
        return .success(
            FileBodySource(
                descriptor: descriptor, closesDescriptor: closesDescriptor, offset: file.offset, length: length,
                snapshot: Snapshot(status)))
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyReadResult {
        let wanted = Int(min(Int64(buffer.count), byteCount - position))
        guard wanted > 0 else { return .end }
        // The last chunk goes out only if the file is still what it was: a body must never be a mix of two
        // versions, or a prefix of a file that grew, sent as if it were complete.
        if position + Int64(wanted) == byteCount, let change = changeSinceOpened() { return .abort(change) }
        let got = pread(descriptor, buffer.baseAddress, wanted, off_t(offset + position))
        if got < 0 { return .abort(.requestBody("reading the body failed", errno: errno)) }
        if got == 0 { return .abort(.requestBody("the file shrank while it was sent")) }
        position += Int64(got)
        return .bytes(got)
    }

    private func changeSinceOpened() -> CurlewError? {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            return .requestBody("the file vanished while it was sent", errno: errno)
        }
        if status.st_nlink == 0 { return .requestBody("the file was deleted while it was sent") }
        if Snapshot(status) != snapshot { return .requestBody("the file changed while it was sent") }
        return nil
    }

    func rewind() -> CurlewError? {
        position = 0
        return nil
    }

    /// Closes a descriptor the engine opened; a caller's descriptor stays open.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        if closesDescriptor { _ = Glibc.close(descriptor) }
    }
}

extension FileBody {
    /// How error messages name the file.
    var name: String {
        switch source {
        case .path(let path): path
        case .descriptor(let descriptor): "descriptor \(descriptor)"
        }
    }
}
