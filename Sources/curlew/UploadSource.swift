import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One file to send: where it is, the name it gets on the server, and its size and modification time as listed.
struct UploadItem: Sendable, Hashable {
    /// `/`-separated, relative to the source directory (or as written in the manifest).
    let relativePath: String
    let absolutePath: String
    let size: Int64
    let modifiedNanoseconds: Int64
}

/// A path that could not be listed, reported as a failure without stopping the run.
struct UnlistablePath: Sendable {
    let relativePath: String
    let reason: String
}

struct UploadListing: Sendable {
    var items: [UploadItem] = []
    var problems: [UnlistablePath] = []
}

enum UploadSource {
    /// Lists a directory recursively or a manifest (one path per line).
    ///
    /// - Throws: `ValidationError` (a usage error) when SOURCE itself is missing or unreadable: nothing could be sent.
    static func list(_ source: String) throws -> UploadListing {
        var status = stat()
        guard stat(source, &status) == 0 else {
            throw ValidationError("cannot read SOURCE \(source.debugDescription): \(String(cString: strerror(errno)))")
        }
        if status.st_mode & S_IFMT == S_IFDIR {
            guard let directory = opendir(source) else {
                throw ValidationError(
                    "cannot read directory \(source.debugDescription): \(String(cString: strerror(errno)))")
            }
            closedir(directory)
            var listing = UploadListing()
            walk(directory: source, relative: "", into: &listing)
            listing.items.sort { $0.relativePath < $1.relativePath }
            return listing
        }
        return try readManifest(source)
    }

    /// Symbolic links to files are followed; links to directories are not, so a link cycle cannot loop forever.
    private static func walk(directory: String, relative: String, into listing: inout UploadListing) {
        guard let handle = opendir(directory) else {
            listing.problems.append(
                UnlistablePath(
                    relativePath: relative, reason: "cannot read directory: \(String(cString: strerror(errno)))"))
            return
        }
        defer { closedir(handle) }
        var subdirectories: [(String, String)] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            let path = directory + "/" + name
            let relativePath = relative.isEmpty ? name : relative + "/" + name
            var status = stat()
            guard lstat(path, &status) == 0 else {
                listing.problems.append(
                    UnlistablePath(relativePath: relativePath, reason: String(cString: strerror(errno))))
                continue
            }
            switch status.st_mode & S_IFMT {
            case S_IFDIR:
                subdirectories.append((path, relativePath))
            case S_IFREG:
                listing.items.append(item(relativePath: relativePath, absolutePath: path, status: status))
            case S_IFLNK:
                var target = stat()
                if stat(path, &target) != 0 {
                    listing.problems.append(
                        UnlistablePath(
                            relativePath: relativePath,
                            reason: "broken symbolic link: \(String(cString: strerror(errno)))"))
                } else if target.st_mode & S_IFMT == S_IFREG {
                    listing.items.append(item(relativePath: relativePath, absolutePath: path, status: target))
                }
            default:
                continue
            }
        }
        for (path, relativePath) in subdirectories {
            walk(directory: path, relative: relativePath, into: &listing)
        }
    }

    /// Relative manifest entries are read from the manifest's folder and keep their relative name on the server;
    /// absolute ones are named by their path without the leading slash. Blank lines are skipped.
    private static func readManifest(_ manifest: String) throws -> UploadListing {
        guard let data = FileManager.default.contents(atPath: manifest) else {
            throw ValidationError("cannot read manifest \(manifest.debugDescription)")
        }
        let base = (manifest as NSString).deletingLastPathComponent
        var listing = UploadListing()
        var seen = Set<String>()
        for rawLine in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true) {
            let line = rawLine.hasSuffix("\r") ? String(rawLine.dropLast()) : String(rawLine)
            if line.trimmingCharacters(in: .whitespaces).isEmpty { continue }
            let absolutePath = line.hasPrefix("/") ? line : (base.isEmpty ? line : base + "/" + line)
            let relativePath = normalized(line)
            guard !relativePath.isEmpty, seen.insert(relativePath).inserted else { continue }
            var status = stat()
            guard stat(absolutePath, &status) == 0 else {
                listing.problems.append(
                    UnlistablePath(relativePath: relativePath, reason: String(cString: strerror(errno))))
                continue
            }
            guard status.st_mode & S_IFMT == S_IFREG else {
                listing.problems.append(UnlistablePath(relativePath: relativePath, reason: "not a regular file"))
                continue
            }
            listing.items.append(item(relativePath: relativePath, absolutePath: absolutePath, status: status))
        }
        return listing
    }

    /// Drops empty and `.` segments; `..` is kept out of server names, which must stay under the target URL.
    private static func normalized(_ path: String) -> String {
        path.split(separator: "/").filter { $0 != "." && $0 != ".." }.joined(separator: "/")
    }

    private static func item(relativePath: String, absolutePath: String, status: stat) -> UploadItem {
        UploadItem(
            relativePath: relativePath, absolutePath: absolutePath, size: Int64(status.st_size),
            modifiedNanoseconds: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec))
    }

    /// The file as it is now, to record exactly what was sent.
    static func currentState(of item: UploadItem) -> UploadItem? {
        var status = stat()
        guard stat(item.absolutePath, &status) == 0 else { return nil }
        return self.item(relativePath: item.relativePath, absolutePath: item.absolutePath, status: status)
    }
}
