import Testing

@testable import CurlewEngine

@Suite struct URLRedactionTests {
    @Test(arguments: [
        ("http://user:pw@127.0.0.1:8080/small", "http://REDACTED:REDACTED@127.0.0.1:8080/small"),
        ("https://user@api.local/", "https://REDACTED:REDACTED@api.local/"),
        ("https://a:b@c@api.local/x?y=1", "https://REDACTED:REDACTED@api.local/x?y=1"),
        ("https://api.local/p?access_token=abc&sig=s", "https://api.local/p?access_token=REDACTED&sig=REDACTED"),
        (
            "https://bucket.s3.local/o?AWSAccessKeyId=AKIA&Expires=9&Signature=s%2F",
            "https://bucket.s3.local/o?AWSAccessKeyId=REDACTED&Expires=9&Signature=REDACTED"
        ),
        // The fragment after a replaced last value may be the rest of it (a raw `#`): it is replaced too.
        (
            "https://storage.local/o?X-Goog-Signature=abc#f",
            "https://storage.local/o?X-Goog-Signature=REDACTED#REDACTED"
        ),
        ("https://api.local/users/a@b?x=1", "https://api.local/users/a@b?x=1"),
        ("https://api.local", "https://api.local"),
        // A `?` after the `#` is the fragment's, not a query.
        ("https://api.local/cb#state=1?token=x", "https://api.local/cb#state=1?token=x"),
        // Parts end by bytes: a combining mark fused with the `?` or a `/` stays, and the key after it is found.
        ("https://api.local/p?\u{301}a=1&sig=s", "https://api.local/p?\u{301}a=1&sig=REDACTED"),
        ("https://u:p@api.local/\u{301}?sig=s", "https://REDACTED:REDACTED@api.local/\u{301}?sig=REDACTED"),
    ])
    func spansAndEngineLogsReplaceAnyUserInfoAndCredentialQueryValues(url: String, redacted: String) {
        #expect(URLRedaction.openTelemetry.redact(url) == redacted)
    }

    private let logging = URLRedaction.logging(queryParameters: ["access_token", "key", "x-amz-signature"])

    @Test(arguments: [
        ("https://user:hunter2@api.local:8443/p?q=1#f", "https://user:<redacted>@api.local:8443/p?q=1#f"),
        ("https://user:p@ss@api.local/", "https://user:<redacted>@api.local/"),
        ("https://user@api.local/", "https://user@api.local/"),
        (
            "https://api.local/v1?page=2&access_token=abc&sort=name",
            "https://api.local/v1?page=2&access_token=<redacted>&sort=name"
        ),
        (
            "https://api.local/o?X-Amz-Signature=f00&KEY=k&%6Bey=k2",
            "https://api.local/o?X-Amz-Signature=<redacted>&KEY=<redacted>&%6Bey=<redacted>"
        ),
        ("https://api.local/p?keys=v&key&=x&&key=", "https://api.local/p?keys=v&key&=x&&key=<redacted>"),
        ("https://api.local/p%3Fkey=x?a=b#key=c", "https://api.local/p%3Fkey=x?a=b#key=c"),
        ("https://api.local/p?%zz=1&key=2", "https://api.local/p?%zz=1&key=<redacted>"),
        // A secret typed with a raw `#` runs into the fragment, which goes too; after a kept value it stays.
        ("https://api.local/p?key=ab#cd", "https://api.local/p?key=<redacted>#<redacted>"),
        ("https://api.local/p?key=ab&page=2#top", "https://api.local/p?key=<redacted>&page=2#top"),
        ("/relative?key=secret", "/relative?key=<redacted>"),
        // A combining mark after a delimiter fuses with it into one Character; the delimiter still counts, as it
        // does for every parser and server that reads the bytes. Before, each of these kept its secret.
        ("https://api.local/p?key=\u{301}secret", "https://api.local/p?key=<redacted>"),
        ("https://api.local/p?a=1&\u{301}x=2&key=secret", "https://api.local/p?a=1&\u{301}x=2&key=<redacted>"),
        ("https://user:\u{301}hunter2@api.local/", "https://user:<redacted>@api.local/"),
        ("https://user:hunter2@\u{301}api.local/", "https://user:<redacted>@\u{301}api.local/"),
    ])
    func theRouteLayersLogsReplaceThePasswordAndSecretQueryValues(url: String, redacted: String) {
        #expect(logging.redact(url) == redacted)
    }

    @Test(arguments: [
        ("https://user:hunter2@api.local/p", "https://user:<redacted>@api.local/p"),
        (
            "https://api.local/p?api_key=k1&page=2&Access_Token=t&X-Amz-Signature=s",
            "https://api.local/p?api_key=<redacted>&page=2&Access_Token=<redacted>&X-Amz-Signature=<redacted>"
        ),
    ])
    func errorMessagesReplaceThePasswordAndEveryCredentialQueryValue(url: String, redacted: String) {
        #expect(URLRedaction.messages.redact(url) == redacted)
    }

    @Test(arguments: [
        ("https://user:hunter2@api.local/p?key=k1", "https://user:<redacted>@api.local/p?key=<redacted>"),
        // No parser reads it, so the password's raw `/` hides the user-info from `redact`: all of it goes.
        ("https://user:hun/ter2@api.local/p", "https://<redacted>@api.local/p"),
        ("https://user:hun/ter2@api.local/p?token=t", "https://<redacted>@api.local/p?token=<redacted>"),
        // Every parser reads host `admin`, port 1234 and path `/x9@api.local/p`; whoever typed it, a password.
        ("https://admin:1234/x9@api.local/p", "https://<redacted>@api.local/p"),
        ("https://admin:1234?x9@api.local/p", "https://<redacted>@api.local/p"),
        // Raw `?` and `#` in a password no parser reads.
        ("https://user:pa?ss@api.local/x", "https://<redacted>@api.local/x"),
        ("https://user:pa#ss@api.local/", "https://<redacted>@api.local/"),
        // An `@` in a later segment, after a port, is a path's.
        ("http://localhost:8080/users/a@b.com", "http://localhost:8080/users/a@b.com"),
        // An `@` in a path after a host without a port is a path's.
        ("https://registry.local/@scope/pkg?token=t", "https://registry.local/@scope/pkg?token=<redacted>"),
        ("https://[::1]:8080/users/@me", "https://[::1]:8080/users/@me"),
        // A template keeps what holds no `@`.
        ("http://127.0.0.1/items/{{id}}?page={{page}}", "http://127.0.0.1/items/{{id}}?page={{page}}"),
        ("/srv/targets.txt", "/srv/targets.txt"),
    ])
    func aCommandsOutputNamesAURLWithoutItsCredentialsEvenWhenNoParserReadsIt(url: String, shown: String) {
        #expect(URLRedaction.messages.displaying(url) == shown)
    }

    @Test(arguments: [
        (
            "Unsupported proxy syntax in 'http://u:pass word@127.0.0.1:1'", "http://u:pass word@127.0.0.1:1",
            "Unsupported proxy syntax in 'http://<redacted>@127.0.0.1:1'"
        ),
        ("Unsupported proxy syntax in 'u:p w@h:1'", "u:p w@h:1", "Unsupported proxy syntax in '<redacted>@h:1'"),
        ("Could not resolve proxy: h", "http://u:p@h:1", "Could not resolve proxy: h"),
        // libcurl cuts its message at 256 bytes, here inside the password: what is left of it goes.
        (
            "Unsupported proxy syntax in 'http://u:p wAAAA",
            "http://u:p w" + String(repeating: "A", count: 300) + "@h:1",
            "Unsupported proxy syntax in 'http://<redacted>"
        ),
        ("Unsupported proxy syntax in 'htt", "http://u:p w@h:1", "Unsupported proxy syntax in 'htt"),
        ("Failed to connect to 127.0.0.1 port 1", nil, "Failed to connect to 127.0.0.1 port 1"),
    ])
    func libcurlsMessagesQuoteAProxyURLWithoutItsUserInfo(message: String, proxy: String?, shown: String) {
        #expect(URLRedaction.hidingProxyCredentials(in: message, configured: proxy) == shown)
    }

    @Test func withoutCredentialsTheURLIsUnchanged() {
        let url = "https://api.local/a%20b?c=d#e"
        #expect(URLRedaction.openTelemetry.redact(url) == url)
        #expect(logging.redact(url) == url)
        #expect(URLRedaction.messages.redact(url) == url)
    }
}
