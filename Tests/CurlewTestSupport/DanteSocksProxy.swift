import Foundation

/// A real SOCKS5 server that demands a user name and password (RFC 1929): Debian's `dante-server` (`danted`) with
/// `socksmethod: username`, on a loopback port of its own.
///
/// Dante checks a user name and password against the system's accounts (`getpwnam`, `getspnam`, `crypt`). The test
/// user exists only for the proxy: `danted` runs in a mount namespace of its own (`unshare --mount`) in which copies
/// of `/etc/passwd` and `/etc/shadow` that hold the user are bind-mounted over the real ones. The machine's account
/// files are never changed, and no other process sees the user. Each instance is its own process group, stopped by
/// ``stop()``.
public final class DanteSocksProxy: Sendable {
    /// The port the SOCKS5 server listens on, on 127.0.0.1.
    public let port: Int
    public let username: String
    public let password: String
    private let process: SupervisedProcess

    private init(port: Int, username: String, password: String, process: SupervisedProcess) {
        self.port = port
        self.username = username
        self.password = password
        self.process = process
    }

    /// Starts `danted` on a fresh loopback port, admitting `username` with `password` only.
    public static func start(username: String = "curlewsocks", password: String) async throws -> DanteSocksProxy {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/danted") else {
            throw TestSupportError("danted not found (apt-get install dante-server)")
        }
        let directory = try TemporaryDirectory.make(prefix: "curlew-dante")
        try writeAccounts(in: directory, username: username, password: password)
        let (process, port) = try await SupervisedProcess.launchBindingFreePort(
            name: "danted", directory: directory,
            program: { port, attempt in
                let configurationPath = directory + "/danted-\(attempt).conf"
                try Self.configuration(port: port).write(toFile: configurationPath, atomically: true, encoding: .utf8)
                let script =
                    "mount --bind '\(directory)/passwd' /etc/passwd && mount --bind '\(directory)/shadow' /etc/shadow"
                    + " && exec /usr/sbin/danted -f '\(configurationPath)' -p '\(directory)/danted-\(attempt).pid'"
                return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
            },
            isReady: { Probe.acceptsConnections(port: $0) })
        return DanteSocksProxy(port: port, username: username, password: password, process: process)
    }

    /// Dante on 127.0.0.1:`port`, admitting loopback clients that log in with a user name and password.
    private static func configuration(port: Int) -> String {
        """
        logoutput: stderr
        internal: 127.0.0.1 port = \(port)
        external: 127.0.0.1
        socksmethod: username
        user.privileged: root
        user.unprivileged: nobody
        client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
        socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 socksmethod: username }

        """
    }

    /// Copies of the system's account files with the test user added; its password hashed by `openssl passwd -6`.
    private static func writeAccounts(in directory: String, username: String, password: String) throws {
        try (password + "\n").write(toFile: directory + "/password", atomically: true, encoding: .utf8)
        try Spawn.run(
            ["sh", "-c", "openssl passwd -6 -stdin < '\(directory)/password' > '\(directory)/hash'"],
            stderrPath: directory + "/openssl.log")
        let hash = try String(contentsOfFile: directory + "/hash", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard hash.hasPrefix("$6$") else { throw TestSupportError("openssl passwd -6 printed \(hash)") }
        let passwd = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
        let shadow = try String(contentsOfFile: "/etc/shadow", encoding: .utf8)
        try (passwd + "\(username):x:64999:64999::/nonexistent:/usr/sbin/nologin\n")
            .write(toFile: directory + "/passwd", atomically: true, encoding: .utf8)
        try (shadow + "\(username):\(hash):20000:0:99999:7:::\n")
            .write(toFile: directory + "/shadow", atomically: true, encoding: .utf8)
        chmod(directory + "/shadow", 0o640)
    }

    /// Stops the server (SIGTERM to its process group) and waits for it.
    public func stop() {
        process.terminate()
    }
}
