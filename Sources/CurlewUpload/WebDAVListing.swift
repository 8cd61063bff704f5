package import CurlewEngine
import CurlewS3
import Foundation

/// A file a WebDAV server holds, as PROPFIND describes it.
package struct WebDAVEntry: Sendable, Equatable {
    /// The path under the listed URL, unencoded (`a/b.txt`).
    package let relativePath: String
    package let size: Int64
    /// `getlastmodified`, in seconds since 1970 (HTTP dates have whole seconds).
    package let modified: Double?
}

/// PROPFIND of a WebDAV folder, walked one level at a time (`Depth: 1`: servers such as nginx refuse `infinity`),
/// and DELETE of a file.
package struct WebDAVFolder: Sendable {
    package let folderURL: FolderURL
    package let client: CurlewClient
    package let headers: [(name: String, value: String)]

    package init(baseURL: String, client: CurlewClient, headers: [(name: String, value: String)]) {
        self.folderURL = FolderURL(baseURL)
        self.client = client
        self.headers = headers
    }

    /// Every file under the folder; a folder that does not exist yet holds none.
    package func list() async throws -> [WebDAVEntry] {
        var files: [WebDAVEntry] = []
        var folders = [""]
        // By exact bytes: folders named `café` in NFC and in NFD are two, each listed.
        var seen = Set<ExactPath>()
        while let folder = folders.popLast() {
            guard seen.insert(ExactPath(folder)).inserted else { continue }
            let url = folderURL.appending(folder, isFolder: !folder.isEmpty)
            var request = try CurlewRequest(method: .init("PROPFIND")!, url: url, body: .bytes(Array(Self.query.utf8)))
            try request.addHeader("Depth", "1")
            try request.addHeader("Content-Type", "application/xml")
            for (name, value) in headers { try request.addHeader(name, value) }
            let response = try await client.execute(request)
            if response.status.code == 404 && folder.isEmpty { return [] }
            guard response.status.code == 207 else {
                throw WebDAVListingError(
                    "PROPFIND \(URLRedaction.messages.redact(url)) answered \(response.status.code), "
                        + "not 207 Multi-Status (does the server speak WebDAV?)")
            }
            // As the server writes hrefs: percent-encoded (Foundation encodes a path typed with spaces or non-ASCII).
            let basePath = URLComponents(string: folderURL.url)?.percentEncodedPath ?? folderURL.path
            for entry in Self.parse(String(decoding: response.body, as: UTF8.self), basePath: basePath) {
                if entry.isFolder {
                    // Only folders under this one: a listing that names others (or `..`) cannot send the walk away.
                    if Self.isSubfolder(entry.relativePath, of: folder), SyncPlan.isAddressable(entry.relativePath) {
                        folders.append(entry.relativePath)
                    }
                } else if let size = entry.size {
                    files.append(WebDAVEntry(relativePath: entry.relativePath, size: size, modified: entry.modified))
                }
            }
        }
        return files.sorted { $0.relativePath < $1.relativePath }
    }

    /// Whether a folder a listing of `folder` names lies under it: its path starts with `folder/`, byte for byte.
    /// `hasPrefix` compares `Character`s, and `a/\u{301}b` starts with the grapheme `/\u{301}`, not `/`: a subfolder
    /// named `\u{301}b` was never walked.
    static func isSubfolder(_ path: String, of folder: String) -> Bool {
        let prefix = folder.isEmpty ? "" : folder + "/"
        return path.utf8.starts(with: prefix.utf8) && path.utf8.count > prefix.utf8.count
    }

    /// DELETE of one file; one already gone counts as deleted.
    package func delete(_ relativePath: String) async throws {
        var request = try CurlewRequest(
            method: .delete, url: folderURL.appending(relativePath))
        for (name, value) in headers { try request.addHeader(name, value) }
        let response = try await client.execute(request)
        guard (200..<300).contains(response.status.code) || response.status.code == 404 else {
            throw WebDAVListingError("DELETE answered \(response.status.code)")
        }
    }

    static let query =
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:propfind xmlns:D=\"DAV:\"><D:prop><D:resourcetype/>"
        + "<D:getcontentlength/><D:getlastmodified/></D:prop></D:propfind>"

    struct ParsedEntry: Equatable {
        let relativePath: String
        let isFolder: Bool
        let size: Int64?
        let modified: Double?
    }

    /// A Multi-Status body's entries, paths made relative to `basePath` (entries outside it are dropped). Namespace
    /// prefixes (`D:`, `d:`, `lp1:` …) are ignored: servers pick their own. Paths are compared segment by segment,
    /// decoded: servers encode differently (sabre, behind Nextcloud and ownCloud, writes lower-case hex and escapes
    /// `+`, `'` and `,`, where the typed folder has upper-case hex or none).
    static func parse(_ xml: String, basePath: String) -> [ParsedEntry] {
        let plain = xml.replacingOccurrences(
            of: "<([/]?)[A-Za-z][A-Za-z0-9]*:", with: "<$1", options: .regularExpression)
        let base = decodedSegments(of: basePath)
        return S3XML.elements("response", in: plain).compactMap { block -> ParsedEntry? in
            guard var href = S3XML.value("href", in: block) else { return nil }
            // An absolute URL or an absolute path: the path is what counts.
            if let components = URLComponents(string: href), components.host != nil {
                href = components.percentEncodedPath
            }
            let path = decodedSegments(of: href)
            guard path.segments.starts(with: base.segments) else { return nil }
            let relative = path.segments.dropFirst(base.segments.count)
            // An empty segment (`/dav/t//x`) or one holding a `/` (`/dav/t/%2Fx`) names nothing under the base that
            // a sync may compare or delete: the entry is left out (found by `make fuzz`).
            guard !relative.contains(where: { $0.isEmpty || $0.contains("/") }) else { return nil }
            let isFolder = block.contains("<collection") || path.endsWithSlash || relative.isEmpty
            let size = S3XML.value("getcontentlength", in: block).flatMap {
                Int64($0.trimmingCharacters(in: .whitespaces))
            }
            let modified = S3XML.value("getlastmodified", in: block).flatMap(Self.httpDate)
            return ParsedEntry(
                relativePath: relative.joined(separator: "/"), isFolder: isFolder, size: size, modified: modified)
        }
    }

    /// A path's segments, each percent-decoded (kept as it is when its escapes are not valid), without the empty
    /// one a trailing `/` leaves; and whether there was one.
    private static func decodedSegments(of path: String) -> (segments: [String], endsWithSlash: Bool) {
        var segments = PercentEncoding.segments(of: path)
        let endsWithSlash = segments.count > 1 && segments.last?.isEmpty == true
        if endsWithSlash { segments.removeLast() }
        return (segments.map { PercentEncoding.decode($0) ?? String($0) }, endsWithSlash)
    }

    /// An IMF-fixdate (`Fri, 27 Nov 2026 01:02:03 GMT`), in seconds since 1970.
    static func httpDate(_ text: String) -> Double? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text.trimmingCharacters(in: .whitespaces))?.timeIntervalSince1970
    }
}

/// A WebDAV listing or deletion the server refused.
package struct WebDAVListingError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
