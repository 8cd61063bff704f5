public import Curlew
public import CurlewEngine
import Foundation
public import HTTPTypes
import Synchronization

/// What a ``MockTransport`` answers to the requests a stub matches (Moya-style sample responses).
public struct StubResponse: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// The header fields.
    public var headerFields: HTTPFields
    /// The body.
    public var body: [UInt8]
    /// How long the answer takes; cancellation during it fails the request as the engine does.
    public var delay: Duration?
    /// A transport failure to throw instead of answering (after the delay).
    public var error: CurlewError?

    /// A response; header names that are not valid HTTP tokens are left out.
    public init(
        status: HTTPResponse.Status = .ok, headers: [String: String] = [:], body: [UInt8] = [],
        delay: Duration? = nil, error: CurlewError? = nil
    ) {
        self.status = status
        var fields = HTTPFields()
        for name in headers.keys.sorted() {
            if let fieldName = HTTPField.Name(name) { fields.append(HTTPField(name: fieldName, value: headers[name]!)) }
        }
        self.headerFields = fields
        self.body = body
        self.delay = delay
        self.error = error
    }

    /// A JSON body with `Content-Type: application/json`.
    public static func json(
        _ value: JSONValue, status: HTTPResponse.Status = .ok, headers: [String: String] = [:], delay: Duration? = nil
    ) -> StubResponse {
        var headers = headers
        headers["Content-Type"] = headers["Content-Type"] ?? "application/json"
        let body = (try? JSONEncoder().encode(value)).map(Array.init) ?? []
        return StubResponse(status: status, headers: headers, body: body, delay: delay)
    }

    /// A text body.
    public static func text(
        _ text: String, status: HTTPResponse.Status = .ok, headers: [String: String] = [:], delay: Duration? = nil
    ) -> StubResponse {
        StubResponse(status: status, headers: headers, body: Array(text.utf8), delay: delay)
    }
}

/// Which requests a ``MockTransport`` answers, and how.
public struct Stub: Sendable {
    private let matcher: @Sendable (CurlewRequest) -> Bool
    private let responder: @Sendable (CurlewRequest, Int) async throws -> StubResponse
    private let calls = Calls()

    /// A stub for requests that `matches` accepts, answered by `respond` (given the request and how many
    /// requests this stub answered before it).
    public init(
        matching matches: @escaping @Sendable (CurlewRequest) -> Bool,
        respond: @escaping @Sendable (CurlewRequest, _ previousCalls: Int) async throws -> StubResponse
    ) {
        self.matcher = matches
        self.responder = respond
    }

    /// A stub for `method` and `path`: the URL's path (`/me/friends`), a full URL without query, or either
    /// ending in `*` to match a prefix. Written encoded or not (`/files/my file` or `/files/my%20file`), it matches
    /// the request's percent-encoded URL. Given several responses, it answers them in turn and then keeps
    /// answering the last (a 503 and then a 200, say).
    public init(_ method: HTTPRequest.Method?, _ path: String, responses: [StubResponse]) {
        precondition(!responses.isEmpty, "a stub needs at least one response")
        self.init(
            matching: { request in
                (method == nil || request.method == method) && Self.path(path, matches: request.url)
            },
            respond: { _, previousCalls in responses[min(previousCalls, responses.count - 1)] })
    }

    /// A stub answering `method` and `path` with a status, headers and an optional JSON body.
    public static func stub(
        _ method: HTTPRequest.Method?, _ path: String, status: HTTPResponse.Status = .ok,
        headers: [String: String] = [:], json: JSONValue? = nil, delay: Duration? = nil
    ) -> Stub {
        let response =
            json.map { StubResponse.json($0, status: status, headers: headers, delay: delay) }
            ?? StubResponse(status: status, headers: headers, delay: delay)
        return Stub(method, path, responses: [response])
    }

    /// A GET stub.
    public static func get(
        _ path: String, status: HTTPResponse.Status = .ok, headers: [String: String] = [:], json: JSONValue? = nil,
        delay: Duration? = nil
    ) -> Stub {
        stub(.get, path, status: status, headers: headers, json: json, delay: delay)
    }

    /// A POST stub.
    public static func post(
        _ path: String, status: HTTPResponse.Status = .ok, headers: [String: String] = [:], json: JSONValue? = nil,
        delay: Duration? = nil
    ) -> Stub {
        stub(.post, path, status: status, headers: headers, json: json, delay: delay)
    }

    /// A stub that fails every matching request with a transport error, after an optional delay.
    public static func failing(
        _ method: HTTPRequest.Method?, _ path: String, with error: CurlewError, delay: Duration? = nil
    ) -> Stub {
        Stub(method, path, responses: [StubResponse(delay: delay, error: error)])
    }

    func matches(_ request: CurlewRequest) -> Bool { matcher(request) }

    func reply(to request: CurlewRequest) async throws -> StubResponse {
        try await responder(request, calls.next())
    }

    /// The path of a URL: what follows the authority, up to the query.
    static func urlPath(_ url: String) -> (withoutQuery: String, path: String) {
        let parts = URLParts(url)
        let withoutQuery = String(parts.schemeAndAuthority + parts.path)
        guard parts.scheme != nil else { return (withoutQuery, withoutQuery) }
        return (withoutQuery, String(parts.pathOrRoot))
    }

    static func path(_ pattern: String, matches url: String) -> Bool {
        let (withoutQuery, path) = urlPath(url)
        let subject = pattern.contains("://") ? withoutQuery : path
        func matches(_ subject: String, _ pattern: String) -> Bool {
            pattern.hasSuffix("*") ? subject.hasPrefix(pattern.dropLast()) : subject == pattern
        }
        if matches(subject, pattern) { return true }
        return matches(decodingSegments(subject), decodingSegments(pattern))
    }

    /// `path` with each segment's escapes decoded (`%20` and a space match), except that what decodes to `/` or
    /// `%` stays escaped: an encoded `/` is data within a segment, not a separator, and a server sees another path
    /// (`/files/a%2Fb` is not `/files/a/b`). A segment whose escapes are not valid is text as typed (a stub for
    /// `/files/100%` answers the request the route layer sends for it, `/files/100%25`).
    private static func decodingSegments(_ path: String) -> String {
        PercentEncoding.segments(of: path).map { segment in
            (PercentEncoding.decode(segment) ?? String(segment)).replacing("%", with: "%25").replacing("/", with: "%2F")
        }.joined(separator: "/")
    }
}

/// Counts a stub's answers across copies of the stub.
private final class Calls: Sendable {
    private let count = Mutex(0)

    func next() -> Int {
        count.withLock { value in
            defer { value += 1 }
            return value
        }
    }
}
