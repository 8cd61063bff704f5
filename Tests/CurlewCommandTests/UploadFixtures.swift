import Crypto
import CurlewTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
