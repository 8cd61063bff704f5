// The names a server framework exports that Curlew's route layer uses too: Vapor has `Route` and `Environment`,
// Hummingbird `Environment`. A module of their own, so the test that imports it beside Curlew meets the same
// ambiguity a service importing Vapor and Curlew does, without building a server framework in CI.

/// A server route, as a web framework declares one.
public struct Route: Sendable {
    public let path: String
    public init(path: String) { self.path = path }
}

/// A process environment, as a web framework declares one.
public struct Environment: Sendable {
    public let name: String
    public init(name: String) { self.name = name }
}
