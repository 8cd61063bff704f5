import CurlewEngine
import HTTPTypes

/// A response printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger) shows its
/// status, where it came from, what it carries and the request sent, never a credential: without this, `dump`
/// walks into the engine's response and prints its URL (`?access_token=`) and raw header block (`Set-Cookie`).
extension RouteResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `RouteResponse(200 https://api.example.com/me?access_token=<redacted>, headerFields: [...], body: 25 bytes,
    /// request: CurlewRequest(...))`: the URL as errors name it (a user-info password and the values of the
    /// engine's credential query parameters replaced), every header field's name with the value of each secret
    /// (the fields ``LoggingInterceptor`` redacts by default: `Authorization`, `Cookie`, `Set-Cookie`, …) replaced,
    /// the body's size, never its bytes, and the request as it prints itself.
    ///
    /// A response does not know its provider, so the values of the provider's ``HTTPProvider/additionalParameters``
    /// of other names show; ``ProviderError`` and ``LoggingInterceptor`` redact those too.
    public var description: String {
        let fields = redactedHeaderLines.map(\.debugDescription).joined(separator: ", ")
        return
            "RouteResponse(\(status.code) \(redactedURL), headerFields: [\(fields)], body: \(body.count) bytes, "
            + "request: \(request))"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the status, the redacted URL, the header fields as ``description`` shows them, the
    /// body's size, the metrics and the request (which redacts itself).
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "status": status.code, "url": redactedURL, "headerFields": redactedHeaderLines,
                "body": "\(body.count) bytes", "metrics": metrics, "request": request,
            ],
            displayStyle: .struct)
    }

    private var redactedURL: String { URLRedaction.messages.displaying(url) }

    private var redactedHeaderLines: [String] {
        headerFields.map { field in
            "\(field.name): \(LoggingInterceptor.isSecretByDefault(field) ? CurlewRequest.redactionMarker : field.value)"
        }
    }
}
