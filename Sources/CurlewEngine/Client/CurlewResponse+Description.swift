import HTTPTypes

/// A response printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger) shows its
/// status, where it came from and what it carries, never a credential: the final URL can hold the request's token
/// (`?access_token=`), and `Set-Cookie` a session.
extension CurlewResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `CurlewResponse(200 https://api.example.com/me?access_token=<redacted>, headerFields: [...], body: 25
    /// bytes)`: the URL as errors name it (a user-info password and credential query values replaced), every header
    /// field's name with the value of each credential (the request-side list of `CurlewRequest`'s description, and
    /// `Set-Cookie`) replaced, and the body's size, never its bytes.
    public var description: String {
        let fields = Self.redactedLines(of: headerFields).map(\.debugDescription).joined(separator: ", ")
        return "CurlewResponse(\(status.code) \(redactedURL), headerFields: [\(fields)], body: \(body.count) bytes)"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the status, the redacted URL, the header fields as ``description`` shows them, the
    /// body's size and the metrics.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "status": status.code, "url": redactedURL, "headerFields": Self.redactedLines(of: headerFields),
                "body": "\(body.count) bytes", "metrics": metrics,
            ],
            displayStyle: .struct)
    }

    private var redactedURL: String { URLRedaction.messages.displaying(url) }

    /// `Name: value` per field of a response, the value of a credential replaced by
    /// `CurlewRequest.redactionMarker`: the engine's one list (`CredentialPolicy`), and `Set-Cookie`, the
    /// response's side of `Cookie`.
    private static func redactedLines(of fields: HTTPFields) -> [String] {
        fields.map { field in
            let isSecret = CredentialPolicy.isCredential(field) || field.name == .setCookie
            return "\(field.name): \(isSecret ? CurlewRequest.redactionMarker : field.value)"
        }
    }
}
