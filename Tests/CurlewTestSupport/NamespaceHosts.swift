import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Separate hosts on one machine, for runs whose clients must come from different addresses: a server network
/// namespace and client namespaces (`ip netns`), each client joined to the server by a veth pair of its own.
///
/// Addresses (10.x, existing only inside these namespaces; the machine's own namespace gets no address, route or
/// link): the server answers on ``serverAddress`` (10.203.255.1, on its loopback); client `i` is ``clientAddresses``[i]
/// (10.203.i.2/30) on its end of pair `i`, whose server end is 10.203.i.1, and reaches the server through it. Each
/// pair is created inside the two namespaces it joins, so no interface name is ever taken in the machine's
/// namespace, and two test processes can each have their own set.
///
/// Run a program on a host with `ip netns exec NAME PROGRAM …` (``execPrefix(client:)``); ``startNginx()`` starts an
/// nginx on the server host. ``remove()`` deletes the namespaces, which takes their veth pairs with them; call it
/// on every path (a `defer` cannot await: use `do`/`catch`). Namespaces named after a test process that no longer
/// runs (it was killed before it could remove them) are deleted by the next ``create(clients:)``.
///
/// Needs root and iproute2's `ip`.
public final class NamespaceHosts: Sendable {
    /// The server's namespace.
    public let server: String
    /// The clients' namespaces, in order.
    public let clients: [String]
    /// Where the server answers, from every client.
    public let serverAddress = "10.203.255.1"
    /// Client `i`'s own address, as the server sees it.
    public let clientAddresses: [String]
    private let scratch: String

    private init(server: String, clients: [String], scratch: String) {
        self.server = server
        self.clients = clients
        self.clientAddresses = clients.indices.map { "10.203.\($0).2" }
        self.scratch = scratch
    }

    /// Why namespaces cannot be made here (not root, no `ip`), or nil when they can.
    public static var unavailableReason: String? {
        if geteuid() != 0 { return "network namespaces need root" }
        if Self.ipPath == nil { return "`ip` not found (apt-get install iproute2)" }
        return nil
    }

    private static let ipPath: String? = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// `ip netns exec CLIENT`: put it before a program to run that program on client `index`.
    public func execPrefix(client index: Int) -> [String] {
        [Self.ipPath ?? "ip", "netns", "exec", self.clients[index]]
    }

    /// The name prefix of this process's namespaces: `curlew-tPID-`.
    private static var ownPrefix: String { "curlew-t\(getpid())-" }

    /// Creates the server namespace and `count` client namespaces, each joined to the server by a veth pair.
    public static func create(clients count: Int) async throws -> NamespaceHosts {
        guard count >= 1, count <= 250 else { throw TestSupportError("NamespaceHosts: 1…250 clients, not \(count)") }
        if let reason = Self.unavailableReason { throw TestSupportError(reason) }
        Self.sweepAbandoned()
        let tag = Self.ownPrefix + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let hosts = NamespaceHosts(
            server: tag + "-srv", clients: (0..<count).map { "\(tag)-c\($0)" },
            scratch: try TemporaryDirectory.make(prefix: "curlew-netns"))
        do {
            try await hosts.ip("netns", "add", hosts.server)
            try await hosts.ip("-n", hosts.server, "link", "set", "lo", "up")
            try await hosts.ip("-n", hosts.server, "address", "add", hosts.serverAddress + "/32", "dev", "lo")
            for (index, client) in hosts.clients.enumerated() {
                try await hosts.ip("netns", "add", client)
                try await hosts.ip("-n", client, "link", "set", "lo", "up")
                // Both ends are born inside their namespaces: `h<i>` at the server, `eth0` at the client.
                try await hosts.ip(
                    "-n", hosts.server, "link", "add", "h\(index)", "type", "veth", "peer", "name", "eth0", "netns",
                    client)
                try await hosts.ip("-n", hosts.server, "address", "add", "10.203.\(index).1/30", "dev", "h\(index)")
                try await hosts.ip("-n", hosts.server, "link", "set", "h\(index)", "up")
                try await hosts.ip("-n", client, "address", "add", "10.203.\(index).2/30", "dev", "eth0")
                try await hosts.ip("-n", client, "link", "set", "eth0", "up")
                try await hosts.ip(
                    "-n", client, "route", "add", hosts.serverAddress + "/32", "via", "10.203.\(index).1")
            }
        } catch {
            await hosts.remove()
            throw error
        }
        return hosts
    }

    /// Deletes the namespaces (their veth pairs go with them) and the scratch folder. Stop what runs inside first:
    /// a namespace outlives its name while a process is in it.
    public func remove() async {
        for namespace in [self.server] + self.clients where Self.exists(namespace) {
            try? await self.ip("netns", "delete", namespace)
        }
        try? FileManager.default.removeItem(atPath: self.scratch)
    }

    /// Whether a namespace of this name exists (`ip netns` keeps them as files in /run/netns).
    public static func exists(_ namespace: String) -> Bool {
        FileManager.default.fileExists(atPath: "/run/netns/" + namespace)
    }

    /// This process's namespaces that exist now (none once every set was removed).
    public static func ownNamespaces() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? []).filter {
            $0.hasPrefix(Self.ownPrefix)
        }.sorted()
    }

    /// Deletes the namespaces of test processes that are gone (killed before they removed theirs).
    private static func sweepAbandoned() {
        guard let ip = Self.ipPath, let names = try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")
        else { return }
        for name in names where name.hasPrefix("curlew-t") {
            guard let pid = pid_t(name.dropFirst("curlew-t".count).prefix { $0.isNumber }), pid != getpid() else {
                continue
            }
            if kill(pid, 0) != 0 && errno == ESRCH {
                try? Spawn.run([ip, "netns", "delete", name], stderrPath: "/dev/null")
            }
        }
    }

    private func ip(_ arguments: String...) async throws {
        let argv = [Self.ipPath ?? "ip"] + arguments
        let log = self.scratch + "/ip.log"
        _ = try await offCooperativePool { try Spawn.run(argv, stderrPath: log) }
    }

    // MARK: - A server

    /// Starts nginx on the server host (``startNginx()``), runs `body` with it, then stops nginx and removes every
    /// host, whether `body` threw or not.
    public func withNginx<T>(
        isolation: isolated (any Actor)? = #isolation, _ body: (NamespaceNginx) async throws -> T
    ) async throws -> T {
        var server: NamespaceNginx?
        do {
            let nginx = try await self.startNginx()
            server = nginx
            let result = try await body(nginx)
            await nginx.stop()
            await self.remove()
            return result
        } catch {
            await server?.stop()
            await self.remove()
            throw error
        }
    }

    /// Starts an nginx on the server host, listening on ``serverAddress``:80, that answers `/hits/…` with 200 and
    /// logs each such request to ``NamespaceNginx/hitsLogPath`` with the client's address. Stop it
    /// (``NamespaceNginx/stop()``) before ``remove()``.
    public func startNginx() async throws -> NamespaceNginx {
        let nginx =
            ProcessInfo.processInfo.environment["CURLEW_NGINX"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/sbin/nginx"
        guard FileManager.default.isExecutableFile(atPath: nginx) else {
            throw TestSupportError("nginx not found at \(nginx): `apt-get install nginx-light` (or set CURLEW_NGINX)")
        }
        let directory = try TemporaryDirectory.make(prefix: "curlew-netns-nginx")
        do {
            for subdirectory in ["tmp/client_body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"] {
                try FileManager.default.createDirectory(
                    atPath: directory + "/" + subdirectory, withIntermediateDirectories: true)
            }
            try NamespaceNginx.config(prefix: directory, address: self.serverAddress, runAsRoot: geteuid() == 0)
                .write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
            // `ip netns exec` execs nginx, so the supervisor's child is nginx itself, inside the server's namespace.
            let process = try await SupervisedProcess.launch(
                name: "nginx (namespace \(self.server))",
                program: [
                    Self.ipPath ?? "ip", "netns", "exec", self.server, nginx, "-p", directory + "/", "-c",
                    directory + "/nginx.conf", "-e", "stderr",
                ],
                listen: 0, stderrPath: directory + "/stderr.log", cleanupDirectory: directory)
            // Ready when a client host can connect (bash's /dev/tcp: nothing to install, nothing logged).
            let probe = self.execPrefix(client: 0) + ["bash", "-c", "exec 3<>/dev/tcp/\(self.serverAddress)/80"]
            try await process.waitUntilReady(command: probe, log: directory + "/probe.log")
            return NamespaceNginx(process: process, directory: directory, baseURL: "http://\(self.serverAddress)")
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }
}

extension SupervisedProcess {
    /// Waits (at most 30 s) until `command` exits 0, failing early if the server exits.
    fileprivate func waitUntilReady(command: [String], log: String) async throws {
        try await self.waitUntilReady(timeout: .seconds(30)) {
            (try? Spawn.run(command, stderrPath: log)) != nil
        }
    }
}

/// An nginx inside a ``NamespaceHosts`` server namespace (see ``NamespaceHosts/startNginx()``).
public final class NamespaceNginx: Sendable {
    /// `http://10.203.255.1` (port 80): reachable from the client namespaces only.
    public let baseURL: String
    /// One line per `/hits/` request: `REMOTE-ADDRESS STATUS REQUEST-URI`, written unbuffered.
    public var hitsLogPath: String { self.directory + "/hits-access.log" }
    private let process: SupervisedProcess
    private let directory: String

    fileprivate init(process: SupervisedProcess, directory: String, baseURL: String) {
        self.process = process
        self.directory = directory
        self.baseURL = baseURL
    }

    /// Stops nginx (its supervisor then removes its folder, log included: read the log first).
    public func stop() async {
        let process = self.process
        _ = try? await offCooperativePool { process.terminate() }
    }

    fileprivate static func config(prefix: String, address: String, runAsRoot: Bool) -> String {
        """
        # Generated by CurlewTestSupport (NamespaceHosts) for one test; deleted with it.
        daemon off;
        master_process on;
        worker_processes 1;
        \(runAsRoot ? "user root root;" : "")
        pid \(prefix)/nginx.pid;
        error_log stderr;
        worker_rlimit_nofile 4096;
        events {
            worker_connections 2048;
        }
        http {
            access_log off;
            log_format curlew_clients '$remote_addr $status $request_uri';
            server_tokens off;
            keepalive_requests 1000000;
            keepalive_timeout 300s;
            client_body_temp_path \(prefix)/tmp/client_body;
            proxy_temp_path \(prefix)/tmp/proxy;
            fastcgi_temp_path \(prefix)/tmp/fastcgi;
            uwsgi_temp_path \(prefix)/tmp/uwsgi;
            scgi_temp_path \(prefix)/tmp/scgi;
            server {
                listen \(address):80;
                location /hits/ {
                    access_log \(prefix)/hits-access.log curlew_clients;
                    default_type text/plain;
                    return 200 "hit\\n";
                }
            }
        }

        """
    }
}
