import CLibCurl

/// A cookie in a client's store (``CurlewClient/Configuration/storesCookies``).
public struct CurlewCookie: Sendable, Hashable {
    /// The host it is sent to (with ``includesSubdomains``, also to that domain's subdomains).
    public let domain: String
    /// Whether it is sent to subdomains of ``domain`` too (it was set with a `Domain` attribute).
    public let includesSubdomains: Bool
    public let path: String
    /// Whether it is sent over https only.
    public let isSecure: Bool
    /// When it expires, in seconds since 1970; `nil` for a session cookie (kept until the client goes away).
    public let expires: Int?
    public let name: String
    public let value: String

    /// A line of libcurl's cookie list (Netscape format: tab-separated, `#HttpOnly_` before an HttpOnly domain).
    init?(netscapeLine line: String) {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard fields.count >= 7 else { return nil }
        var domain = fields[0]
        if domain.hasPrefix("#HttpOnly_") { domain.removeFirst("#HttpOnly_".count) }
        self.domain = domain.hasPrefix(".") ? String(domain.dropFirst()) : domain
        includesSubdomains = fields[1] == "TRUE"
        path = fields[2]
        isSecure = fields[3] == "TRUE"
        expires = Int(fields[4]).flatMap { $0 == 0 ? nil : $0 }
        name = fields[5]
        value = fields[6]
    }
}

extension CurlewClient {
    /// The cookies the client keeps, in libcurl's order; empty for a client that does not store cookies.
    public func cookies() -> [CurlewCookie] {
        withCookieStore { easy in
            var raw: UnsafeMutableRawPointer?
            guard curlew_easy_getinfo_pointer(easy, CURLINFO_COOKIELIST, &raw) == CURLE_OK else { return [] }
            let list = raw?.assumingMemoryBound(to: curl_slist.self)
            defer { curl_slist_free_all(list) }
            var cookies: [CurlewCookie] = []
            var node = list
            while let current = node {
                if let data = current.pointee.data, let cookie = CurlewCookie(netscapeLine: String(cString: data)) {
                    cookies.append(cookie)
                }
                node = current.pointee.next
            }
            return cookies
        } ?? []
    }

    /// Forgets every cookie the client keeps. Requests in flight may still store the ones their responses set.
    public func clearCookies() {
        _ = withCookieStore { easy in curlew_easy_setopt_string(easy, CURLOPT_COOKIELIST, "ALL") }
    }

    /// Runs `body` with a throwaway easy handle on the client's cookie store (libcurl reads and changes a share's
    /// cookies only through an easy handle attached to it, under the share's lock); nil without a store.
    private func withCookieStore<T>(_ body: (UnsafeMutableRawPointer) -> T) -> T? {
        guard settings.storesCookies, let share = settings.share, let easy = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(easy) }
        guard curlew_easy_setopt_pointer(easy, CURLOPT_SHARE, share) == CURLE_OK else { return nil }
        return body(easy)
    }
}
