import Curlew
import CurlewEngine
import CurlewTestSupport
import CurlewTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

// Nikka's README, example by example, in Curlew's API. Each test body runs against httpbin and against the
// mock transport; httpbin's `/anything` stands in for "https://my-website.com/api".

/// Nikka: `class MyProvider: HTTPProvider { var baseURL = URL(string: "https://my-website.com/api")! }`
private struct MyProvider: HTTPProvider {
    let baseURL: String
    let transport: any HTTPTransport
    var additionalHeaders: [String: String] = [:]
    var additionalParameters: Parameters = [:]

    init(_ backend: Backend) {
        baseURL = backend.baseURL + "/anything/api"
        transport = backend.transport
    }
}

extension Route {
    static let me = Route(path: "/me", method: .get)
    static let friends = Route(path: "/me/friends")  // GET is the default method when it is not specified
    static let user = { @Sendable (id: String) in Route(path: "/user/\(id)") }
    static let login = { @Sendable (email: String, password: String) in
        Route(path: "/login", method: .post, params: ["email": email, "password": password])
    }
    /// Nikka's `uploadImage`, with JPEG bytes instead of a `UIImage`.
    static let uploadImage = { @Sendable (jpeg: [UInt8]) -> Route in
        var form = MultipartForm()
        form.append(data: jpeg, forKey: "image", fileName: "image.jpg", mimeType: "image/jpeg")
        form.append(value: "holiday", forKey: "caption")
        return Route(path: "/profile/picture", method: .post, multipartForm: form)
    }
}

@Suite struct NikkaReadmeTests {
    @Test(arguments: BackendKind.allCases)
    func simpleExampleSendsAGETToTheBaseURLPlusThePath(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        // MyProvider().request(Route(path:"/me/friends")).responseJSON { … }
        let json = try await MyProvider(backend).request(Route(path: "/me/friends")).json()
        #expect(json["method"] == "GET")
        #expect(json["url"].stringValue == backend.baseURL + "/anything/api/me/friends")
    }

    @Test(arguments: BackendKind.allCases)
    func routesDefinedAsStaticsAndClosuresOnAnExtension(kind: BackendKind) async throws {
        let provider = MyProvider(try await Backend.make(kind))
        let me = try Echo(try await provider.request(.me))
        #expect(me.method == "GET")
        #expect(me.url.hasSuffix("/anything/api/me"))

        let friends = try Echo(try await provider.request(.friends))
        #expect(friends.url.hasSuffix("/anything/api/me/friends"))

        let user = try Echo(try await provider.request(.user("1234")))
        #expect(user.url.hasSuffix("/anything/api/user/1234"))

        // "This will send a POST request … with a json body {"email":"foo@gmail.com","password":"bar"}"
        let login = try Echo(try await provider.request(.login("foo@gmail.com", "bar")))
        #expect(login.method == "POST")
        #expect(login.body == ["email": "foo@gmail.com", "password": "bar"])
        #expect(login.header("Content-Type") == "application/json")
    }

    @Test(arguments: BackendKind.allCases)
    func routeExamplesEncodeAsDocumented(kind: BackendKind) async throws {
        let provider = MyProvider(try await Backend.make(kind))
        // Route(path:"/me"): GET without headers or parameters.
        let plain = try Echo(try await provider.request(Route(path: "/me")))
        #expect(plain.args == [:])
        #expect(plain.data.isEmpty)

        // POST with the default JSON encoding: parameters in the body.
        let post = try Echo(
            try await provider.request(
                Route(path: "/login", method: .post, params: ["email": "example@gmail.com", "password": "qwerty12345"]))
        )
        #expect(post.body == ["email": "example@gmail.com", "password": "qwerty12345"])
        #expect(post.args == [:])

        // PUT with the form encoding and a header.
        let put = try Echo(
            try await provider.request(
                Route(
                    path: "/user/about", method: .put, params: ["text": "Hey!!"], headers: ["Authorization": "12345"],
                    encoding: .form)))
        #expect(put.method == "PUT")
        #expect(put.form == ["text": "Hey!!"])
        #expect(put.header("Authorization") == "12345")
        #expect(put.header("Content-Type") == "application/x-www-form-urlencoded")

        // `url` puts them in the query.
        let query = try Echo(
            try await provider.request(Route(path: "/search", method: .post, params: ["q": "a b&c"], encoding: .url)))
        #expect(query.args == ["q": "a b&c"])
    }

    @Test(arguments: BackendKind.allCases)
    func multipartUploadReportsProgress(kind: BackendKind) async throws {
        let provider = MyProvider(try await Backend.make(kind))
        let image = Array("not really a jpeg, but bytes all the same".utf8)
        let reports = Mutex<[TransferProgress]>([])
        // MyProvider().request(.uploadImage(image)).uploadProgress { (sent, total) in … }.responseJSON { … }
        let json = try await provider.request(
            .uploadImage(image),
            progress: { progress in
                reports.withLock { $0.append(progress) }
            }
        ).json()
        #expect(json["files"]["image"] == .string(String(decoding: image, as: UTF8.self)))
        #expect(json["form"]["caption"] == "holiday")
        #expect(json["headers"]["Content-Type"].stringValue.hasPrefix("multipart/form-data; boundary="))
        let last = try #require(reports.withLock { $0.last })
        #expect(last.isComplete)
        if kind == .httpbin {
            #expect(last.bytesSent > Int64(image.count))
            #expect(last.bytesSent == last.totalBytesToSend)
        }
    }

    @Test(arguments: BackendKind.allCases)
    func additionalHeadersAndParametersGoWithEveryRequest(kind: BackendKind) async throws {
        var provider = MyProvider(try await Backend.make(kind))
        provider.additionalHeaders = ["Locale": "en-US"]
        provider.additionalParameters = ["token": "d71106a0-dd44-4092-a72e"]

        let get = try Echo(try await provider.request(.friends))
        #expect(get.header("Locale") == "en-US")
        #expect(get.args == ["token": "d71106a0-dd44-4092-a72e"])

        let post = try Echo(try await provider.request(.login("foo@gmail.com", "bar")))
        #expect(post.header("Locale") == "en-US")
        #expect(post.body == ["email": "foo@gmail.com", "password": "bar", "token": "d71106a0-dd44-4092-a72e"])
    }

    @Test(arguments: BackendKind.allCases)
    func defaultProviderSendsFullURLs(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        let route = Route(path: backend.baseURL + "/anything/api/user/1")
        // DefaultProvider.request(Route(path:"https://my-website.com/api/user/1")).responseJSON { … }
        let response =
            kind == .httpbin
            ? try await DefaultProvider.request(route)
            : try await DefaultProvider(transport: backend.transport).request(route)
        #expect(try Echo(response).url == backend.baseURL + "/anything/api/user/1")

        await #expect(throws: ProviderError.self) {
            try await DefaultProvider(transport: backend.transport).request(Route(path: "/relative"))
        }
    }

    struct User: Decodable, Equatable {
        let url: String
        let method: String
    }

    struct MissingField: Decodable {
        let lastName: String
    }

    @Test(arguments: BackendKind.allCases)
    func responseObjectDecodesOrSaysWhereItFailed(kind: BackendKind) async throws {
        let provider = MyProvider(try await Backend.make(kind))
        // MyProvider().request(Route(path:"/user/1234")).responseObject { (response: Response<User>) in … }
        let user = try await provider.requestObject(of: User.self, Route(path: "/user/1234"))
        #expect(user.method == "GET")
        #expect(user.url.hasSuffix("/user/1234"))

        // "Will print an error, if the User cannot be parsed for instance."
        do {
            _ = try await provider.request(Route(path: "/user/1234")).decode(MissingField.self)
            Issue.record("decoding should have failed")
        } catch  where error.code == .decoding {
            #expect(error.decodingFailure?.codingPath == "lastName")
            #expect(error.decodingFailure?.bodyExcerpt.contains("\"method\"") == true)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test(arguments: BackendKind.allCases)
    func shouldContinueFalseStillAnswersTheCaller(kind: BackendKind) async throws {
        let backend = try await Backend.make(kind)
        let loggedOut = Flag()
        var provider = TestProvider(backend)
        // func shouldContinue(with error:) -> Bool { if error == .http(401) { print("should log out"); return false } … }
        provider.stopsOn = { error in
            guard error.status == .unauthorized else { return false }
            loggedOut.set()
            return true
        }
        do {
            try await provider.request(Route(path: "/status/401"))
            Issue.record("a 401 should fail")
        } catch  where error.code == .stopped && error.underlying.code == .status {
            #expect(error.status == .unauthorized)
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(loggedOut.isSet)

        // Other errors are not stopped.
        await #expect {
            try await provider.request(Route(path: "/status/500"))
        } throws: { error in
            guard let error = error as? ProviderError, error.code == .status else { return false }
            return error.status == .internalServerError
        }
    }

    @Test(arguments: BackendKind.allCases)
    func futuresBecomeAsyncAwait(kind: BackendKind) async throws {
        let provider = MyProvider(try await Backend.make(kind))
        // let loginDataFuture: Future<(HTTPURLResponse, Data)> = myProvider.request(.login(…)).response()
        let response = try await provider.request(.login("foo@gmail.com", "bar"))
        #expect(response.status.code == 200)
        #expect(!response.data().isEmpty)
        #expect(response.request.method == .post)
        // let loginJSONFuture: Future<Any> = myProvider.request(.login(…)).responseJSON()
        let json = try await provider.request(.login("foo@gmail.com", "bar")).json()
        #expect(json["json"]["email"] == "foo@gmail.com")
    }
}

/// Set once from any task.
final class Flag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

// Nikka's Deezer example: https://api.deezer.com/track/313555658769 answers 200 with an error body.

struct DeezerError: Error, Equatable {
    var description: String
    var code: Int
}

private struct DeezerProvider: HTTPProvider {
    let baseURL: String
    let transport: any HTTPTransport

    func validate(_ response: RouteResponse) throws {
        let json = try? response.json()
        if let code = json?["error"]["code"].int, let message = json?["error"]["message"].string {
            throw DeezerError(description: message, code: code)
        }
    }
}

private let deezerErrorBody = #"{"error":{"type":"DataException","message":"no data","code":800}}"#

@Suite struct NikkaDeezerValidationTests {
    private func expectDeezerError(_ provider: DeezerProvider) async {
        // myProvider.request(Route(path:"/track/313555658769")).responseJSON { … }  // prints "error: no data"
        do {
            try await provider.request(Route(path: "/track/313555658769"))
            Issue.record("a 200 with an error body should fail validation")
        } catch  where error.code == .validation {
            #expect(error.cause as? DeezerError == DeezerError(description: "no data", code: 800))
            #expect(error.status == .ok)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func localServerAnswering200WithAnErrorBodyFailsWithTheUsersError() async throws {
        try await withScriptedServer({ _ in .json(deezerErrorBody) }) { server in
            await expectDeezerError(DeezerProvider(baseURL: server.baseURL, transport: CurlewClient.shared))
            #expect(server.requestCount == 1)
        }
    }

    @Test func mockTransportRunsTheSameValidation() async throws {
        let mock = MockTransport(stubs: [
            Stub(
                .get, "/track/313555658769",
                responses: [
                    StubResponse(headers: ["Content-Type": "application/json"], body: Array(deezerErrorBody.utf8))
                ])
        ])
        await expectDeezerError(DeezerProvider(baseURL: "https://api.deezer.com", transport: mock))
        #expect(mock.receivedRequests.map(\.url) == ["https://api.deezer.com/track/313555658769"])
    }

    @Test func aTrackThatExistsPassesValidation() async throws {
        try await withScriptedServer({ _ in .json(#"{"id":3135556,"title":"Harder, Better, Faster, Stronger"}"#) }) {
            server in
            let json = try await DeezerProvider(baseURL: server.baseURL, transport: CurlewClient.shared)
                .request(Route(path: "/track/3135556")).json()
            #expect(json["title"] == "Harder, Better, Faster, Stronger")
        }
    }
}
