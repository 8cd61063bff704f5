import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A source tree for `curlew upload`, removed by `remove()`.
public struct SourceTree: Sendable {
    /// The tree's folder.
    public let root: String

    /// A new, empty folder under the temporary directory.
    public init(prefix: String = "curlew-upload-source") throws {
        root = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // Readable by an unprivileged user too (the unreadable-file test runs the command as one).
        chmod(root, 0o755)
    }

    /// Writes a file at a relative path, making its folders; returns its absolute path.
    @discardableResult
    public func write(_ relativePath: String, _ bytes: [UInt8]) throws -> String {
        let path = root + "/" + relativePath
        let folder = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chmod(folder, 0o755)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        return path
    }

    /// Deletes the tree.
    public func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Distinct content per file, so a file stored under another's name is caught.
    public static func content(for name: String, size: Int) -> [UInt8] {
        let seed = Array(name.utf8) + [0]
        return (0..<size).map { seed[$0 % seed.count] &+ UInt8(truncatingIfNeeded: $0 / seed.count) }
    }
}

/// The nginx WebDAV target of one test: its own folder, its own lines in the shared access log.
public struct DavTarget: Sendable {
    /// The server.
    public let nginx: NginxServer
    /// The target's folder under the server's WebDAV root.
    public let folder: String

    /// A target in a folder of its own.
    public init(nginx: NginxServer) {
        self.nginx = nginx
        self.folder = "run-" + UUID().uuidString
    }

    /// The URL files are PUT under (ends with `/`).
    public var url: String { nginx.httpBaseURL + "/dav/\(folder)/" }

    /// Where nginx stored a file.
    public func storedPath(_ relativePath: String) -> String { nginx.scratchDirectory + "/\(folder)/" + relativePath }

    /// Successful (2xx) PUTs per decoded relative path, from nginx's access log.
    public func acceptedPuts() throws -> [String: Int] {
        let prefix = "/dav/\(folder)/"
        var counts: [String: Int] = [:]
        for line in nginx.davLog.lines(inGroupOf: prefix) {
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, fields[0] == "PUT", fields[1].hasPrefix("2"), fields[2].hasPrefix(prefix) else {
                continue
            }
            let relative = String(fields[2].dropFirst(prefix.count)).removingPercentEncoding ?? "?"
            counts[relative, default: 0] += 1
        }
        return counts
    }

    /// Every request of `method` to this target's folder in nginx's access log, in order: its status and the
    /// decoded relative path.
    public func loggedRequests(method: String) -> [(status: Int, path: String)] {
        let prefix = "/dav/\(folder)/"
        return nginx.davLog.lines(inGroupOf: prefix).compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, fields[0] == method, let status = Int(fields[1]), fields[2].hasPrefix(prefix)
            else { return nil }
            return (status, String(fields[2].dropFirst(prefix.count)).removingPercentEncoding ?? "?")
        }
    }

    /// Deletes what the target received.
    public func remove() {
        try? FileManager.default.removeItem(atPath: nginx.scratchDirectory + "/\(folder)")
    }
}
