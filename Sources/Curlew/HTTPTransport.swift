public import CurlewEngine
import Foundation

/// What a provider runs its requests on: the engine (``CurlewClient`` conforms), or a mock from
/// `CurlewTesting` that serves fixtures through the very same pipeline.
///
/// Only ``send(_:context:)`` is required: downloads and streamed responses have default implementations on top
/// of it (the whole body in memory, then written out or handed over as one chunk), which is what a mock needs.
public protocol HTTPTransport: Sendable {
    /// Sends a request that every request interceptor has seen, and returns the response, whose
    /// ``RouteResponse/request`` is the request given.
    ///
    /// - Throws: `CurlewError` for transport failures (mocks inject them the same way), `CancellationError`
    ///   when the task is cancelled.
    func send(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteResponse

    /// Sends a request and writes a 2xx body to `path` (complete or not at all); other responses keep their
    /// body in memory. The returned response's body is empty on success.
    func download(_ request: CurlewRequest, to path: String, context: InterceptorContext) async throws -> RouteResponse

    /// Sends a request and returns once the status and header fields have arrived; the body follows.
    func stream(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteStreamingResponse
}

extension HTTPTransport {
    public func download(
        _ request: CurlewRequest, to path: String, context: InterceptorContext
    ) async throws
        -> RouteResponse
    {
        var response = try await send(request, context: context)
        guard response.status.kind == .successful else { return response }
        guard FileManager.default.createFile(atPath: path, contents: Data(response.body)) else {
            throw CurlewError(code: .downloadFailed, detail: "cannot write \(path)")
        }
        response.body = []
        return response
    }

    public func stream(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteStreamingResponse {
        let response = try await send(request, context: context)
        return RouteStreamingResponse(
            status: response.status, headerFields: response.headerFields, url: response.url, request: request,
            body: RouteBodyStream(buffered: response.body))
    }
}

extension CurlewClient: HTTPTransport {
    public func send(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteResponse {
        RouteResponse(try await execute(request), request: request)
    }

    public func download(
        _ request: CurlewRequest, to path: String, context: InterceptorContext
    ) async throws
        -> RouteResponse
    {
        RouteResponse(try await download(request, to: path), request: request)
    }

    public func stream(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteStreamingResponse {
        let response = try await stream(request)
        return RouteStreamingResponse(
            status: response.status, headerFields: response.headerFields, url: response.url, request: request,
            body: RouteBodyStream(engine: response.body))
    }
}
