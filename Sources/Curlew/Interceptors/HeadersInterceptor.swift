public import CurlewEngine
import HTTPTypes

/// Sets header fields on every request it adapts, replacing fields of the same name.
public struct HeadersInterceptor: Interceptor {
    /// The fields, in the order they are set.
    public let headers: [(name: String, value: String)]
    /// Whether the fields are credentials (an API key): see ``Interceptor/attachesCredentials``.
    public let attachesCredentials: Bool

    /// Sets `headers` (in name order) on every request; `attachesCredentials` when they are credentials.
    public init(_ headers: [String: String], attachesCredentials: Bool = false) {
        self.headers = headers.keys.sorted().map { (name: $0, value: headers[$0]!) }
        self.attachesCredentials = attachesCredentials
    }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        for header in headers {
            // Credentials are marked never-indexed: withheld from redirects to other origins, redacted in logs.
            if attachesCredentials {
                try request.setCredentialHeader(header.name, header.value)
            } else {
                try request.setHeader(header.name, header.value)
            }
        }
    }
}

/// Printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger), every field's name
/// shows; the values of credentials (all of them when the interceptor ``HeadersInterceptor/attachesCredentials``) and
/// of the fields logs redact (`Authorization`, `Cookie`, …: see ``LoggingInterceptor``) never do.
extension HeadersInterceptor: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `HeadersInterceptor(attachesCredentials: true, headers: ["X-Api-Key: <redacted>"])`.
    public var description: String {
        let fields = shownHeaders.map(\.debugDescription).joined(separator: ", ")
        return "HeadersInterceptor(attachesCredentials: \(attachesCredentials), headers: [\(fields)])"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the fields as ``description`` shows them.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["headers": shownHeaders, "attachesCredentials": attachesCredentials],
            displayStyle: .struct)
    }

    /// `Name: value` per field, secret values replaced.
    private var shownHeaders: [String] {
        headers.map { header in
            "\(header.name): \(isSecret(header) ? CurlewRequest.redactionMarker : header.value)"
        }
    }

    private func isSecret(_ header: (name: String, value: String)) -> Bool {
        // A name no field can have is never sent: shown as it is, its value hidden all the same.
        guard !attachesCredentials, let name = HTTPField.Name(header.name) else { return true }
        return LoggingInterceptor.isSecretByDefault(HTTPField(name: name, value: header.value))
    }
}

/// BothamNetworking's `JSONHeadersRequestInterceptor`: `Accept: application/json`, and
/// `Content-Type: application/json` on requests with a body that have no content type yet.
public struct JSONHeadersInterceptor: Interceptor {
    /// The interceptor; it has no settings.
    public init() {}

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        request.headerFields[.accept] = "application/json"
        if request.body != nil, request.headerFields[.contentType] == nil {
            request.headerFields[.contentType] = "application/json"
        }
    }
}
