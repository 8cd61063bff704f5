import Curlew
import FrameworkNames
import Testing

// A service that imports a framework exporting `Route` and `Environment` (Vapor, Hummingbird) and Curlew: the
// unqualified names are ambiguous there, so the route layer's are written `Curlew.Route` and
// `Curlew.Environment` (README, "Names shared with server frameworks"). Leading-dot route constants need no
// qualification: the parameter's type picks them. This file compiling is most of the test.

extension Curlew.Route {
    static let status = { @Sendable (code: Int) in Curlew.Route(path: "/status/\(code)") }
}

private struct API: HTTPProvider {
    let environment: Curlew.Environment
    var baseURL: String { environment.baseURL }
}

@Suite("Curlew beside a server framework's names")
struct CurlewBesideAFrameworkTests {
    @Test
    func qualifiedNamesPickCurlewsTypesAndTheFrameworksStayUsable() throws {
        let serverRoute = FrameworkNames.Route(path: "/hello")
        let serverEnvironment = FrameworkNames.Environment(name: "production")
        let api = API(environment: Curlew.Environment(name: "testing", baseURL: "http://127.0.0.1:1"))
        let route: Curlew.Route = .status(204)
        #expect(serverRoute.path == "/hello")
        #expect(serverEnvironment.name == "production")
        #expect(api.environment.isTesting)
        #expect(route.path == "/status/204")
        #expect(try api.curlCommand(for: .status(204)).contains("http://127.0.0.1:1/status/204"))
    }
}
