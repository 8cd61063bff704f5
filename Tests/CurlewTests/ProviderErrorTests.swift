import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import HTTPTypes
import Testing

/// `ProviderError` is a struct, not an enum: every kind is made by a static function and read back through `code`
/// (with a stable name) and the properties that replace the enum's associated values.
@Suite struct ProviderErrorTests {
    private struct Refused: Error, Equatable { let reason: String }

    private static func request() throws -> CurlewRequest {
        try CurlewRequest(method: .post, url: "http://api.local/items")
    }

    private static func response(_ body: String, status: HTTPResponse.Status) throws -> RouteResponse {
        let request = try request()
        return RouteResponse(status: status, body: Array(body.utf8), url: request.url, request: request)
    }

    private static func decodingError() throws -> ProviderError {
        struct Item: Decodable { let id: Int }
        let response = try response(#"{"id":"one"}"#, status: .ok)
        do {
            _ = try response.decode(Item.self)
        } catch {
            return error
        }
        Issue.record("the body should not decode")
        return .cancelled
    }

    /// One error of every kind, with the code and name each must report.
    private static func everyKind() throws -> [(error: ProviderError, code: ProviderError.Code, name: String)] {
        let response = try response(#"{"error":"gone"}"#, status: .gone)
        let transport = CurlewError(code: .connectionRefused, detail: "refused")
        return [
            (.status(response), .status, "status"),
            (.validation(Refused(reason: "no data"), response), .validation, "validation"),
            (try decodingError(), .decoding, "decoding"),
            (.transport(transport, request: try request()), .transport, "transport"),
            (.cancelled, .cancelled, "cancelled"),
            (.invalidRoute("GET /x cannot carry json parameters in a body"), .invalidRoute, "invalidRoute"),
            (.interceptor(Refused(reason: "adapter")), .interceptor, "interceptor"),
            (.stopped(.status(response)), .stopped, "stopped"),
        ]
    }

    @Test func everyFactoryReportsItsCodeAndTheCodesStableName() throws {
        for (error, code, name) in try Self.everyKind() {
            #expect(error.code == code)
            #expect(error.code.name == name)
            #expect("\(error.code)" == name)
        }
        let codes = try Self.everyKind().map(\.code)
        #expect(Set(codes).count == codes.count, "every code is distinct")
        #expect(ProviderError.Code.status != .validation)
    }

    @Test func aCodeMatchesInASwitchThatEndsInDefault() {
        func handling(_ error: ProviderError) -> String {
            switch error.code {
            case .status where error.status == .unauthorized: "sign in"
            case .cancelled, .invalidRoute: "give up"
            default: "report"
            }
        }
        #expect(handling(.cancelled) == "give up")
        #expect(handling(.invalidRoute("bad")) == "give up")
        #expect(handling(.interceptor(Refused(reason: "x"))) == "report")
    }

    @Test func theDataOfEachKindIsReadBackThroughItsProperty() throws {
        let response = try Self.response(#"{"error":"gone"}"#, status: .gone)

        let status = ProviderError.status(response)
        #expect(status.response?.string() == #"{"error":"gone"}"#)
        #expect(status.status == .gone)
        #expect(status.request?.url == "http://api.local/items")
        #expect(status.cause == nil && status.transportError == nil && status.decodingFailure == nil)

        let validation = ProviderError.validation(Refused(reason: "no data"), response)
        #expect(validation.cause as? Refused == Refused(reason: "no data"))
        #expect(validation.status == .gone)

        let decoding = try Self.decodingError()
        #expect(decoding.decodingFailure?.codingPath == "id")
        #expect(decoding.status == .ok)
        #expect(decoding.cause == nil)

        let transport = ProviderError.transport(
            CurlewError(code: .connectionRefused, detail: "refused"), request: try Self.request())
        #expect(transport.transportError?.code == .connectionRefused)
        #expect(transport.request?.method == .post)
        #expect(transport.response == nil && transport.status == nil)

        let invalid = ProviderError.invalidRoute("no base URL")
        #expect(invalid.invalidRouteReason == "no base URL")
        #expect(invalid.request == nil)
        #expect(ProviderError.cancelled.invalidRouteReason == nil)

        let interceptor = ProviderError.interceptor(Refused(reason: "adapter"))
        #expect(interceptor.cause as? Refused == Refused(reason: "adapter"))
        #expect(interceptor.response == nil)
    }

    @Test func aStopWrapsTheErrorAndStillShowsItsResponse() throws {
        let response = try Self.response("", status: .unauthorized)
        let stopped = ProviderError.stopped(.stopped(.status(response)))
        #expect(stopped.code == .stopped)
        #expect(stopped.stoppedError?.code == .stopped)
        #expect(stopped.underlying.code == .status)
        #expect(stopped.status == .unauthorized)
        #expect(ProviderError.status(response).stoppedError == nil)
        #expect(ProviderError.status(response).underlying.code == .status)
    }

    @Test func descriptionsSayWhatHappenedAsBefore() throws {
        let response = try Self.response(#"{"error":"gone"}"#, status: .gone)
        let request = try Self.request()
        #expect(
            ProviderError.status(response).description
                == #"HTTP 410 from POST http://api.local/items: {"error":"gone"}"#)
        #expect(
            ProviderError.validation(Refused(reason: "no data"), response).description
                == #"validation failed for POST http://api.local/items: Refused(reason: "no data")"#)
        #expect(try Self.decodingError().description.hasPrefix("could not decode Item at id: "))
        #expect(
            ProviderError.transport(CurlewError(code: .connectionRefused, detail: "refused"), request: request)
                .description == "POST http://api.local/items failed: CurlewError.connectionRefused: refused")
        #expect(ProviderError.cancelled.description == "cancelled")
        #expect(ProviderError.invalidRoute("no base URL").description == "invalid route: no base URL")
        #expect(
            ProviderError.interceptor(Refused(reason: "x")).description
                == #"an interceptor failed: Refused(reason: "x")"#)
        #expect(ProviderError.stopped(.cancelled).description == "stopped by the provider: cancelled")
    }

    @Test func descriptionsDoNotRepeatAURLsPasswordOrKeys() throws {
        let url = "https://user:hunter2@api.local/items?api_key=k1&page=2"
        let request = try CurlewRequest(method: .get, url: url)
        let response = RouteResponse(status: .notFound, body: [], url: url, request: request)
        let redacted = "https://user:<redacted>@api.local/items?api_key=<redacted>&page=2"
        let descriptions = [
            ProviderError.status(response).description,
            ProviderError.validation(Refused(reason: "no data"), response).description,
            ProviderError.transport(CurlewError(code: .timeout(.total), detail: "slow"), request: request)
                .description,
            ProviderError.stopped(.status(response)).description,
        ]
        for description in descriptions {
            #expect(description.contains(redacted), "\(description)")
            #expect(!description.contains("hunter2") && !description.contains("k1"), "\(description)")
        }
    }

    /// The ways a call fails with the URL it was sent to in its description.
    enum URLNamingFailure: CaseIterable, Sendable {
        case status, timeout, validation, stopped, streamedStatus
        /// The mock's own error for a request it has no stub for names the URL too.
        case noStub
    }

    @Test(arguments: URLNamingFailure.allCases)
    func descriptionsRedactTheProvidersAdditionalParametersButNotTheRoutes(failure: URLNamingFailure) async throws {
        let answer =
            switch failure {
            case .status, .stopped, .streamedStatus: StubResponse(status: .unauthorized)
            case .timeout: StubResponse(error: CurlewError(code: .timeout(.total), detail: "slow"))
            case .validation, .noStub: StubResponse()
            }
        var provider = TestProvider(
            baseURL: "https://api.local",
            transport: MockTransport(stubs: [
                Stub(.get, failure == .noStub ? "/other" : "/weather", responses: [answer])
            ])
        )
        provider.additionalParameters = ["AppID": "s3cr3t"]
        if failure == .stopped { provider.stopsOn = { _ in true } }
        let route = Route(path: "/weather", params: ["q": "London"])
        let error = await #expect(throws: ProviderError.self) {
            if failure == .streamedStatus {
                _ = try await provider.stream(route)
            } else {
                let refuse = AnyResponseValidator { _ in if failure == .validation { throw Refused(reason: "no") } }
                try await provider.request(route, responseValidators: [refuse])
            }
        }
        for text in [error.map { "\($0)" }, error.map { String(reflecting: $0) }] {
            #expect(text?.contains("AppID=<redacted>") == true && text?.contains("q=London") == true, "\(text ?? "")")
            #expect(text?.contains("s3cr3t") == false, "\(text ?? "")")
        }
    }

    @Test func everyPrintingOfAProvidersErrorHidesItsCredentials() async throws {
        var provider = TestProvider(
            baseURL: "https://api.example.com/v1",
            transport: MockTransport(stubs: [
                .get("*", status: .unauthorized, headers: ["Set-Cookie": "session=session-secret"], json: ["e": 1])
            ]))
        provider.additionalParameters = ["AppID": "provider-app-key"]
        var stopping = provider
        stopping.stopsOn = { _ in true }
        var errors: [ProviderError] = []
        for provider in [provider, stopping] {
            do {
                try await provider.request(Route(path: "/me", params: ["access_token": "query-token"]))
                Issue.record("a 401 should throw")
            } catch {
                errors.append(error)
            }
        }
        try #require(errors.count == 2)
        for error in errors {
            for (way, text) in everyPrinting(of: error) {
                for secret in ["query-token", "provider-app-key", "session-secret"] {
                    #expect(!text.contains(secret), "\(way): \(text)")
                }
                #expect(text.contains("HTTP 401") && text.contains("api.example.com/v1/me"), "\(way): \(text)")
                #expect(text.contains(error.description), "consistent with the description: \(way): \(text)")
            }
        }
    }
}
