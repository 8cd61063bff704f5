import CurlewLoopbackServer
import Foundation
import Glibc

func checksum(_ bytes: ArraySlice<UInt8>) -> String {
    var hash = FNV1a64()
    bytes.withUnsafeBytes { hash.update($0) }
    return hash.hexDigest
}

/// A file in a fresh temporary directory, removed when the value is released. Tests mutate it from one task at
/// a time.
final class TemporaryFile: @unchecked Sendable {
    let path: String
    private(set) var bytes: [UInt8]

    init(randomBytes count: Int) throws {
        // One read from the kernel: a per-byte loop would keep a cooperative thread busy for seconds in a debug
        // build, which delays every other test's continuations.
        let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        bytes = [UInt8](try random.read(upToCount: count) ?? Data())
        try random.close()
        path = NSTemporaryDirectory() + "curlew-body-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    convenience init(text: String) throws {
        try self.init(randomBytes: 0)
        bytes = Array(text.utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    func append(_ more: [UInt8]) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(more))
        try handle.close()
        bytes += more
    }

    /// Same size, other bytes, a later modification time.
    func overwriteKeepingSize() throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.write(contentsOf: Data(repeating: 0xAB, count: 16))
        try handle.close()
    }

    deinit { unlink(path) }
}

/// Random bytes from the kernel in one read (a per-byte loop is slow in debug builds).
func randomBytes(_ count: Int) throws -> [UInt8] {
    let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
    defer { try? random.close() }
    return [UInt8](try random.read(upToCount: count) ?? Data())
}

/// Chunks of `bytes` as an `AsyncStream`, for stream bodies.
func chunkedStream(_ bytes: [UInt8], chunkSize: Int) -> AsyncStream<[UInt8]> {
    AsyncStream { continuation in
        var offset = 0
        while offset < bytes.count {
            continuation.yield(Array(bytes[offset..<min(offset + chunkSize, bytes.count)]))
            offset += chunkSize
        }
        continuation.finish()
    }
}

/// The loopback server's `/bytes/N` pattern, built a block at a time (a per-byte loop is slow in debug builds).
func patternBytes(_ count: Int, from start: Int = 0) -> [UInt8] {
    let block = (0..<(251 * 64)).map { LoopbackServer.patternByte(at: start + $0) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count + block.count)
    while bytes.count < count { bytes.append(contentsOf: block) }
    bytes.removeLast(bytes.count - count)
    return bytes
}

/// Byte equality with memcmp: `==` on arrays compares element by element in a debug build.
func sameBytes(_ left: [UInt8], _ right: ArraySlice<UInt8>) -> Bool {
    left.count == right.count
        && left.withUnsafeBytes { a in
            right.withUnsafeBytes { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
        }
}

func sameBytes(_ left: [UInt8], _ right: [UInt8]) -> Bool {
    sameBytes(left, right[...])
}
