public import CurlewEngine
public import ServiceLifecycle

/// Runs a ``CurlewEngine/CurlewClient`` as a swift-service-lifecycle `Service`: when the service group shuts
/// down gracefully, the client stops taking requests, lets the ones in flight finish within ``gracePeriod`` and
/// cancels the rest (``CurlewEngine/CurlewClient/shutdown(gracePeriod:)``).
///
/// ```swift
/// let client = CurlewClient()
/// let group = ServiceGroup(
///     services: [CurlewClientService(client: client, gracePeriod: .seconds(10)), myHTTPServer],
///     gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Put it before the services that use the client: a service group shuts its services down in reverse order, the
/// last first, each after the one behind it has finished, so the services that send (an HTTP server draining its
/// requests, which may still call out) stop before the client stops taking requests. Listed after them, the client
/// would refuse their last calls with ``CurlewEngine/CurlewError/Code/clientShutdown``. Cancelling the service (or
/// the group) cancels requests in flight at once.
///
/// A wrapper rather than a conformance of `CurlewClient` itself, so that the engine's public API does not carry
/// the lifecycle package's types (`docs/design/0012-service-integrations.md`).
public struct CurlewClientService: Service {
    /// The client the service shuts down.
    public let client: CurlewClient
    /// How long requests in flight may take to finish once graceful shutdown begins.
    public let gracePeriod: Duration

    /// Creates a service that shuts `client` down when its service group does.
    public init(client: CurlewClient, gracePeriod: Duration = .seconds(30)) {
        self.client = client
        self.gracePeriod = gracePeriod
    }

    /// Waits for graceful shutdown (or cancellation), then shuts the client down.
    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled rather than asked to finish: nothing waits for the requests in flight.
            await client.shutdown(gracePeriod: .zero)
            return
        }
        await client.shutdown(gracePeriod: gracePeriod)
    }
}
