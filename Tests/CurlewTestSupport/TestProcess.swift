#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Facts about the test process itself, for leak checks.
public enum TestProcess {
    /// The number of file descriptors this process has open, from `/proc/self/fd`.
    ///
    /// The descriptor used to read the directory is not counted. Shared test servers hold a
    /// descriptor or two of their own, so start them before taking a baseline. Returns -1
    /// where `/proc` is unavailable (macOS).
    public static func openFileDescriptorCount() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(directory) }
        let ownDescriptor = dirfd(directory)
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard name != ".", name != "..", Int32(name) != ownDescriptor else { continue }
            count += 1
        }
        return count
    }

    /// What each open descriptor refers to (`socket:[inode]`, `anon_inode:[eventfd]`, a path), keyed by number,
    /// so a leak check can say what leaked.
    public static func openFileDescriptors() -> [Int32: String] {
        guard let directory = opendir("/proc/self/fd") else { return [:] }
        defer { closedir(directory) }
        let ownDescriptor = dirfd(directory)
        var descriptors: [Int32: String] = [:]
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard let number = Int32(name), number != ownDescriptor else { continue }
            var buffer = [CChar](repeating: 0, count: 512)
            let length = readlink("/proc/self/fd/\(name)", &buffer, buffer.count - 1)
            descriptors[number] =
                length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
        }
        return descriptors
    }
}
