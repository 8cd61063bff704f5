#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds a currently unused TCP port on 127.0.0.1.
///
/// The port is free only at the moment of the call: another process may take it before the
/// caller binds it. Prefer binding port 0 yourself; use this only for servers that cannot be
/// handed a socket (nginx), and retry on "address already in use".
public enum FreePort {
    /// Binds 127.0.0.1:0, reads the port the kernel chose, and closes the socket.
    public static func allocate() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else {
            throw TestSupportError("FreePort: socket() failed: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            throw TestSupportError("FreePort: bind(127.0.0.1:0) failed: \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getsockname(fd, $0, &length)
            }
        }
        guard named == 0 else {
            throw TestSupportError("FreePort: getsockname() failed: \(String(cString: strerror(errno)))")
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
