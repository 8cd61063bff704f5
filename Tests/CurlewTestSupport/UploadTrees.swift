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

/// The WebDAV target of one test (nginx or WsgiDAV): its own folder, its own lines in the server's shared access log.
public struct DavTarget: Sendable {
    /// The server's URL: scheme, host and port.
    public let baseURL: String
    /// The folder the server stores the location's files in.
    public let scratchDirectory: String
    /// The server's log of requests to the location, `METHOD STATUS PATH` per line.
    public let log: AccessLogIndex
    /// The target's folder under the location.
    public let folder: String
    /// How the server treats a PUT into a missing folder.
    public let location: Location

    /// Where a target lives, by how its server treats a PUT into a folder that does not exist.
    public enum Location: String, Sendable {
        /// nginx's `/dav/`: a PUT makes the folders its path names (`create_full_put_path on`), as object stores do.
        case makesFolders = "dav"
        /// WsgiDAV's `/dav-strict/`: a PUT into a missing folder fails with 409 Conflict and MKCOL makes folders,
        /// as RFC 4918 has it (Apache's mod_dav, sabre/dav, IIS).
        case strict = "dav-strict"
        /// WsgiDAV's `/dav-no-mkcol/`: as ``strict``, but MKCOL is forbidden (403).
        case strictWithoutMKCOL = "dav-no-mkcol"
        /// WsgiDAV's `/dav-flaky-mkcol/`: as ``strict``, but the first MKCOL of each folder answers 503.
        case strictWithFlakyMKCOL = "dav-flaky-mkcol"
        /// WsgiDAV's `/dav-down-mkcol/`: as ``strict``, but every MKCOL answers 503.
        case strictWithFailingMKCOL = "dav-down-mkcol"
        /// WsgiDAV's `/dav-racing/`: as ``strict``, but a PUT refused with 409 has its folder made right after, as
        /// another run sharing the destination would.
        case strictRacing = "dav-racing"
        /// WsgiDAV's `/dav-mkcol-race/`: as ``strict``, but the first MKCOL of each folder makes it and answers 500,
        /// as WsgiDAV answers the loser of two MKCOLs of one folder sent by two runs at once.
        case strictMKCOLRace = "dav-mkcol-race"
    }

    /// A target on nginx's `/dav/`, in a folder of its own that does not exist until something is stored in it.
    public init(nginx: NginxServer) {
        self.init(
            baseURL: nginx.httpBaseURL, scratchDirectory: nginx.scratchDirectory, log: nginx.davLog,
            location: .makesFolders)
    }

    /// A target on WsgiDAV (any ``Location`` but ``Location/makesFolders``), in a folder of its own that
    /// does not exist until something makes it.
    public init(wsgidav: WsgiDAVServer, location: Location) {
        self.init(
            baseURL: wsgidav.baseURL, scratchDirectory: wsgidav.scratchDirectory, log: wsgidav.log, location: location)
    }

    private init(baseURL: String, scratchDirectory: String, log: AccessLogIndex, location: Location) {
        self.baseURL = baseURL
        self.scratchDirectory = scratchDirectory
        self.log = log
        self.folder = "run-" + UUID().uuidString
        self.location = location
    }

    /// The target's path on the server, which every request to it starts with (ends with `/`).
    public var pathPrefix: String { "/\(location.rawValue)/\(folder)/" }

    /// The URL files are PUT under (ends with `/`).
    public var url: String { baseURL + pathPrefix }

    /// Where the server stored a file.
    public func storedPath(_ relativePath: String) -> String { scratchDirectory + "/\(folder)/" + relativePath }

    /// Successful (2xx) PUTs per decoded relative path, from the server's access log.
    public func acceptedPuts() throws -> [String: Int] {
        let prefix = pathPrefix
        var counts: [String: Int] = [:]
        for line in log.lines(inGroupOf: prefix) {
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, fields[0] == "PUT", fields[1].hasPrefix("2"), fields[2].hasPrefix(prefix) else {
                continue
            }
            let relative = String(fields[2].dropFirst(prefix.count)).removingPercentEncoding ?? "?"
            counts[relative, default: 0] += 1
        }
        return counts
    }

    /// Every request of `method` to this target's folder in the server's access log, in order: its status and the
    /// decoded relative path.
    public func loggedRequests(method: String) -> [(status: Int, path: String)] {
        let prefix = pathPrefix
        return log.lines(inGroupOf: prefix).compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, fields[0] == method, let status = Int(fields[1]), fields[2].hasPrefix(prefix)
            else { return nil }
            return (status, String(fields[2].dropFirst(prefix.count)).removingPercentEncoding ?? "?")
        }
    }

    /// Deletes what the target received.
    public func remove() {
        try? FileManager.default.removeItem(atPath: scratchDirectory + "/\(folder)")
    }
}
