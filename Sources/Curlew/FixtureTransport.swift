public import CurlewEngine
import Foundation
import HTTPTypes

/// A transport that answers every request from the fixture its route names (``Route/mockData``, LKAPI's
/// `mockData`): `<fixturesDirectory>/<mockData>.json`, status 200, `application/json`, behind the very same
/// pipeline as the engine (interceptors, validation, decoding).
///
/// What ``Environment/transport(live:)`` returns for the testing environment, so production code can choose its
/// transport from the environment without importing `CurlewTesting` (whose `MockTransport` adds stubs, recorded
/// requests and injected errors on top of the same fixtures).
///
/// A route without `mockData`, or a missing fixture file, fails with a `CurlewError` of code `invalidRequest` that
/// names it, never silently.
public struct FixtureTransport: HTTPTransport {
    /// Where the fixtures are read from.
    public let fixturesDirectory: String?

    /// A transport serving the fixtures in `fixturesDirectory`.
    public init(fixturesDirectory: String?) {
        self.fixturesDirectory = fixturesDirectory
    }

    public func send(_ request: CurlewRequest, context: InterceptorContext) async throws -> RouteResponse {
        guard let name = context.route.mockData else {
            let url = URLRedaction.messages.redactingAlso(context.credentialParameterNames).redact(request.url)
            throw CurlewError(
                code: .invalidRequest, detail: "no fixture for \(request.method) \(url): the route names no mockData")
        }
        let body = try Self.fixture(named: name, in: fixturesDirectory)
        return RouteResponse.simulated(
            for: request, status: .ok, headerFields: [.contentType: "application/json"], body: body)
    }

    /// The bytes of fixture `name` in `directory`, shared with `CurlewTesting`'s `MockTransport`.
    package static func fixture(named name: String, in directory: String?) throws -> [UInt8] {
        guard let directory else {
            throw CurlewError(
                code: .invalidRequest, detail: "fixture \(name) asked for, but there is no fixtures directory")
        }
        let path = directory + "/" + name + ".json"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CurlewError(code: .invalidRequest, detail: "fixture file \(path) is missing")
        }
        return Array(data)
    }
}

extension Environment {
    /// The transport for this environment: a ``FixtureTransport`` on ``fixturesDirectory`` for the testing
    /// environment, `live` for every other.
    public func transport(live: any HTTPTransport = CurlewClient.shared) -> any HTTPTransport {
        isTesting ? FixtureTransport(fixturesDirectory: fixturesDirectory) : live
    }
}

extension RouteResponse {
    /// A response that did not come from the network, with the metrics and the final progress report the engine
    /// would give: the request body's size as sent (bytes, files and forms measured, streams of known length; a
    /// stream of unknown length counts 0, it is not read), the body's size as received, and `elapsed` as the time
    /// to the first byte and in total.
    package static func simulated(
        for request: CurlewRequest, status: HTTPResponse.Status, headerFields: HTTPFields, body: [UInt8],
        elapsed: Duration = .zero
    ) -> RouteResponse {
        let sent = request.body?.knownLength ?? 0
        if let onProgress = request.onProgress {
            // One final report, as the engine's last call.
            onProgress(
                TransferProgress(
                    bytesSent: sent, totalBytesToSend: sent, bytesReceived: Int64(body.count),
                    totalBytesToReceive: Int64(body.count), isComplete: true))
        }
        let metrics = TransferMetrics(
            firstByte: elapsed, total: elapsed, bytesSent: sent, bytesReceived: Int64(body.count))
        return RouteResponse(
            status: status, headerFields: headerFields, body: body, metrics: metrics, url: request.url,
            request: request)
    }
}
