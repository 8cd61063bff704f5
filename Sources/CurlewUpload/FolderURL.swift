import CurlewEngine

/// The URL of a folder that files' relative paths are appended to (a PUT destination, a WebDAV folder): the one
/// place that says where a path goes. The path ends with `/`; a query the URL carries (an API key, a token) goes
/// after each file's path, not into it; a fragment is dropped, as it is never sent.
package struct FolderURL: Sendable, Hashable {
    /// Scheme, authority and path, the path ending with `/`.
    package let folder: String
    /// The path alone, ending with `/` (`/` for a URL without one).
    package let path: String
    /// The query with its `?`, or empty.
    package let query: String

    /// The folder of `url`, its parts as ``URLParts`` reads them (as ``URLRedaction/redact(_:)`` does).
    package init(_ url: String) {
        let parts = URLParts(url)
        path = parts.path + (parts.path.utf8.last == UInt8(ascii: "/") ? "" : "/")
        folder = parts.schemeAndAuthority + path
        query = String(parts.query)
    }

    /// The folder that holds what `url` names, file or folder: `…/a/` for both `…/a/b` and `…/a/b/`. Nil when the
    /// path has no `/` to hold it.
    package init?(parentOf url: String) {
        let parts = URLParts(url)
        var path = parts.path
        if path.utf8.last == UInt8(ascii: "/") { path = path[..<path.utf8.index(before: path.endIndex)] }
        guard let lastSlash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        self.path = String(path[...lastSlash])
        folder = parts.schemeAndAuthority + self.path
        query = String(parts.query)
    }

    /// The folder's own URL, query included.
    package var url: String { folder + query }

    /// The URL of `relativePath` under the folder, each segment percent-encoded; `isFolder` adds the trailing `/`
    /// a folder's URL has.
    package func appending(_ relativePath: String, isFolder: Bool = false) -> String {
        folder + PercentEncoding.encodeEachSegment(of: relativePath) + (isFolder ? "/" : "") + query
    }
}
