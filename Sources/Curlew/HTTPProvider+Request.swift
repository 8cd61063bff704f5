public import CurlewEngine
import Foundation
import HTTPTypes
import Instrumentation
import Tracing

extension HTTPProvider {
    // Every method takes `some Routable`, which a `Route` is: one set serves routes and types of your own. Only
    // `request` has a `Route` overload besides, because Swift resolves a leading-dot argument (`.me`, `.user(id)`)
    // against a concrete parameter type only, and routes declared as statics on `Route` are called that way.

    /// Sends a route and returns the accepted response.
    ///
    /// For each attempt: the request is built from the route and the provider, request interceptors adapt it
    /// (call → route → provider → global), plugins are told, the transport sends it, response interceptors look at
    /// the outcome (global → provider → route → call) and may retry. Then ``validate(_:)`` runs on every response,
    /// the status must be acceptable, processors and validators run (provider → route → call), and errors pass
    /// through ``shouldContinue(with:)``. Plugins hear the outcome last. Every path ends in a return or a throw.
    ///
    /// - Parameters:
    ///   - routable: a ``Route``, or a type of your own describing one.
    ///   - interceptors: call-level interceptors, the outermost.
    ///   - plugins: call-level plugins (Konex's method level).
    ///   - responseProcessors: call-level processors.
    ///   - responseValidators: call-level validators.
    ///   - progress: called with upload and download progress (see `CurlewRequest.onProgress`).
    /// - Throws: ``ProviderError``, and nothing else.
    @discardableResult
    public func request(
        _ routable: some Routable,
        interceptors: [any Interceptor] = [],
        plugins: [any Plugin] = [],
        responseProcessors: [any ResponseProcessor] = [],
        responseValidators: [any ResponseValidator] = [],
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(ProviderError) -> RouteResponse {
        let call = CallComponents(
            interceptors: interceptors, plugins: plugins, processors: responseProcessors,
            validators: responseValidators, progress: progress)
        return try await RequestPipeline(provider: self, route: routable.route, call: call).run()
    }

    /// The `Routable` method above for a ``Route``, so that a route declared as a static on `Route` is written with
    /// a leading dot: `provider.request(.user("42"))`.
    @discardableResult
    public func request(
        _ route: Route,
        interceptors: [any Interceptor] = [],
        plugins: [any Plugin] = [],
        responseProcessors: [any ResponseProcessor] = [],
        responseValidators: [any ResponseValidator] = [],
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(ProviderError) -> RouteResponse {
        let call = CallComponents(
            interceptors: interceptors, plugins: plugins, processors: responseProcessors,
            validators: responseValidators, progress: progress)
        return try await RequestPipeline(provider: self, route: route, call: call).run()
    }

    /// Sends a request built by hand through this provider's pipeline (LKAPI's standalone `API.request`):
    /// interceptors, retries, validation, processors and plugins run as for a route, but the request is sent as
    /// given: no base URL, additional headers or parameters are added. For a URL on another origin than the
    /// provider's (``HTTPProvider/credentialOrigins``), the provider's and the global interceptors that attach
    /// credentials do not run.
    @discardableResult
    public func request(
        _ request: CurlewRequest,
        interceptors: [any Interceptor] = [],
        plugins: [any Plugin] = [],
        responseProcessors: [any ResponseProcessor] = [],
        responseValidators: [any ResponseValidator] = []
    ) async throws(ProviderError) -> RouteResponse {
        let call = CallComponents(
            interceptors: interceptors, plugins: plugins, processors: responseProcessors,
            validators: responseValidators)
        let route = Route(path: request.url, method: request.method)
        return try await RequestPipeline(provider: self, route: route, call: call, prebuilt: request).run()
    }

    /// Downloads a route's response body into a file at `path`, in constant memory: the file appears, complete,
    /// only after a 2xx response. Interceptors, retries and validation run as for `request(_:)`; on success they
    /// see an empty body, on failure the error body.
    @discardableResult
    public func download(
        _ routable: some Routable, to path: String, interceptors: [any Interceptor] = [],
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(ProviderError) -> RouteResponse {
        let call = CallComponents(
            interceptors: interceptors, plugins: [], processors: [], validators: [], progress: progress)
        return try await RequestPipeline(provider: self, route: routable.route, call: call, destination: path).run()
    }

    /// Sends a route and returns as soon as the status and header fields have arrived; the body follows as an
    /// `AsyncSequence` with backpressure.
    ///
    /// Request interceptors and plugins run as usual; the response has no body yet, so response interceptors,
    /// retries, processors and validators do not run. A status that is not acceptable throws
    /// ``ProviderError/status(_:)`` with the first 64 KiB of the body.
    public func stream(
        _ routable: some Routable, interceptors: [any Interceptor] = [],
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(ProviderError) -> RouteStreamingResponse {
        let call = CallComponents(
            interceptors: interceptors, plugins: [], processors: [], validators: [], progress: progress)
        return try await RequestPipeline(provider: self, route: routable.route, call: call).runStreaming()
    }

    /// Sends a route and decodes the body as `T` (Nikka's `responseObject`, Konex's `requestObject`). A body that
    /// does not decode goes through ``shouldContinue(with:)`` as ``ProviderError/decoding(_:)``.
    public func requestObject<T: Decodable>(
        of type: T.Type,
        _ routable: some Routable,
        interceptors: [any Interceptor] = [],
        plugins: [any Plugin] = [],
        responseProcessors: [any ResponseProcessor] = [],
        responseValidators: [any ResponseValidator] = [],
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(ProviderError) -> T {
        try decoding(
            T.self,
            try await request(
                routable, interceptors: interceptors, plugins: plugins, responseProcessors: responseProcessors,
                responseValidators: responseValidators, progress: progress))
    }

    /// Sends a route and decodes the body as an array of `T` (Konex's `requestArray`).
    public func requestArray<T: Decodable>(
        of type: T.Type,
        _ routable: some Routable,
        interceptors: [any Interceptor] = [],
        plugins: [any Plugin] = [],
        responseProcessors: [any ResponseProcessor] = [],
        responseValidators: [any ResponseValidator] = [],
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(ProviderError) -> [T] {
        try decoding(
            [T].self,
            try await request(
                routable, interceptors: interceptors, plugins: plugins, responseProcessors: responseProcessors,
                responseValidators: responseValidators, progress: progress))
    }

    /// The body as `T`; a decoding failure goes through ``shouldContinue(with:)`` like the call's other errors.
    private func decoding<T: Decodable>(_ type: T.Type, _ response: RouteResponse) throws(ProviderError) -> T {
        do {
            return try response.decode(T.self)
        } catch {
            throw shouldContinue(with: error) ? error : .stopped(error)
        }
    }
}

struct CallComponents: Sendable {
    var interceptors: [any Interceptor]
    var plugins: [any Plugin]
    var processors: [any ResponseProcessor]
    var validators: [any ResponseValidator]
    var progress: (@Sendable (TransferProgress) -> Void)?
}

/// A call's interceptors as they run for one request: those it names itself (the call's and the route's), and
/// those it shares (the provider's and the global ones), which leave the credentials out when the request goes to
/// another origin than the provider's.
struct InterceptorSides: Sendable {
    let explicit: [any Interceptor]
    let shared: [any Interceptor]
    let sharesCredentials: Bool
    /// Whether a URL is on one of the provider's origins: asked again when an interceptor moved the request.
    let isProviderOrigin: @Sendable (String) -> Bool
    /// The body the provider built without its ``HTTPProvider/additionalParameters`` in it, `nil` when the built
    /// body holds none of them: asked only when an interceptor moved the request to another origin.
    let bodyWithoutProviderParameters: @Sendable () throws -> [UInt8]?
    /// Request side order; the response side runs it reversed.
    let all: [any Interceptor]

    init(
        explicit: [any Interceptor], shared: [any Interceptor], sharesCredentials: Bool,
        isProviderOrigin: @escaping @Sendable (String) -> Bool,
        bodyWithoutProviderParameters: @escaping @Sendable () throws -> [UInt8]? = { nil }
    ) {
        self.explicit = explicit
        self.shared = shared
        self.sharesCredentials = sharesCredentials
        self.isProviderOrigin = isProviderOrigin
        self.bodyWithoutProviderParameters = bodyWithoutProviderParameters
        self.all = explicit + shared
    }

    /// Runs the request side. For another origin, credential fields the shared interceptors set are taken out
    /// again (those the route or the call set stay): an interceptor that adds `Authorization` without saying it
    /// attaches credentials still cannot send it there. A request that an interceptor moves from the provider's
    /// origins to another is treated so too: the shared interceptors that attach credentials do not run for it
    /// (whatever they would put in its URL or body), and it keeps only the credential fields and credential query
    /// parameters (`access_token`, an API key) the call's and the route's interceptors set themselves or the route
    /// has of its own, since the provider's headers and tokens were meant for the provider: its
    /// ``HTTPProvider/additionalParameters`` leave the query, and the JSON or form body they were encoded into if the
    /// request still carries it, and the user-info of its base URL leaves the URL.
    ///
    /// - Returns: the interceptors of the response side, in request side order: without the shared ones that
    ///   attach credentials when the request was moved away from the provider, so that another origin's 401
    ///   refreshes no token of the provider's.
    func adapt(_ request: inout CurlewRequest, context: InterceptorContext) async throws -> [any Interceptor] {
        let builtURL = request.url
        // Copies of the fields and the body share their storage until an interceptor changes them.
        let builtFields = request.headerFields
        let builtBody = request.body
        for interceptor in explicit { try await interceptor.adapt(&request, context: context) }
        let explicitFields = request.headerFields
        guard sharesCredentials else {
            for interceptor in shared { try await interceptor.adapt(&request, context: context) }
            // Nothing of the provider's was built in: every credential the route and the call set stays.
            keepOnlyCredentials(setBy: explicitFields, notIn: HTTPFields(), in: &request)
            return all
        }
        let movedAway = request.url != builtURL && !isProviderOrigin(request.url)
        let sharedToRun = movedAway ? shared.filter { !$0.attachesCredentials } : shared
        let explicitURL = request.url
        for interceptor in sharedToRun { try await interceptor.adapt(&request, context: context) }
        // A shared interceptor may move it too.
        guard movedAway || (request.url != explicitURL && !isProviderOrigin(request.url)) else { return all }
        keepOnlyCredentials(setBy: explicitFields, notIn: builtFields, in: &request)
        try keepOnlyCredentialParameters(
            setBy: explicitURL, notIn: builtURL, providerParameters: context.credentialParameterNames, in: &request)
        try removeBuiltUserInfo(of: builtURL, from: &request)
        try removeProviderParameters(fromBody: builtBody, of: &request)
        return explicit + shared.filter { !$0.attachesCredentials }
    }

    /// Re-encodes the body without the provider's ``HTTPProvider/additionalParameters`` when the request still
    /// carries the JSON or form body the provider built with them (a mover that copied the body). The route layer
    /// built that body from the route's parameters and the provider's, so it can build it again from the route's
    /// alone, in the same encoding, rather than refuse the call: the route's own parameters go where the route
    /// points, as they do in the query. A body the interceptors replaced or rewrote is theirs and is left alone.
    private func removeProviderParameters(
        fromBody builtBody: CurlewRequest.Body?, of request: inout CurlewRequest
    )
        throws
    {
        guard case .bytes(let built)? = builtBody?.storage, case .bytes(let sent)? = request.body?.storage,
            sent == built, let rebuilt = try bodyWithoutProviderParameters()
        else { return }
        request.body = .bytes(rebuilt)
    }

    /// Takes the user-info (`user:password@`) out of the URL when it is the one the provider built it with (its
    /// base URL's, or a full URL's on its origins): libcurl sends it as Basic credentials to whatever host the URL
    /// names, and it was meant for the provider. User-info the call's or the route's interceptors wrote stays.
    private func removeBuiltUserInfo(of builtURL: String, from request: inout CurlewRequest) throws {
        let parts = URLParts(request.url)
        guard let sent = parts.userInfo, sent == URLParts(builtURL).userInfo else { return }
        let url = parts.beforeAuthority + parts.url[parts.hostAndPort.startIndex...]
        request = try request.replacingURL(with: String(url))
    }

    /// Takes out of the query the credential parameters (a name in `URLRedaction.credentialQueryParameters` or in
    /// `providerParameters`, the lower-case names of the provider's ``HTTPProvider/additionalParameters``) that
    /// were not meant for another origin: the provider's, and those a shared interceptor added (not in
    /// `explicitURL`, the URL after the call's and the route's interceptors). The call's and the route's
    /// interceptors' own (in `explicitURL` and not in `builtURL`) stay, and so do the route's own parameters of
    /// credential-like names (`token` as a page cursor, `code`): they go where the route points.
    ///
    /// Parameters are compared by decoded name and value, never by bytes: a mover that re-encodes the query
    /// (`URLComponents`, lower-case hex, `%2B` written `+`) does not make the provider's key its own.
    ///
    /// - Throws: the engine's error if the URL without them is refused (it passed before, so it is not expected).
    private func keepOnlyCredentialParameters(
        setBy explicitURL: String, notIn builtURL: String, providerParameters: Set<String>,
        in request: inout CurlewRequest
    ) throws {
        let names = URLRedaction.credentialQueryParameters.union(providerParameters)
        let parts = URLParts(request.url)
        let all = QueryParameter.split(parts)
        guard all.contains(where: { $0.decoded.map { names.contains($0.name) } ?? false }) else { return }
        let built = Set(QueryParameter.split(URLParts(builtURL)).compactMap(\.decoded))
        let explicit = Set(QueryParameter.split(URLParts(explicitURL)).compactMap(\.decoded))
        let kept = all.filter { parameter in
            guard let decoded = parameter.decoded, names.contains(decoded.name) else { return true }
            // The call's and the route's interceptors' own.
            if explicit.contains(decoded) && !built.contains(decoded) { return true }
            // The provider's, or a shared interceptor's; what is left is the route's own.
            return !providerParameters.contains(decoded.name) && explicit.contains(decoded)
        }
        guard kept.count < all.count else { return }
        let query = kept.isEmpty ? "" : "?" + kept.map(\.raw).joined(separator: "&")
        request = try request.replacingURL(with: parts.url[..<parts.query.startIndex] + query + parts.fragment)
    }

    /// Takes out every credential field, and every field named as one of `builtFields`' credentials (a mover that
    /// copied the fields by name and value made them ordinary fields), then puts back the credentials of
    /// `explicitFields` (the fields after the call's and the route's interceptors) that `builtFields` did not
    /// already hold with the same value.
    private func keepOnlyCredentials(
        setBy explicitFields: HTTPFields, notIn builtFields: HTTPFields, in request: inout CurlewRequest
    ) {
        let builtCredentials = builtFields.filter(CredentialPolicy.isCredential)
        let builtCredentialNames = Set(builtCredentials.map(\.name))
        func isBuiltCredential(_ field: HTTPField) -> Bool {
            builtCredentials.contains { $0.name == field.name && $0.value == field.value }
        }
        let explicitCredentials = explicitFields.filter {
            (CredentialPolicy.isCredential($0) || builtCredentialNames.contains($0.name)) && !isBuiltCredential($0)
        }
        var fields = HTTPFields(
            request.headerFields.filter {
                !CredentialPolicy.isCredential($0) && !builtCredentialNames.contains($0.name)
            })
        fields.append(contentsOf: explicitCredentials)
        request.headerFields = fields
    }
}

/// One call's way through the layer; see `HTTPProvider.request(_:)`.
struct RequestPipeline<Provider: HTTPProvider> {
    let provider: Provider
    let route: Route
    let call: CallComponents
    /// Where a download goes; `nil` collects the body in memory.
    var destination: String? = nil
    /// A request made by hand, sent instead of one built from the route.
    var prebuilt: CurlewRequest? = nil

    /// Every interceptor of the call, request side first: the call is outermost, the global level next to the
    /// wire.
    private var everyInterceptor: [any Interceptor] {
        call.interceptors + route.interceptors + provider.interceptors + GlobalInterceptors.all
    }

    /// The interceptors that run for `request`: the call's and the route's wherever it goes; the provider's and the
    /// global ones that attach credentials only when it goes to one of the provider's origins.
    private func interceptors(sharingCredentials: Bool) -> InterceptorSides {
        let shared = provider.interceptors + GlobalInterceptors.all
        return InterceptorSides(
            explicit: call.interceptors + route.interceptors,
            shared: sharingCredentials ? shared : shared.filter { !$0.attachesCredentials },
            sharesCredentials: sharingCredentials,
            isProviderOrigin: { [provider] in provider.sharesCredentials(with: $0) },
            bodyWithoutProviderParameters: { [provider, route, prebuilt] in
                // A request made by hand carries nothing the provider added.
                prebuilt == nil ? try provider.bodyWithoutAdditionalParameters(for: route) : nil
            })
    }

    private var plugins: [any Plugin] {
        provider.plugins + route.plugins + call.plugins
    }

    /// The request before any interceptor, and whether it goes to one of the provider's origins.
    private func makeBaseRequest() throws(ProviderError) -> (request: CurlewRequest, sharesCredentials: Bool) {
        var built: (request: CurlewRequest, sharesCredentials: Bool)
        if let prebuilt {
            built = (prebuilt, provider.sharesCredentials(with: prebuilt.url))
        } else {
            built = try provider.buildRequest(for: route)
        }
        if let progress = call.progress { built.request.onProgress = progress }
        return built
    }

    func runStreaming() async throws(ProviderError) -> RouteStreamingResponse {
        let plugins = self.plugins
        let context = InterceptorContext(
            route: route, attempt: 1, maxAttempts: 1, credentialParameterNames: provider.credentialParameterNames)
        var request: CurlewRequest
        let sides: InterceptorSides
        do {
            let built = try makeBaseRequest()
            request = built.request
            sides = interceptors(sharingCredentials: built.sharesCredentials)
        } catch {
            throw failure(error, plugins, context)
        }
        do {
            // A streamed call has no response side.
            _ = try await sides.adapt(&request, context: context)
        } catch {
            throw failure(Self.providerError(from: error, response: nil), plugins, context)
        }
        for plugin in plugins { plugin.didSend(request, context: context) }
        let response: RouteStreamingResponse
        do {
            response = try await provider.transport.stream(request, context: context)
        } catch let error as CurlewError {
            throw failure(.transport(error, request: request), plugins, context)
        } catch is CancellationError {
            throw failure(.cancelled, plugins, context)
        } catch {
            let wrapped = CurlewError(code: .transport, detail: String(describing: error))
            throw failure(.transport(wrapped, request: request), plugins, context)
        }
        var head = RouteResponse(
            status: response.status, headerFields: response.headerFields, url: response.url, request: request)
        guard provider.isAcceptable(response.status) else {
            head.body = await response.body.leadingBytes(upTo: 64 * 1024)
            throw failure(.status(head.with(decoder: provider.jsonDecoder)), plugins, context)
        }
        var streamed = response
        streamed.request = request
        for plugin in plugins { plugin.didReceive(.success(head), context: context) }
        return streamed
    }

    /// A streamed call's error after ``HTTPProvider/shouldContinue(with:)`` and the plugins.
    private func failure(
        _ error: ProviderError, _ plugins: [any Plugin], _ context: InterceptorContext
    ) -> ProviderError {
        let error = error.redacting(context.credentialParameterNames)
        let final = provider.shouldContinue(with: error) ? error : .stopped(error)
        for plugin in plugins { plugin.didReceive(.failure(final), context: context) }
        return final
    }

    func run() async throws(ProviderError) -> RouteResponse {
        let plugins = self.plugins
        // One rule for the bound: the provider's, raised by any interceptor of the call that asks for more.
        func attemptBound(_ interceptors: [any Interceptor]) -> Int {
            interceptors.reduce(max(1, provider.maxAttempts)) { max($0, $1.requestedAttempts ?? 0) }
        }
        let transport = provider.transport
        // Once per call: `additionalParameters` may be computed.
        let credentialParameterNames = provider.credentialParameterNames
        let baseRequest: CurlewRequest
        let requestSide: InterceptorSides
        do {
            let built = try makeBaseRequest()
            baseRequest = built.request
            requestSide = interceptors(sharingCredentials: built.sharesCredentials)
        } catch {
            // An invalid route is an error like any other: shouldContinue and the plugins hear of it.
            let context = InterceptorContext(
                route: route, attempt: 1, maxAttempts: attemptBound(everyInterceptor),
                credentialParameterNames: credentialParameterNames)
            return try finish(.failure(error), plugins, context)
        }
        let maxAttempts = attemptBound(requestSide.all)

        // The latest attempt's context, which the plugins also hear when the wait before a retry is cancelled.
        var context = InterceptorContext(
            route: route, attempt: 1, maxAttempts: maxAttempts, credentialParameterNames: credentialParameterNames)
        return try await retrying(maxAttempts: maxAttempts) {
            (attempt: RetryAttempt) async throws(ProviderError) -> RetryStep<RouteResponse> in
            if attempt.number > 1 {
                context = InterceptorContext(
                    route: route, attempt: attempt.number, maxAttempts: maxAttempts,
                    credentialParameterNames: credentialParameterNames)
            }
            return try await runAttempt(
                attempt, of: baseRequest, context: context, requestSide: requestSide, transport: transport,
                plugins: plugins)
        } onCancelledWait: { (_: RetryAttempt) throws(ProviderError) -> RouteResponse in
            try finish(.failure(.cancelled), plugins, context)
        }
    }

    /// One attempt: the request side, the transport, the response side; then the retry an interceptor asked for,
    /// or validation, processing and the plugins' outcome.
    private func runAttempt(
        _ attempt: RetryAttempt, of baseRequest: CurlewRequest, context: InterceptorContext,
        requestSide: InterceptorSides, transport: any HTTPTransport, plugins: [any Plugin]
    ) async throws(ProviderError) -> RetryStep<RouteResponse> {
        var request = baseRequest
        let responseSide: [any Interceptor]
        do {
            responseSide = try await requestSide.adapt(&request, context: context)
        } catch {
            return .finished(try finish(.failure(Self.providerError(from: error, response: nil)), plugins, context))
        }
        if Task.isCancelled { return .finished(try finish(.failure(.cancelled), plugins, context)) }
        for plugin in plugins { plugin.didSend(request, context: context) }

        var outcome: Result<RouteResponse, CurlewError>
        do {
            // Transports answer with the request they were given as the response's `request`.
            let response =
                if attempt.number == 1 {
                    try await send(request, on: transport, context: context)
                } else {
                    // The attempt's client span carries OpenTelemetry's http.request.resend_count.
                    try await ServiceContext.withValue(Self.resendContext(attempt.number - 1)) {
                        try await send(request, on: transport, context: context)
                    }
                }
            outcome = .success(response)
        } catch let error as CurlewError {
            outcome = .failure(error)
        } catch is CancellationError {
            return .finished(try finish(.failure(.cancelled), plugins, context))
        } catch {
            outcome = .failure(CurlewError(code: .transport, detail: String(describing: error)))
        }

        // Response side: the reverse order, global first.
        for interceptor in responseSide.reversed() {
            let decision: InterceptorDecision
            do {
                switch outcome {
                case .success(let response): decision = try await interceptor.intercept(response, context: context)
                case .failure(let error): decision = try await interceptor.intercept(error, context: context)
                }
            } catch {
                return .finished(
                    try finish(.failure(Self.providerError(from: error, response: outcome.response)), plugins, context))
            }
            switch decision.storage {
            case .pass:
                continue
            case .replace(var response):
                response.request = request
                outcome = .success(response)
            case .fail(let error):
                return .finished(
                    try finish(.failure(Self.providerError(from: error, response: outcome.response)), plugins, context))
            case .retry(let delay):
                // Past the call's bound, or with a body that cannot be sent again, the retry is not made and the
                // next interceptor sees the outcome as if this one had passed.
                if attempt.mayRetry, Self.canResend(request) {
                    Self.recordRetry(attempt: attempt.number, delay: delay ?? .zero, outcome: outcome)
                    return .retry(after: delay)
                }
            }
        }

        switch outcome {
        case .failure(let error):
            return .finished(try finish(.failure(.transport(error, request: request)), plugins, context))
        case .success(let response):
            let response = response.with(decoder: provider.jsonDecoder)
            let processors = provider.responseProcessors + route.responseProcessors + call.processors
            // Without processors nothing here needs to suspend: no async frame for the common case.
            let result =
                if processors.isEmpty {
                    validate(response)
                } else {
                    await process(response, with: processors)
                }
            return .finished(try finish(result, plugins, context))
        }
    }

    private func send(
        _ request: CurlewRequest, on transport: any HTTPTransport, context: InterceptorContext
    ) async throws -> RouteResponse {
        if let destination {
            try await transport.download(request, to: destination, context: context)
        } else {
            try await transport.send(request, context: context)
        }
    }

    /// The task's context with the resend count of the next attempt.
    private static func resendContext(_ resendCount: Int) -> ServiceContext {
        var context = ServiceContext.current ?? .topLevel
        context[HTTPResendCountKey.self] = resendCount
        return context
    }

    /// A retry is an event on the caller's span, when a tracer is bootstrapped and the task has one.
    private static func recordRetry(attempt: Int, delay: Duration, outcome: Result<RouteResponse, CurlewError>) {
        guard let context = ServiceContext.current,
            let span = InstrumentationSystem.tracer.activeSpan(identifiedBy: context)
        else { return }
        var attributes = SpanAttributes()
        attributes["http.request.resend_count"] = attempt
        // Saturating: a server may ask for a `Retry-After` too long for milliseconds, and a policy may honour it.
        attributes["retry.delay_ms"] = Int(delay.saturatingMilliseconds)
        switch outcome {
        case .success(let response): attributes["http.response.status_code"] = response.status.code
        case .failure(let error): attributes["error.type"] = "\(error.code)"
        }
        span.addEvent(SpanEvent(name: "http.retry", attributes: attributes))
    }

    /// Validation and status, then the processors, then the validators.
    private func process(
        _ response: RouteResponse, with processors: [any ResponseProcessor]
    ) async -> Result<RouteResponse, ProviderError> {
        if let failure = checkStatus(response) { return .failure(failure) }
        var processed = response
        for processor in processors {
            do {
                processed = try await processor.process(processed)
            } catch {
                return .failure(Self.providerError(from: error, response: processed))
            }
        }
        return runValidators(processed)
    }

    /// ``process(_:with:)`` without processors.
    private func validate(_ response: RouteResponse) -> Result<RouteResponse, ProviderError> {
        if let failure = checkStatus(response) { return .failure(failure) }
        return runValidators(response)
    }

    /// The provider's validation, which sees every response, then the status.
    private func checkStatus(_ response: RouteResponse) -> ProviderError? {
        do {
            try provider.validate(response)
        } catch {
            return Self.providerError(from: error, response: response)
        }
        return provider.isAcceptable(response.status) ? nil : .status(response)
    }

    private func runValidators(_ processed: RouteResponse) -> Result<RouteResponse, ProviderError> {
        for validator in provider.responseValidators + route.responseValidators + call.validators {
            do {
                try validator.validate(processed)
            } catch {
                return .failure(Self.providerError(from: error, response: processed))
            }
        }
        return .success(processed)
    }

    private func finish(
        _ result: Result<RouteResponse, ProviderError>, _ plugins: [any Plugin], _ context: InterceptorContext
    ) throws(ProviderError) -> RouteResponse {
        var result = result
        if case .failure(let error) = result {
            let error = error.redacting(context.credentialParameterNames)
            result = .failure(provider.shouldContinue(with: error) ? error : .stopped(error))
        }
        for plugin in plugins { plugin.didReceive(result, context: context) }
        return try result.get()
    }

    private static func providerError(from error: any Error, response: RouteResponse?) -> ProviderError {
        if let error = error as? ProviderError { return error }
        if error is CancellationError { return .cancelled }
        if let response { return .validation(error, response) }
        return .interceptor(error)
    }

    /// Bytes, files and forms of them can be sent again; a one-shot stream cannot (the engine's own rule).
    private static func canResend(_ request: CurlewRequest) -> Bool {
        request.body?.isReplayable ?? true
    }
}

extension Result where Success == RouteResponse {
    fileprivate var response: RouteResponse? {
        if case .success(let response) = self { return response }
        return nil
    }
}

/// One `name=value` of a query, as sent and as compared.
private struct QueryParameter {
    /// The name and value, percent-decoded (the bytes as typed when they do not decode), the name lower-cased as
    /// `URLRedaction` compares names, and a space in the value written `+`: `ab%2Bc`, `ab+c` and `ab%20c` are one
    /// value, since a server may read `+` either way and a mover may write a space either way.
    struct Decoded: Hashable {
        let name: String
        let value: String
    }

    let raw: Substring
    /// `nil` for a name without a value, which carries nothing.
    let decoded: Decoded?

    init(_ raw: Substring) {
        self.raw = raw
        guard let equals = raw.utf8.firstIndex(of: UInt8(ascii: "=")) else {
            decoded = nil
            return
        }
        let name = raw[..<equals]
        let value = raw[raw.utf8.index(after: equals)...]
        decoded = Decoded(
            name: (PercentEncoding.decode(name) ?? String(name)).lowercased(),
            value: (PercentEncoding.decode(value) ?? String(value)).replacing(" ", with: "+"))
    }

    /// The parameters of a URL's query, as ``URLParts/queryParameters`` (and `URLRedaction`) split it.
    static func split(_ parts: URLParts) -> [QueryParameter] { parts.queryParameters.map(QueryParameter.init) }
}
