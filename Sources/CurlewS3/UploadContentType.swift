import CurlewEngine

/// Content types by file extension: the formats a bucket most often serves to browsers and tools. Anything else is
/// `application/octet-stream`; `--content-type` overrides the table for every file.
package enum UploadContentType {
    package static let byExtension: [String: String] = [
        "html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8", "css": "text/css; charset=utf-8",
        "js": "text/javascript; charset=utf-8", "mjs": "text/javascript; charset=utf-8", "json": "application/json",
        "txt": "text/plain; charset=utf-8", "md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8",
        "xml": "application/xml", "svg": "image/svg+xml", "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg",
        "gif": "image/gif", "webp": "image/webp", "avif": "image/avif", "ico": "image/vnd.microsoft.icon",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "zst": "application/zstd", "wasm": "application/wasm", "mp4": "video/mp4",
        "webm": "video/webm", "mp3": "audio/mpeg", "wav": "audio/wav", "woff": "font/woff", "woff2": "font/woff2",
        "parquet": "application/vnd.apache.parquet", "yaml": "application/yaml", "yml": "application/yaml",
    ]

    package static let fallback = "application/octet-stream"

    /// The type for a relative path, by its last extension, case-insensitively.
    package static func forPath(_ path: String) -> String {
        let name = PercentEncoding.segments(of: path, omittingEmpty: true).last ?? Substring(path)
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return fallback }
        return byExtension[name[name.index(after: dot)...].lowercased()] ?? fallback
    }
}
