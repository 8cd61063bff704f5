public import CoreMetrics
public import CurlewEngine

/// Counts requests and times them through swift-metrics.
///
/// - `curlew_requests_total` (counter) with dimensions `method` and `status` (`error` for transport failures),
/// - `curlew_request_duration` (timer, nanoseconds) with dimension `method`,
/// one record per attempt. Pass a factory to record somewhere other than the bootstrapped `MetricsSystem`.
public struct MetricsInterceptor: Interceptor {
    private let factory: any MetricsFactory
    private let prefix: String

    /// - Parameters:
    ///   - prefix: the start of the metric labels.
    ///   - factory: where the metrics go; the bootstrapped `MetricsSystem` by default.
    public init(prefix: String = "curlew", factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        self.prefix = prefix
    }

    public func intercept(
        _ response: RouteResponse, context: InterceptorContext
    ) async throws
        -> InterceptorDecision
    {
        record(method: response.request.method.rawValue, status: String(response.status.code), context: context)
        return .pass
    }

    public func intercept(_ error: CurlewError, context: InterceptorContext) async throws -> InterceptorDecision {
        record(method: context.route.method.rawValue, status: "error", context: context)
        return .pass
    }

    private func record(method: String, status: String, context: InterceptorContext) {
        let elapsed = ContinuousClock.now - context.startedAt
        Counter(
            label: "\(prefix)_requests_total", dimensions: [("method", method), ("status", status)], factory: factory
        )
        .increment()
        Timer(label: "\(prefix)_request_duration", dimensions: [("method", method)], factory: factory)
            .recordNanoseconds(
                elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}
