public import CurlewEngine
import Foundation

/// HTTP Basic authentication (BothamNetworking's `BasicAuthentication`): sends the credentials with every
/// request and, when a 401 names a realm (`WWW-Authenticate: Basic realm="…"`), reports it. The response goes
/// on unchanged, so the caller still gets its ``ProviderError/status(_:)``.
public struct BasicAuthentication: Interceptor {
    /// The user name and password sent.
    public let credentials: (username: String, password: String)
    private let onAuthenticationError: @Sendable (_ realm: String) -> Void

    /// - Parameter onAuthenticationError: called with the realm of each 401 that names one.
    public init(
        username: String, password: String,
        onAuthenticationError: @escaping @Sendable (_ realm: String) -> Void = { _ in }
    ) {
        self.credentials = (username, password)
        self.onAuthenticationError = onAuthenticationError
    }

    public var attachesCredentials: Bool { true }

    /// The `Authorization` value for the credentials.
    public var headerValue: String {
        "Basic " + Data("\(credentials.username):\(credentials.password)".utf8).base64EncodedString()
    }

    public func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws {
        request.headerFields[.authorization] = headerValue
    }

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    {
        // A 401 from another origin a redirect reached is not about these credentials (they were not sent there).
        if response.status == .unauthorized, response.isFromRequestedOrigin,
            let challenge = response.headerFields[.wwwAuthenticate],
            let realm = Self.basicRealm(in: challenge)
        {
            onAuthenticationError(realm)
        }
        return .pass
    }

    /// The realm of a `Basic` challenge: quoted (with `\"` escapes) or a bare token; `nil` for other schemes.
    static func basicRealm(in challenge: String) -> String? {
        guard let scheme = challenge.range(of: "basic", options: [.caseInsensitive, .anchored]) else { return nil }
        guard
            let realmKey = challenge.range(
                of: "realm=", options: .caseInsensitive, range: scheme.upperBound..<challenge.endIndex)
        else { return nil }
        var value = challenge[realmKey.upperBound...]
        guard value.first == "\"" else {
            return String(value.prefix { $0 != "," && $0 != " " })
        }
        value = value.dropFirst()
        var realm = ""
        var escaped = false
        for character in value {
            if escaped {
                realm.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                return realm
            } else {
                realm.append(character)
            }
        }
        return realm
    }
}

/// Printed (interpolated, `String(describing:)`, `String(reflecting:)`, `dump`, a debugger), the user name shows and
/// the password never does, as a URL's user-info is shown in messages.
extension BasicAuthentication: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `BasicAuthentication(username: "user", password: <redacted>)`.
    public var description: String {
        let username = credentials.username.debugDescription
        return "BasicAuthentication(username: \(username), password: \(CurlewRequest.redactionMarker))"
    }

    /// As ``description``.
    public var debugDescription: String { description }

    /// `dump` and debuggers see the user name, and the marker in place of the password.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["username": credentials.username, "password": CurlewRequest.redactionMarker],
            displayStyle: .struct)
    }
}
