import CurlewEngine
package import CurlewS3
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A path that could not be listed, reported as a failure without stopping the run.
package struct UnlistablePath: Sendable {
    package let relativePath: String
    package let reason: String
}

package struct UploadListing: Sendable {
    package var items: [UploadItem] = []
    package var problems: [UnlistablePath] = []
}

/// The files an upload sends.
///
/// A struct rather than an enum, so that sources can be added without breaking a caller's `switch`: it is written
/// as enum cases were (`.folder(path)`, `.manifest(path)`) and read back with ``folder`` and ``manifest``, each nil
/// for the other kinds; ``name`` is stable.
public struct UploadSource: Sendable, Hashable, CustomStringConvertible {
    /// The package's exhaustive view of the source.
    package enum Storage: Sendable, Hashable {
        case folder(String)
        case manifest(String)
    }

    /// What the source is, for an exhaustive `switch` inside the package.
    package let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// Every regular file under a folder, recursively; symbolic links to files are followed, to folders not.
    /// Each file's name on the server is its path relative to the folder.
    public static func folder(_ path: String) -> UploadSource { UploadSource(.folder(path)) }

    /// A text file with one path per line. Relative paths are read from the manifest's folder and keep that name
    /// on the server; absolute ones are named by their path without the leading `/`.
    public static func manifest(_ path: String) -> UploadSource { UploadSource(.manifest(path)) }

    /// The folder of a ``folder(_:)`` source; nil for every other kind.
    public var folder: String? {
        if case .folder(let path) = storage { path } else { nil }
    }

    /// The manifest of a ``manifest(_:)`` source; nil for every other kind.
    public var manifest: String? {
        if case .manifest(let path) = storage { path } else { nil }
    }

    /// The stable name: the static member's name (`"folder"`, `"manifest"`).
    public var name: String {
        switch storage {
        case .folder: "folder"
        case .manifest: "manifest"
        }
    }

    /// The ``name`` and the path, e.g. `folder("/data/photos")`.
    public var description: String { "\(name)(\(path.debugDescription))" }

    /// A folder or a manifest, whichever `path` is (the command's SOURCE argument).
    ///
    /// - Throws: ``UploadError`` (``UploadError/Kind/unreadableSource``) when `path` does not exist.
    package static func at(_ path: String) throws(UploadError) -> UploadSource {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw UploadError(
                .unreadableSource, "cannot read SOURCE \(path.debugDescription): \(String(cString: strerror(errno)))")
        }
        return status.st_mode & S_IFMT == S_IFDIR ? .folder(path) : .manifest(path)
    }

    /// The path the source was given as.
    package var path: String {
        switch storage {
        case .folder(let path), .manifest(let path): path
        }
    }

    /// Lists the source, sorted by relative path for a folder, in manifest order for a manifest.
    ///
    /// - Throws: ``UploadError`` (``UploadError/Kind/unreadableSource``) when the source itself is missing or
    ///   unreadable: nothing could be sent. Files that cannot be listed are ``UploadListing/problems`` instead.
    package func list() throws(UploadError) -> UploadListing {
        var status = stat()
        let source = path
        guard stat(source, &status) == 0 else {
            throw UploadError(
                .unreadableSource,
                "cannot read SOURCE \(source.debugDescription): \(String(cString: strerror(errno)))")
        }
        if case .folder = storage, status.st_mode & S_IFMT != S_IFDIR {
            throw UploadError(.unreadableSource, "\(source.debugDescription) is not a folder")
        }
        if status.st_mode & S_IFMT == S_IFDIR {
            guard let directory = opendir(source) else {
                throw UploadError(
                    .unreadableSource,
                    "cannot read directory \(source.debugDescription): \(String(cString: strerror(errno)))")
            }
            closedir(directory)
            var listing = UploadListing()
            Self.walk(directory: source, relative: "", into: &listing)
            listing.items.sort { $0.relativePath < $1.relativePath }
            return listing
        }
        return try Self.readManifest(source)
    }

    /// Why a path that is not valid UTF-8 is not sent. Its name on the server would be a guess (AWS CLI skips such
    /// files too), and decoded with U+FFFD it could name another file: `a\u{FFFD}.txt` beside `a<0xFF>.txt`.
    static let notUTF8 =
        "the name is not valid UTF-8 (shown with U+FFFD where it is not), so it has no name on the server: "
        + "rename it to send it"

    /// Symbolic links to files are followed; links to directories are not, so a link cycle cannot loop forever.
    /// A name that is not valid UTF-8 is a problem, and so is a folder's: nothing in it is listed.
    private static func walk(directory: String, relative: String, into listing: inout UploadListing) {
        guard let handle = opendir(directory) else {
            listing.problems.append(
                UnlistablePath(
                    relativePath: relative, reason: "cannot read directory: \(String(cString: strerror(errno)))"))
            return
        }
        defer { closedir(handle) }
        var subdirectories: [(String, String)] = []
        while true {
            // readdir ends a folder and fails (EIO, ESTALE on a network file system) alike with NULL: only errno
            // tells them apart, and a failure taken for the end would send part of the folder as if it were all
            // of it (and let `sync --delete` delete the rest).
            errno = 0
            guard let entry = readdir(handle) else {
                if errno != 0 {
                    listing.problems.append(
                        UnlistablePath(
                            relativePath: relative,
                            reason: "cannot read the whole directory: \(String(cString: strerror(errno)))"))
                }
                break
            }
            let nameBytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix(while: { $0 != 0 })) }
            let name = String(decoding: nameBytes, as: UTF8.self)
            if name == "." || name == ".." { continue }
            let path = directory + "/" + name
            let relativePath = relative.isEmpty ? name : relative + "/" + name
            guard String(validating: nameBytes, as: UTF8.self) != nil else {
                // Decoded with U+FFFD, the path names another file or none: never stat'd or sent under it.
                listing.problems.append(UnlistablePath(relativePath: relativePath, reason: notUTF8))
                continue
            }
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
                listing.items.append(UploadItem(relativePath: relativePath, absolutePath: path, status: status))
            case S_IFLNK:
                var target = stat()
                if stat(path, &target) != 0 {
                    listing.problems.append(
                        UnlistablePath(
                            relativePath: relativePath,
                            reason: "broken symbolic link: \(String(cString: strerror(errno)))"))
                } else if target.st_mode & S_IFMT == S_IFREG {
                    listing.items.append(UploadItem(relativePath: relativePath, absolutePath: path, status: target))
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
    /// absolute ones are named by their path without the leading slash. Blank lines are skipped, and so is a file
    /// listed again under the same name; another file that takes a name already given (`/data/x.csv` beside
    /// `data/x.csv`) is a problem, never sent in the first one's place or dropped unsaid.
    private static func readManifest(_ manifest: String) throws(UploadError) -> UploadListing {
        guard let data = FileManager.default.contents(atPath: manifest) else {
            throw UploadError(.unreadableSource, "cannot read manifest \(manifest.debugDescription)")
        }
        let base = (manifest as NSString).deletingLastPathComponent
        var listing = UploadListing()
        // The file (device and inode) each server name was given to.
        // By the name's exact bytes: `café` in NFC and in NFD are two names, which `String` keys would merge.
        var named: [ExactPath: (device: UInt64, inode: UInt64, line: String)] = [:]
        for lineBytes in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            let rawLine = String(decoding: lineBytes, as: UTF8.self)
            let line = rawLine.hasSuffix("\r") ? String(rawLine.dropLast()) : rawLine
            if line.trimmingCharacters(in: .whitespaces).isEmpty { continue }
            // The first byte decides: `hasPrefix("/")` compares Characters, and `/\u{301}x` starts with the Character
            // `/\u{301}`, not `/`, so that absolute path was read from the manifest's folder.
            let absolutePath =
                PercentEncoding.startsWithSlash(line) ? line : (base.isEmpty ? line : base + "/" + line)
            let relativePath = normalized(line)
            guard !relativePath.isEmpty else { continue }
            guard String(validating: lineBytes, as: UTF8.self) != nil else {
                listing.problems.append(UnlistablePath(relativePath: relativePath, reason: notUTF8))
                continue
            }
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
            let file = (device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
            if let earlier = named[ExactPath(relativePath)] {
                if earlier.device != file.device || earlier.inode != file.inode {
                    listing.problems.append(
                        UnlistablePath(
                            relativePath: relativePath,
                            reason:
                                "\(line.debugDescription) takes the name \(earlier.line.debugDescription) already gave "
                                + "another file: not sent"))
                }
                continue
            }
            named[ExactPath(relativePath)] = (file.device, file.inode, line)
            listing.items.append(UploadItem(relativePath: relativePath, absolutePath: absolutePath, status: status))
        }
        return listing
    }

    /// Drops empty and `.` segments and resolves `..` against the segment before it (`a/../b` names `b`, the file it
    /// reads); a `..` with nothing before it is dropped, as server names must stay under the target URL.
    private static func normalized(_ path: String) -> String {
        var segments: [Substring] = []
        for segment in PercentEncoding.segments(of: path, omittingEmpty: true) where segment != "." {
            if segment == ".." {
                _ = segments.popLast()
            } else {
                segments.append(segment)
            }
        }
        return segments.joined(separator: "/")
    }
}
