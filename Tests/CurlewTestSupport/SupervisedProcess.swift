import Foundation
import NIOPosix
import Synchronization

#if canImport(Glibc)
public import Glibc
#elseif canImport(Musl)
public import Musl
#endif

/// Where the helper scripts live: `Tests/servers/`, found from this file's location at build
/// time (CI builds and runs in the same clone). `CURLEW_TEST_SERVERS_DIR` overrides it.
public enum ServerScripts {
    static var directory: String {
        if let override = ProcessInfo.processInfo.environment["CURLEW_TEST_SERVERS_DIR"], !override.isEmpty {
            return override
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // CurlewTestSupport
            .deletingLastPathComponent()  // Tests
            .appendingPathComponent("servers")
            .path
    }

    static var supervisor: String { directory + "/supervise.py" }

    /// The interpreter that runs the supervisor (and, through `{python}`, gunicorn), and that holds the Python test
    /// tools `make deps-python` installs (moto, boto3 and its botocore): `CURLEW_PYTHON`, else `python3`.
    public static var python: String {
        ProcessInfo.processInfo.environment["CURLEW_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } ?? "python3"
    }
}

/// A server started through `Tests/servers/supervise.py`.
///
/// The supervisor's stdin is a socket whose other end only this process holds (close-on-exec,
/// never written). When the test process exits, however it dies, the kernel closes it and the
/// supervisor tears the server down, so no test run leaves servers behind.
final class SupervisedProcess: Sendable {
    let pid: pid_t
    let ports: [Int]
    let stderrPath: String
    let name: String
    private let lifeline: Int32
    private let exitStatus = Mutex<Int32?>(nil)
    private let lifelineClosed = Atomic<Bool>(false)

    private init(pid: pid_t, ports: [Int], stderrPath: String, name: String, lifeline: Int32) {
        self.pid = pid
        self.ports = ports
        self.stderrPath = stderrPath
        self.name = name
        self.lifeline = lifeline
    }

    /// Starts `program` under the supervisor and waits for its `PORTS` line.
    ///
    /// - Parameters:
    ///   - listen: sockets the supervisor binds on 127.0.0.1:0 and passes to the program.
    ///   - cleanupDirectory: removed by the supervisor when the test process goes away.
    static func launch(
        name: String,
        program: [String],
        listen: Int,
        stderrPath: String,
        cleanupDirectory: String?,
        timeout: Duration = .seconds(30)
    ) async throws -> SupervisedProcess {
        guard FileManager.default.fileExists(atPath: ServerScripts.supervisor) else {
            throw TestSupportError(
                "\(name): supervisor script not found at \(ServerScripts.supervisor) (set CURLEW_TEST_SERVERS_DIR)")
        }
        var arguments = [ServerScripts.python, ServerScripts.supervisor, "--listen", String(listen)]
        if let cleanupDirectory {
            arguments += ["--cleanup-dir", cleanupDirectory]
        }
        arguments.append("--")
        arguments += program

        let spawned = try Spawn.start(arguments: arguments, stdoutToPipe: true, stderrPath: stderrPath)
        let reader = spawned.stdoutReader!
        let line = try? await NIOThreadPool.singleton.runIfActive {
            defer { close(reader) }
            return Spawn.readLine(from: reader, timeout: timeout)
        }
        let ports = line.flatMap {
            $0.hasPrefix("PORTS") ? $0.split(separator: " ").dropFirst().compactMap { Int($0) } : nil
        }
        let process = SupervisedProcess(
            pid: spawned.pid, ports: ports ?? [], stderrPath: stderrPath, name: name, lifeline: spawned.stdinWriter)
        guard let ports, ports.count == listen else {
            process.terminate()
            throw TestSupportError(
                "\(name): the supervisor did not report its ports (\(ServerScripts.python) \(ServerScripts.supervisor)).\n\(process.stderrTail())"
            )
        }
        return process
    }

    /// Whether the supervisor (and therefore the server) has exited; reaps it if so.
    var hasExited: Bool {
        self.exitStatus.withLock { status in
            if status != nil { return true }
            var raw: Int32 = 0
            let result = waitpid(self.pid, &raw, WNOHANG)
            if result == self.pid {
                status = raw
                return true
            }
            if result < 0 && errno == ECHILD {
                status = -1
                return true
            }
            return false
        }
    }

    /// The last part of the server's stderr, for error messages.
    func stderrTail(maxBytes: Int = 6000) -> String {
        guard let data = FileManager.default.contents(atPath: self.stderrPath), !data.isEmpty else {
            return "(\(self.name) wrote nothing to stderr: \(self.stderrPath))"
        }
        let text = String(decoding: data.suffix(maxBytes), as: UTF8.self)
        return "--- \(self.name) stderr (\(self.stderrPath)) ---\n" + text
    }

    /// Stops the server now (used when a start attempt is abandoned) and reaps the supervisor.
    func terminate() {
        if !self.lifelineClosed.exchange(true, ordering: .relaxed) {
            close(self.lifeline)
        }
        guard !self.hasExited else { return }
        kill(self.pid, SIGTERM)
        // The supervisor gives the server 5 s to stop before SIGKILL; allow a little more.
        for _ in 0..<700 {
            if self.hasExited { return }
            usleep(10_000)
        }
        kill(self.pid, SIGKILL)
        _ = self.hasExited
    }

    /// Polls `isReady` until it succeeds, the server exits, or `timeout` passes.
    ///
    /// `isReady` runs on NIO's blocking thread pool because probes use blocking sockets.
    func waitUntilReady(
        timeout: Duration = .seconds(30),
        _ isReady: @escaping @Sendable () -> Bool
    ) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if self.hasExited {
                throw ServerExited(tail: self.stderrTail(), name: self.name)
            }
            if try await NIOThreadPool.singleton.runIfActive(isReady) {
                return
            }
            if clock.now >= deadline {
                let tail = self.stderrTail()
                self.terminate()
                throw TestSupportError("\(self.name) did not become ready within \(timeout).\n\(tail)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// The server process ended during startup; `tail` is its stderr.
struct ServerExited: Error, CustomStringConvertible {
    let tail: String
    let name: String

    var description: String { "\(self.name) exited during startup.\n\(self.tail)" }
}

extension SupervisedProcess {
    /// Starts a server that binds its loopback port itself (pproxy, danted, Prometheus) on a fresh port, and waits
    /// until `isReady(port)`. Another process can take the port between ``FreePort/allocate()`` and the server's
    /// bind, so a server that exits before it is ready is started again on another port, three times at most.
    ///
    /// - Parameter program: the command line for a port and an attempt number (for files of its own per attempt).
    static func launchBindingFreePort(
        name: String, directory: String, readyTimeout: Duration = .seconds(30),
        program: (_ port: Int, _ attempt: Int) throws -> [String],
        isReady: @escaping @Sendable (_ port: Int) -> Bool
    ) async throws -> (process: SupervisedProcess, port: Int) {
        let attempts = 3
        for attempt in 1...attempts {
            let port = try FreePort.allocate()
            let process = try await launch(
                name: name, program: try program(port, attempt), listen: 0,
                stderrPath: directory + "/stderr-\(attempt).log", cleanupDirectory: directory)
            do {
                try await process.waitUntilReady(timeout: readyTimeout) { isReady(port) }
                return (process, port)
            } catch let exited as ServerExited where attempt < attempts {
                _ = exited
                continue
            }
        }
        throw TestSupportError("\(name): could not bind a free port after \(attempts) attempts")
    }
}

extension SupervisedProcess {
    /// A server started by ``launchWithTestCertificates(name:folderPrefix:listen:installHint:program:)``.
    struct WithCertificates {
        let process: SupervisedProcess
        /// The server's own folder (logs, scratch), removed with the server.
        let directory: String
        /// `ca.pem`, and `server.pem` / `server.key` for `127.0.0.1` and `localhost`, signed by it.
        let certificates: String
        var caFile: String { certificates + "/ca.pem" }
    }

    /// Starts a TLS server in a fresh folder with a throwaway test CA's certificates on `listen` supervisor-bound
    /// loopback ports, and waits until every port accepts connections. The folder goes if the start fails.
    ///
    /// - Parameters:
    ///   - installHint: added to the error when the program exits during startup (what it needs installed).
    ///   - program: the command line, given the server's folder and its certificates' folder; it may write files
    ///     there first.
    static func launchWithTestCertificates(
        name: String, folderPrefix: String, listen: Int, installHint: String? = nil,
        program: (_ directory: String, _ certificates: String) throws -> [String]
    ) async throws -> WithCertificates {
        let directory = try TemporaryDirectory.make(prefix: folderPrefix)
        do {
            let certificates = directory + "/certs"
            try FileManager.default.createDirectory(atPath: certificates, withIntermediateDirectories: true)
            try TestCertificates.generate(in: certificates)
            let process = try await launch(
                name: name, program: try program(directory, certificates), listen: listen,
                stderrPath: directory + "/stderr.log", cleanupDirectory: directory)
            let ports = process.ports
            do {
                try await process.waitUntilReady { ports.allSatisfy { Probe.acceptsConnections(port: $0) } }
            } catch let exited as ServerExited {
                guard let installHint else { throw exited }
                throw TestSupportError("\(exited)\nhint: \(installHint) for \(ServerScripts.python)")
            }
            return WithCertificates(process: process, directory: directory, certificates: certificates)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }
}

/// posix_spawn with exactly the descriptors we intend: everything this file opens is
/// close-on-exec, and dup2 onto 0/1/2 is the only way a descriptor reaches the child.
enum Spawn {
    struct Started {
        let pid: pid_t
        /// Write end of the child's stdin; closing it signals EOF.
        let stdinWriter: Int32
        /// Read end of the child's stdout, if `stdoutToPipe`; otherwise stdout shares stderr's file.
        let stdoutReader: Int32?
    }

    static func start(arguments: [String], stdoutToPipe: Bool, stderrPath: String) throws -> Started {
        // Socket pairs rather than pipes: they can be created close-on-exec atomically
        // (Glibc's pipe2 is not imported into Swift), so a process spawned concurrently by
        // another thread cannot inherit them.
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, kind, 0, &stdinPipe) == 0 else {
            throw TestSupportError("socketpair failed: \(String(cString: strerror(errno)))")
        }
        guard socketpair(AF_UNIX, kind, 0, &stdoutPipe) == 0 else {
            close(stdinPipe[0])
            close(stdinPipe[1])
            throw TestSupportError("socketpair failed: \(String(cString: strerror(errno)))")
        }
        let stderrFD = open(stderrPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard stderrFD >= 0 else {
            stdinPipe.forEach { close($0) }
            stdoutPipe.forEach { close($0) }
            throw TestSupportError("cannot open \(stderrPath): \(String(cString: strerror(errno)))")
        }
        defer {
            close(stdinPipe[0])
            close(stdoutPipe[1])
            close(stderrFD)
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutToPipe ? stdoutPipe[1] : stderrFD, 1)
        posix_spawn_file_actions_adddup2(&actions, stderrFD, 2)
        // The child inherits nothing else. posix_spawn on Linux passes on every descriptor without close-on-exec,
        // and SwiftNIO accepts connections without it: a long-lived child (a supervisor, nginx) holding a test
        // server's accepted socket keeps that connection from ever closing (no FIN), which hung fault tests.
        try closeInheritedDescriptors(&actions)

        var attributes = posix_spawnattr_t()
        initializeWithDefaultSignals(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" } + ["PYTHONUNBUFFERED=1"]
        var pid: pid_t = 0
        let status = withCStrings(arguments) { argv in
            withCStrings(environment) { envp in
                posix_spawnp(&pid, argv[0]!, &actions, &attributes, argv, envp)
            }
        }
        guard status == 0 else {
            close(stdinPipe[1])
            close(stdoutPipe[0])
            throw TestSupportError("cannot start \(arguments[0]): \(String(cString: strerror(status)))")
        }
        if stdoutToPipe {
            return Started(pid: pid, stdinWriter: stdinPipe[1], stdoutReader: stdoutPipe[0])
        }
        close(stdoutPipe[0])
        return Started(pid: pid, stdinWriter: stdinPipe[1], stdoutReader: nil)
    }

    /// Runs a command to completion (blocking), throwing with its stderr if it fails.
    static func run(_ arguments: [String], stderrPath: String) throws {
        let started = try start(arguments: arguments, stdoutToPipe: false, stderrPath: stderrPath)
        close(started.stdinWriter)
        var raw: Int32 = 0
        while waitpid(started.pid, &raw, 0) < 0 && errno == EINTR {}
        // WIFEXITED && WEXITSTATUS == 0, spelled out because the C macros are not imported.
        guard raw & 0x7f == 0, (raw >> 8) & 0xff == 0 else {
            let message =
                FileManager.default.contents(atPath: stderrPath).map { String(decoding: $0, as: UTF8.self) } ?? ""
            throw TestSupportError("`\(arguments.joined(separator: " "))` failed (wait status \(raw)):\n\(message)")
        }
    }

    /// Reads up to the first newline, giving up at EOF or after `timeout`.
    static func readLine(from fd: Int32, timeout: Duration) -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256)
        while !bytes.contains(UInt8(ascii: "\n")) {
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else { return nil }
            let milliseconds = Int32(
                clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
                    + 1)
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        return String(decoding: bytes[..<newline], as: UTF8.self)
    }

    private static func withCStrings<R>(
        _ strings: [String], _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> R
    ) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        var mutable = pointers
        return mutable.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
    }
}

/// Blocking one-shot probes used while a server starts up (run them off the cooperative pool).
enum Probe {
    /// Connects to 127.0.0.1:`port` with a short timeout; `body` may use the socket.
    static func withConnection<R>(port: Int, timeoutSeconds: Int, _ body: (Int32) -> R?) -> R? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        // On Linux SO_SNDTIMEO also bounds connect().
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return nil }
        return body(fd)
    }

    /// Whether something accepts TCP connections on the port.
    static func acceptsConnections(port: Int) -> Bool {
        withConnection(port: port, timeoutSeconds: 2) { _ in true } ?? false
    }

    /// Sends `GET path` over HTTP/1.0 and returns the status code, or nil.
    static func httpStatus(port: Int, path: String) -> Int? {
        withConnection(port: port, timeoutSeconds: 5) { fd -> Int? in
            let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
            let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent == request.count else { return nil }
            var response: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1024)
            while response.count < 12 {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                response += chunk[0..<count]
            }
            // "HTTP/1.x NNN"
            guard response.count >= 12, response.starts(with: Array("HTTP/1.".utf8)) else { return nil }
            return Int(String(decoding: response[9..<12], as: UTF8.self))
        }
    }
}

/// Closes every descriptor above stderr in a spawned child: `posix_spawn_file_actions_addclosefrom_np`
/// (glibc 2.34+), which Swift's Glibc module does not import.
public func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) throws {
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
        throw TestSupportError("posix_spawn_file_actions_addclosefrom_np is missing (glibc 2.34 or later is required)")
    }
    let addCloseFrom = unsafeBitCast(symbol, to: AddCloseFrom.self)
    let status = addCloseFrom(&actions, 3)
    guard status == 0 else {
        throw TestSupportError("posix_spawn_file_actions_addclosefrom_np failed: \(String(cString: strerror(status)))")
    }
}

/// Spawn attributes for a child that starts with default signal handling and nothing blocked: the spawning thread
/// may block signals (Dispatch and NIO threads do) and the test process may ignore SIGPIPE, and a child that
/// inherits either might not react to SIGTERM. Destroy with `posix_spawnattr_destroy`.
public func initializeWithDefaultSignals(_ attributes: inout posix_spawnattr_t) {
    posix_spawnattr_init(&attributes)
    var emptyMask = sigset_t()
    sigemptyset(&emptyMask)
    posix_spawnattr_setsigmask(&attributes, &emptyMask)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] {
        sigaddset(&defaults, signal)
    }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
}

/// Starts `argv` (`argv[0]` looked up on PATH) with stdin from /dev/null, stdout and stderr into the given files,
/// default signal handling and none of the test process's descriptors: how the tests run the `curlew` binary and
/// the command-line tools they drive (Slurm's clients).
public func spawnWithOutputFiles(
    _ argv: [String], environment: [String: String], stdoutPath: String, stderrPath: String
) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    // The test process holds servers' sockets that are not close-on-exec; the child must not keep them open.
    try closeInheritedDescriptors(&actions)
    var attributes = posix_spawnattr_t()
    initializeWithDefaultSignals(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    let cArguments = argv.map { strdup($0) } + [nil]
    let cEnvironment = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        cArguments.forEach { free($0) }
        cEnvironment.forEach { free($0) }
    }
    var pid: pid_t = 0
    let status = posix_spawnp(&pid, argv[0], &actions, &attributes, cArguments, cEnvironment)
    guard status == 0 else { throw TestSupportError("cannot start \(argv[0]): \(String(cString: strerror(status)))") }
    return pid
}

/// A `waitpid` status as shells report it: the exit status, or 128 + the signal that ended the process.
public func shellExitStatus(fromWaitStatus raw: Int32) -> Int32 {
    let signal = raw & 0x7f
    return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
}
