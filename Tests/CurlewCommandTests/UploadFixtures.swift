import Crypto
import CurlewTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A source tree for `curlew upload`, removed by `remove()`.
struct SourceTree {
    let root: String

    init(prefix: String = "curlew-upload-source") throws {
        root = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // Readable by an unprivileged user too (the unreadable-file test runs the command as one).
        chmod(root, 0o755)
    }

    @discardableResult
    func write(_ relativePath: String, _ bytes: [UInt8]) throws -> String {
        let path = root + "/" + relativePath
        let folder = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chmod(folder, 0o755)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        return path
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Distinct content per file, so a file stored under another's name is caught.
    static func content(for name: String, size: Int) -> [UInt8] {
        let seed = Array(name.utf8) + [0]
        return (0..<size).map { seed[$0 % seed.count] &+ UInt8(truncatingIfNeeded: $0 / seed.count) }
    }
}

/// The nginx WebDAV target of one test: its own folder, its own lines in the shared access log.
struct DavTarget {
    let nginx: NginxServer
    let folder: String

    init(nginx: NginxServer) {
        self.nginx = nginx
        self.folder = "run-" + UUID().uuidString
    }

    var url: String { nginx.httpBaseURL + "/dav/\(folder)/" }

    func storedPath(_ relativePath: String) -> String { nginx.scratchDirectory + "/\(folder)/" + relativePath }

    /// Successful (2xx) PUTs per decoded relative path, from nginx's access log.
    func acceptedPuts() throws -> [String: Int] {
        let log = (try? String(contentsOfFile: nginx.davAccessLogPath, encoding: .utf8)) ?? ""
        let prefix = "/dav/\(folder)/"
        var counts: [String: Int] = [:]
        for line in log.split(separator: "\n") {
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
    func loggedRequests(method: String) -> [(status: Int, path: String)] {
        let log = (try? String(contentsOfFile: nginx.davAccessLogPath, encoding: .utf8)) ?? ""
        let prefix = "/dav/\(folder)/"
        return log.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, fields[0] == method, let status = Int(fields[1]), fields[2].hasPrefix(prefix)
            else { return nil }
            return (status, String(fields[2].dropFirst(prefix.count)).removingPercentEncoding ?? "?")
        }
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: nginx.scratchDirectory + "/\(folder)")
    }
}

enum FileDigest {
    /// SHA-256 of a file, read in 1 MiB chunks.
    static func sha256(ofFile path: String) throws -> SHA256.Digest {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw TestSupportError("cannot open \(path)") }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
        }
        return hasher.finalize()
    }
}

/// The files a journal says were being sent (a `sending` line) and were never recorded as done: a run killed with
/// PUTs in flight leaves these.
func inFlightPaths(_ journalPath: String) throws -> Set<String> {
    let text = try String(contentsOfFile: journalPath, encoding: .utf8)
    var sending: Set<String> = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
    where line.hasPrefix("sending\t") {
        let fields = line.split(separator: "\t")
        if fields.count == 4, let path = String(fields[3]).removingPercentEncoding { sending.insert(path) }
    }
    return sending.subtracting(try journaledPaths(journalPath))
}

/// The done lines of a journal, decoded.
func journaledPaths(_ journalPath: String) throws -> [String] {
    let text = try String(contentsOfFile: journalPath, encoding: .utf8)
    var paths: [String] = []
    // Only newline-terminated lines count, as for the command itself.
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() where line.hasPrefix("done\t")
    {
        let fields = line.split(separator: "\t")
        if fields.count == 4, let path = String(fields[3]).removingPercentEncoding { paths.append(path) }
    }
    return paths
}
