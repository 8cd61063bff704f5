extension CurlewClient.HTTPVersion {
    /// Whether requests to `url` go over HTTP/1 on a connection of their own at a time, so that bytes waiting on a
    /// pooled connection can only be stray: http URLs (HTTP/2 over cleartext only with prior knowledge) and
    /// anything asked as HTTP/1.1. An https request with HTTP/2 allowed may land on a multiplexed connection, whose
    /// waiting frames (other streams, PING, SETTINGS) are libcurl's to read.
    func isHTTP1Only(for url: String) -> Bool {
        switch storage {
        case .http1_1: true
        case .http2PriorKnowledge: false
        case .http2: Self.hasHTTPScheme(url)
        }
    }

    private static func hasHTTPScheme(_ url: String) -> Bool {
        var utf8 = url.utf8.makeIterator()
        for expected in "http:".utf8 {
            guard let byte = utf8.next(), byte | 0x20 == expected | 0x20 else { return false }
        }
        return true
    }
}
