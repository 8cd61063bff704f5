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
}
