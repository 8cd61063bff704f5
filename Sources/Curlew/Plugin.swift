public import CurlewEngine

/// Konex's extension points, each at three levels: the provider (Konex's client), the route (Konex's
/// request) and the call. All levels apply, provider first.
///
/// A plugin is told when a request is sent and when its outcome is known, for loggers and activity indicators:
/// ``didSend(_:context:)`` before each attempt goes to the transport, and ``didReceive(_:context:)`` exactly once
/// per call, with the final outcome, after validation (Konex told its plugins before validating), whether the
/// call succeeded or failed.
public protocol Plugin: Sendable {
    /// The request is about to go to the transport (called once per attempt).
    func didSend(_ request: CurlewRequest, context: InterceptorContext)
    /// The call's outcome, after interceptors, processors and validation.
    func didReceive(_ result: Result<RouteResponse, ProviderError>, context: InterceptorContext)
}

extension Plugin {
    public func didSend(_ request: CurlewRequest, context: InterceptorContext) {}
    public func didReceive(_ result: Result<RouteResponse, ProviderError>, context: InterceptorContext) {}
}

/// Transforms an accepted response before validators and the caller see it, for example to unwrap an
/// envelope (Konex's `KonexResponseProcessor`).
public protocol ResponseProcessor: Sendable {
    /// Returns the response the next processor, the validators and the caller see.
    func process(_ response: RouteResponse) async throws -> RouteResponse
}

/// Rejects an accepted response by throwing your own error, which reaches the caller as
/// ``ProviderError/validation(_:_:)`` (Konex's `KonexResponseValidator`).
public protocol ResponseValidator: Sendable {
    /// Throws your own error to reject the response.
    func validate(_ response: RouteResponse) throws
}

/// A plugin made of closures.
public struct AnyPlugin: Plugin {
    private let sent: @Sendable (CurlewRequest, InterceptorContext) -> Void
    private let received: @Sendable (Result<RouteResponse, ProviderError>, InterceptorContext) -> Void

    /// A plugin from two optional closures.
    public init(
        didSend: @escaping @Sendable (CurlewRequest, InterceptorContext) -> Void = { _, _ in },
        didReceive: @escaping @Sendable (Result<RouteResponse, ProviderError>, InterceptorContext) -> Void = {
            _, _ in
        }
    ) {
        self.sent = didSend
        self.received = didReceive
    }

    public func didSend(_ request: CurlewRequest, context: InterceptorContext) { sent(request, context) }

    public func didReceive(_ result: Result<RouteResponse, ProviderError>, context: InterceptorContext) {
        received(result, context)
    }
}

/// A response processor made of a closure.
public struct AnyResponseProcessor: ResponseProcessor {
    private let body: @Sendable (RouteResponse) async throws -> RouteResponse

    /// A processor that applies `body`.
    public init(_ body: @escaping @Sendable (RouteResponse) async throws -> RouteResponse) {
        self.body = body
    }

    /// A processor that replaces a JSON body with what `transform` makes of it (Konex's `Any -> Any` pipes).
    public static func json(_ transform: @escaping @Sendable (JSONValue) throws -> JSONValue) -> AnyResponseProcessor {
        AnyResponseProcessor { response in
            var processed = response
            let json = try response.json()
            processed.body = Array(try ProviderDefaults.parameterEncoder.encode(try transform(json)))
            return processed
        }
    }

    public func process(_ response: RouteResponse) async throws -> RouteResponse { try await body(response) }
}

/// A response validator made of a closure.
public struct AnyResponseValidator: ResponseValidator {
    private let body: @Sendable (RouteResponse) throws -> Void

    /// A validator that runs `body`, which throws to reject.
    public init(_ body: @escaping @Sendable (RouteResponse) throws -> Void) {
        self.body = body
    }

    public func validate(_ response: RouteResponse) throws { try body(response) }
}
