import Foundation

/// A URL with its credentials replaced, everything else (encoding included) as it was: the one redaction behind
/// the engine's spans and log records (``openTelemetry``), the route layer's `LoggingInterceptor`
/// (``logging(queryParameters:)``) and the URLs errors name (``messages``).
package struct URLRedaction: Sendable, Hashable {
    /// What becomes of a URL's user-info (`user:password@`).
    package enum UserInfo: Sendable, Hashable {
        /// The password is replaced and the user name kept: `user:<replacement>@`; a user name alone stays.
        case password(replacement: String)
        /// All of it is replaced, whatever it holds: `<replacement>@`.
        case whole(replacement: String)
    }

    /// What becomes of the user-info.
    package var userInfo: UserInfo
    /// Lower-case names of the query parameters whose values are replaced; a URL's names are compared
    /// percent-decoded and lower-cased, so `%6Bey` and `KEY` are `key`.
    package var queryParameters: Set<String>
    /// What a redacted query value becomes.
    package var queryValueReplacement: String

    /// A redaction from its parts; see ``openTelemetry``, ``logging(queryParameters:)`` and ``messages``.
    package init(userInfo: UserInfo, queryParameters: Set<String>, queryValueReplacement: String) {
        self.userInfo = userInfo
        self.queryParameters = queryParameters
        self.queryValueReplacement = queryValueReplacement
    }

    /// OpenTelemetry's `url.full`: user-info of any kind becomes `REDACTED:REDACTED@`, and the values of the query
    /// parameters the semantic conventions name (`AWSAccessKeyId`, `Signature`, `sig`, `X-Goog-Signature`) and of
    /// ``credentialQueryParameters`` become `REDACTED`; the rest of the query is kept.
    package static let openTelemetry = URLRedaction(
        userInfo: .whole(replacement: "REDACTED:REDACTED"),
        queryParameters: credentialQueryParameters.union(["awsaccesskeyid", "signature", "sig", "x-goog-signature"]),
        queryValueReplacement: "REDACTED")

    /// Lower-case names of the query parameters that usually carry credentials (OAuth tokens, API keys, presigned
    /// URLs' signatures): the ones every message and log line of Curlew's libraries redacts.
    package static let credentialQueryParameters: Set<String> = [
        "access_token", "id_token", "refresh_token", "token", "api_key", "apikey", "key", "password", "secret",
        "client_secret", "code", "signature", "sig", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
    ]

    /// URLs in error messages (``CurlewError/detail``, the route layer's errors): a user-info password and the
    /// values of ``credentialQueryParameters`` become `<redacted>`, since an error's text is what ends up in logs.
    package static let messages = logging(queryParameters: credentialQueryParameters)

    /// The route layer's logs: a user-info password and the values of `queryParameters` (lower-case) become
    /// `<redacted>`.
    package static func logging(queryParameters: Set<String>) -> URLRedaction {
        URLRedaction(
            userInfo: .password(replacement: "<redacted>"), queryParameters: queryParameters,
            queryValueReplacement: "<redacted>")
    }

    /// How a message names a URL a request was refused for: redacted, in quotes, when it parses; otherwise not at
    /// all, since no redaction can find the password of a URL no parser reads (`https://user:pa/ss@host/`). One
    /// whose password may hide in its port and path (``displaying(_:)``) is named as that function shows it.
    package func naming(_ url: String) -> String {
        guard URLComponents(string: url) != nil else { return "a URL that does not parse" }
        return displaying(url).debugDescription
    }

    /// How a command's output (printed lines, summaries, reports, shard records) names a URL it works on: redacted;
    /// and where a password with a raw `/`, `?` or `#` hides the user-info from ``redact(_:)``, everything from the
    /// scheme to that `@` is replaced too. That is the case for a URL no parser reads (`https://user:pa/ss@host/`:
    /// up to its last `@`), and for one whose authority reads as `name:digits` with an `@` before the next `/`
    /// (`https://admin:1234/x9@host/`: host `admin` and port 1234 to every parser, a password `1234/x9` to whoever
    /// typed it). A URL with an explicit port whose first path segment holds an `@` (`http://h:8080/a@b.com`) is
    /// shown with more replaced than it needs; a template's `{{column}}` holds no `@` and is shown as it is.
    package func displaying(_ url: String) -> String {
        let redacted = redact(url)
        let parts = URLParts(redacted)
        guard parts.scheme != nil else { return redacted }
        // Delimiters by bytes, as everywhere in this type: a combining mark after one fuses with it into a
        // Character that is not the delimiter, but every parser and server still reads the byte.
        let afterScheme = redacted[parts.authority.startIndex...]
        let authority = parts.authority
        guard !authority.utf8.contains(UInt8(ascii: "@")) else { return redacted }
        let hiddenEnd: Substring.Index?
        if URLComponents(string: url) == nil {
            // No parser reads it: whatever comes before the last `@` may be user-info.
            hiddenEnd = afterScheme.utf8.lastIndex(of: UInt8(ascii: "@"))
        } else if let colon = authority.utf8.firstIndex(of: UInt8(ascii: ":")),
            authority.utf8[authority.utf8.index(after: colon)...].allSatisfy({ (0x30...0x39).contains($0) }),
            authority.endIndex < afterScheme.endIndex
        {
            // `name:digits`, then an `@` before the next `/`: the rest of a password with a raw `/`, `?` or `#`
            // (`https://admin:1234/x9@host/`). An `@` in a later segment (`/users/a@b.com`) is a path's.
            let segment = afterScheme.utf8[afterScheme.utf8.index(after: authority.endIndex)...]
                .prefix { $0 != UInt8(ascii: "/") }
            hiddenEnd = segment.firstIndex(of: UInt8(ascii: "@"))
        } else {
            hiddenEnd = nil
        }
        guard let at = hiddenEnd else { return redacted }
        let replacement =
            switch userInfo {
            case .password(let replacement): replacement
            case .whole(let replacement): replacement
            }
        return parts.beforeAuthority + replacement + redacted[at...]
    }

    /// The URL with its credentials replaced: the user-info of its authority, and the values of ``queryParameters``
    /// in its query, the parts as ``URLParts`` reads them; when the query's last value is replaced, the fragment
    /// after it is too.
    package func redact(_ url: String) -> String {
        // Most URLs carry neither: a span's URL is then the caller's string, not a copy.
        guard
            url.utf8.contains(where: {
                $0 == UInt8(ascii: "@") || ($0 == UInt8(ascii: "?") && !queryParameters.isEmpty)
            })
        else { return url }
        let parts = URLParts(url)
        var result = String(parts.beforeAuthority)
        result += redactingUserInfo(of: parts.authority)
        result += parts.path
        guard !queryParameters.isEmpty, !parts.query.isEmpty else {
            result += parts.query
            result += parts.fragment
            return result
        }
        result += "?"
        var lastWasRedacted = false
        let parameters = parts.queryParameters.map { parameter in
            guard let equals = parameter.utf8.firstIndex(of: UInt8(ascii: "=")),
                queryParameters.contains(PercentEncoding.decode(parameter[..<equals])?.lowercased() ?? "")
            else {
                lastWasRedacted = false
                return String(parameter)
            }
            lastWasRedacted = true
            // Up to the `=` byte: a combining mark fused with it is the value's.
            return parameter[..<parameter.utf8.index(after: equals)] + queryValueReplacement
        }
        // A secret typed with a raw `#` (`?key=ab#cd`) goes on into what parsers call the fragment: that goes too.
        // The fragment is never sent, so nothing the request carried is hidden.
        let fragment =
            lastWasRedacted && !parts.fragment.isEmpty ? "#" + queryValueReplacement : String(parts.fragment)
        return result + parameters.joined(separator: "&") + fragment
    }

    /// The environment variables libcurl reads a proxy URL from, for ``hidingProxyCredentials(in:configured:)``.
    static let proxyVariables = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]

    /// libcurl's error message with the user-info of every proxy URL it may quote replaced by `<redacted>`: the
    /// client's own (`configured`) and the environment's. libcurl quotes a proxy URL it cannot read, password
    /// included (`Unsupported proxy syntax in 'http://user:pass word@host'`), and URLs no parser reads are exactly
    /// those, so each is found as the bytes it is, not parsed: from its start to its `@`, or to the end of a message
    /// libcurl cut at its buffer's size (256 bytes) inside the URL.
    package static func hidingProxyCredentials(in message: String, configured: String?) -> String {
        let proxies = [configured] + proxyVariables.map { name in getenv(name).map { String(cString: $0) } }
        var bytes = Array(message.utf8)
        let replacement = Array("<redacted>".utf8)
        var changed = false
        for proxy in proxies.compactMap({ $0 }) {
            let url = Array(proxy.utf8)
            guard let at = url.lastIndex(of: UInt8(ascii: "@")) else { continue }
            // The user-info starts after `scheme://`, or at the start of a URL without a scheme.
            let separator = Array("://".utf8)
            let userInfoStart =
                url.indices.first { $0 + 3 <= at && url[$0..<$0 + 3].elementsEqual(separator) }.map { $0 + 3 } ?? 0
            guard userInfoStart < at else { continue }
            let secret = url[..<at]
            var index = 0
            while index < bytes.count {
                let compared = min(secret.count, bytes.count - index)
                // At least one byte of the user-info: a message cut inside the scheme shows nothing of it.
                if compared > userInfoStart, bytes[index..<index + compared].elementsEqual(secret.prefix(compared)) {
                    bytes.replaceSubrange(index + userInfoStart..<index + compared, with: replacement)
                    changed = true
                    index += userInfoStart + replacement.count
                } else {
                    index += 1
                }
            }
        }
        return changed ? String(decoding: bytes, as: UTF8.self) : message
    }

    private func redactingUserInfo(of authority: Substring) -> Substring {
        // The last `@` ends the user-info: a password may hold `@` unescaped, a host never does.
        guard let at = authority.utf8.lastIndex(of: UInt8(ascii: "@")) else { return authority }
        switch userInfo {
        case .password(let replacement):
            guard let colon = authority[..<at].utf8.firstIndex(of: UInt8(ascii: ":")) else { return authority }
            return authority[..<authority.utf8.index(after: colon)] + replacement + authority[at...]
        case .whole(let replacement):
            return Substring(replacement) + authority[at...]
        }
    }
}
