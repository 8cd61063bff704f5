import HTTPTypes

/// A request printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger) shows where
/// it goes and what it carries, never a credential: logging a request is the common way one leaks.
extension CurlewRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// What every printed request, and the route layer's printed credentials, show in place of a secret: the marker
    /// of the URLs errors name (`<redacted>`).
    package static let redactionMarker = URLRedaction.messages.queryValueReplacement

    /// `CurlewRequest(POST https://user:<redacted>@host/path?access_token=<redacted>, headerFields: [...], body: 25
    /// bytes)`: the URL as errors name it (a user-info password and credential query values replaced), every
    /// header field's name with the value of each credential (`Authorization`, `Cookie`, `Proxy-Authorization`,
    /// `X-Amz-Security-Token`, fields set with ``setCredentialHeader(_:_:)``) replaced, and the body's kind and
    /// size, never its bytes.
    public var description: String {
        let fields = redactedHeaderLines.map(\.debugDescription).joined(separator: ", ")
        let body = bodySummary.map { ", body: \($0)" } ?? ""
        return "CurlewRequest(\(method) \(redactedURL), headerFields: [\(fields)]\(body))"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the method, the redacted URL, the header fields as ``description`` shows them and
    /// the body's summary.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "method": method.rawValue, "url": redactedURL, "headerFields": redactedHeaderLines,
                "body": bodySummary as Any,
            ],
            displayStyle: .struct)
    }

    /// The URL with its credentials replaced, as messages name it (a password a raw `/` hides from parsers too).
    private var redactedURL: String { URLRedaction.messages.displaying(url) }

    /// `Name: value` per field, the value of a credential (`CredentialPolicy`, the engine's one list) replaced.
    private var redactedHeaderLines: [String] {
        headerFields.map { field in
            "\(field.name): \(CredentialPolicy.isCredential(field) ? Self.redactionMarker : field.value)"
        }
    }

    /// The body's kind and size, without opening a file or reading a stream; `nil` without a body.
    private var bodySummary: String? {
        guard let body else { return nil }
        switch body.storage {
        case .bytes(let bytes):
            return "\(bytes.count) bytes"
        case .file(let file):
            let source = file.path.map { "file \($0)" } ?? "file descriptor \(file.descriptor ?? -1)"
            return source + (file.length.map { ", \($0) bytes" } ?? "")
        case .stream(let stream):
            return "stream" + (stream.length.map { " of \($0) bytes" } ?? "")
        case .multipart:
            return "multipart form"
        }
    }
}
