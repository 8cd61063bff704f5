import Foundation

/// A real forward proxy that demands a user name and password: pproxy (`pip install pproxy`) serving HTTP (CONNECT
/// and forwarding, Basic `Proxy-Authorization`) and SOCKS5 (RFC 1929 user name and password) on one loopback port.
/// `--auth 0` makes it check the credentials of every connection (by default it trusts an address for a month after
/// one success, which would let a test with wrong credentials pass). Each instance is its own process, stopped by
/// ``stop()``.
public final class AuthenticatingProxy: Sendable {
    /// The port both protocols listen on.
    public let port: Int
    public let username: String
    public let password: String
    private let process: SupervisedProcess

    /// A `Proxy-Authorization` value with the proxy's own credentials (Basic).
    public var basicAuthorization: String {
        "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
    }

    private init(port: Int, username: String, password: String, process: SupervisedProcess) {
        self.port = port
        self.username = username
        self.password = password
        self.process = process
    }

    /// Starts a proxy on a fresh loopback port that admits `username` and `password` only.
    public static func start(username: String = "curlew", password: String) async throws -> AuthenticatingProxy {
        let directory = try TemporaryDirectory.make(prefix: "curlew-auth-proxy")
        let (process, port) = try await SupervisedProcess.launchBindingFreePort(
            name: "pproxy", directory: directory,
            program: { port, _ in
                [
                    "{python}", "-m", "pproxy", "-l", "http+socks5://127.0.0.1:\(port)#\(username):\(password)",
                    "--auth", "0",
                ]
            },
            isReady: { Probe.acceptsConnections(port: $0) })
        return AuthenticatingProxy(port: port, username: username, password: password, process: process)
    }

    /// Stops the proxy (SIGTERM to its supervisor) and waits for it.
    public func stop() {
        process.terminate()
    }
}
