public import CurlewEngine

/// What a provider runs its requests on: the engine (``CurlewClient`` conforms), or a mock from
/// `CurlewTesting` that serves fixtures through the very same pipeline.
public protocol HTTPTransport: Sendable {
    /// Sends a request that every request interceptor has seen, and returns the response.
    ///
    /// - Throws: `CurlewError` for transport failures (mocks inject them the same way), `CancellationError`
    ///   when the task is cancelled.
    func send(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteResponse
}

extension CurlewClient: HTTPTransport {
    public func send(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteResponse {
        RouteResponse(engineResponse: try await execute(request), request: request)
    }
}
