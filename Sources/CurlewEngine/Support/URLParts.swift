/// A URL as typed, split into the parts of RFC 3986's generic syntax without decoding or validating any of them: the
/// one place that says where each part of a URL string ends, for everything that reads URLs as typed (redaction,
/// request heads, spans, the socket URLs, upload folders and journals, the testing stubs), so they never disagree.
///
/// - the scheme is what comes before the first `://`; a string without `://` has none, and then no authority:
///   it is a path, a query and a fragment (a relative reference);
/// - the authority runs to the first `/`, `?` or `#` after `://`;
/// - the path runs from there to the first `?` or `#`;
/// - the query runs from that `?` to the first `#` after it; a `#` before any `?` starts the fragment, and a `?`
///   after it belongs to the fragment.
///
/// The parts are slices of the same string, so a caller can slice the string between them, or rebuild it with one
/// part replaced.
package struct URLParts {
    /// The whole URL.
    package let url: Substring
    /// What comes before `://`, as typed; nil when the string has no `://`.
    package let scheme: Substring?
    /// The authority (user-info, host and port), as typed; empty when there is no scheme.
    package let authority: Substring
    /// The path, as typed; possibly empty.
    package let path: Substring
    /// The query with its leading `?`; empty when there is none.
    package let query: Substring
    /// The fragment with its leading `#`; empty when there is none.
    package let fragment: Substring

    package init(_ url: some StringProtocol) {
        let url = Substring(url)
        self.url = url
        let utf8 = url.utf8
        var authorityStart = url.startIndex
        var hasScheme = false
        // A byte search: Foundation's `range(of:)` costs more than every other part of a request's validation.
        var index = utf8.startIndex
        while let colon = utf8[index...].firstIndex(of: UInt8(ascii: ":")) {
            let afterColon = utf8[utf8.index(after: colon)...]
            if afterColon.starts(with: [UInt8(ascii: "/"), UInt8(ascii: "/")]) {
                authorityStart = utf8.index(colon, offsetBy: 3)
                hasScheme = true
                break
            }
            index = utf8.index(after: colon)
        }
        let isAuthorityEnd = { (byte: UInt8) in
            byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
        }
        let pathStart =
            hasScheme ? (utf8[authorityStart...].firstIndex(where: isAuthorityEnd) ?? utf8.endIndex) : url.startIndex
        let pathEnd =
            utf8[pathStart...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? utf8.endIndex
        let fragmentStart =
            utf8[pathEnd...].first == UInt8(ascii: "?")
            ? (utf8[pathEnd...].firstIndex(of: UInt8(ascii: "#")) ?? utf8.endIndex) : pathEnd
        scheme = hasScheme ? url[..<utf8.index(authorityStart, offsetBy: -3)] : nil
        authority = url[authorityStart..<pathStart]
        path = url[pathStart..<pathEnd]
        query = url[pathEnd..<fragmentStart]
        fragment = url[fragmentStart...]
    }

    /// The scheme, `://` and the authority: everything before the path; empty when there is no scheme.
    package var schemeAndAuthority: Substring { url[..<authority.endIndex] }

    /// The scheme and `://`: everything before the authority; empty when there is no scheme.
    package var beforeAuthority: Substring { url[..<authority.startIndex] }

    /// The user-info (`user:password`) before the authority's last `@`, found by bytes; nil when there is no `@`.
    package var userInfo: Substring? {
        authority.utf8.lastIndex(of: UInt8(ascii: "@")).map { authority[..<$0] }
    }

    /// The host and port: the authority after its last `@`, or all of it.
    package var hostAndPort: Substring {
        authority.utf8.lastIndex(of: UInt8(ascii: "@")).map { authority[authority.utf8.index(after: $0)...] }
            ?? authority
    }

    /// The query's parameters (`name=value`, as typed) after its `?`, split at each `&` by bytes, empty ones kept; none
    /// without a query. By bytes: a combining mark after the `?` is part of the query, not of a Character to drop.
    package var queryParameters: [Substring] {
        guard !query.isEmpty else { return [] }
        let afterMark = url[url.utf8.index(after: query.startIndex)..<query.endIndex]
        return afterMark.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false).map {
            Substring($0)
        }
    }

    /// The path, or `/` for an empty one (the path a request for the URL asks for).
    package var pathOrRoot: Substring { path.isEmpty ? "/" : path }
}

extension URLParts {
    /// Whether `text` is a scheme by RFC 3986's grammar: a letter, then letters, digits, `+`, `-` and `.`.
    package static func isSchemeName(_ text: some StringProtocol) -> Bool {
        func isLetter(_ byte: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) }
        guard let first = text.utf8.first, isLetter(first) else { return false }
        return text.utf8.allSatisfy { byte in
            isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "+-.".utf8.contains(byte)
        }
    }
}
