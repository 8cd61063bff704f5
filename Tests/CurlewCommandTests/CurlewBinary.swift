import CurlewTestSupport
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The result of one run of the `curlew` executable.
struct CommandOutput: Sendable {
    /// The exit status, or 128 + signal number when a signal ended it (as shells report it).
    let status: Int32
    let stdout: String
    let stderr: String

    /// The last stdout line parsed as a JSON object (what `--json` prints).
    func json() throws -> [String: Any] {
        guard let line = stdout.split(separator: "\n").last,
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        else { throw TestSupportError("no JSON object on stdout:\n\(stdout)\nstderr:\n\(stderr)") }
        return object
    }
}

/// The built `curlew` executable, run as a child process with stdout and stderr in files (never a terminal).
struct CurlewBinary {
    /// `CURLEW_BINARY`, or `curlew` next to the test bundle (`swift build --build-tests` and `swift test` build both
    /// into the same folder, whatever the scratch path).
    static func path() throws -> String {
        if let override = ProcessInfo.processInfo.environment["CURLEW_BINARY"], !override.isEmpty { return override }
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { throw TestSupportError("cannot read /proc/self/exe") }
        var directory = URL(
            fileURLWithPath: String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        )
        .deletingLastPathComponent()
        // The bundle may be a folder (`*.xctest/…`) on some toolchains.
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("curlew").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw TestSupportError(
            "the curlew executable was not found next to the test bundle; build it (`swift build --build-tests`) or set CURLEW_BINARY"
        )
    }

    /// Starts `curlew ARGUMENTS`, optionally behind a wrapper such as `setpriv …`.
    /// - Parameter environment: variables added to (or replacing) the test process's own.
    static func start(
        _ arguments: [String], wrapper: [String] = [], environment: [String: String] = [:]
    ) throws -> RunningCommand {
        let directory = NSTemporaryDirectory() + "curlew-command-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let stdoutPath = directory + "/stdout"
        let stderrPath = directory + "/stderr"
        let argv = wrapper + [try path()] + arguments
        let pid = try spawn(argv, stdoutPath: stdoutPath, stderrPath: stderrPath, environment: environment)
        return RunningCommand(pid: pid, directory: directory, stdoutPath: stdoutPath, stderrPath: stderrPath)
    }

    /// Runs another program (an independent checker such as gzip) to the end.
    static func runProgram(_ argv: [String], timeout: Duration = .seconds(60)) async throws -> CommandOutput {
        let directory = NSTemporaryDirectory() + "curlew-command-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let pid = try spawn(argv, stdoutPath: directory + "/stdout", stderrPath: directory + "/stderr")
        return try await RunningCommand(
            pid: pid, directory: directory, stdoutPath: directory + "/stdout", stderrPath: directory + "/stderr"
        )
        .finish(timeout: timeout)
    }

    /// Runs `curlew ARGUMENTS` to the end (at most `timeout`).
    static func run(
        _ arguments: [String], wrapper: [String] = [], environment: [String: String] = [:],
        timeout: Duration = .seconds(60)
    ) async throws -> CommandOutput {
        try await start(arguments, wrapper: wrapper, environment: environment).finish(timeout: timeout)
    }

    private static func spawn(
        _ argv: [String], stdoutPath: String, stderrPath: String, environment extra: [String: String] = [:]
    ) throws -> pid_t {
        let environment = ProcessInfo.processInfo.environment
            .filter {
                !["http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"].contains($0.key)
            }
            .merging(extra) { $1 }
        return try spawnWithOutputFiles(argv, environment: environment, stdoutPath: stdoutPath, stderrPath: stderrPath)
    }
}

/// A started `curlew` process.
final class RunningCommand: Sendable {
    let pid: pid_t
    let directory: String
    let stdoutPath: String
    let stderrPath: String
    /// Set once `finish` has reaped the process: its PID may then belong to another process, which no signal or
    /// look at `/proc` may reach.
    private let reaped = Mutex(false)

    init(pid: pid_t, directory: String, stdoutPath: String, stderrPath: String) {
        self.pid = pid
        self.directory = directory
        self.stdoutPath = stdoutPath
        self.stderrPath = stderrPath
    }

    /// Sends `signal`, unless the process has been reaped (so a `defer` may kill it whatever happened).
    func signal(_ signal: Int32) {
        guard !reaped.withLock({ $0 }) else { return }
        kill(pid, signal)
    }

    /// Whether the process is still running (it is not reaped here, so `finish` still gets its status).
    var isRunning: Bool {
        guard !reaped.withLock({ $0 }) else { return false }
        // The state letter follows the command name's closing parenthesis; Z is an exited, unreaped child.
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    var currentStderr: String {
        (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
    }

    /// Waits for the exit (polling without blocking a thread of the cooperative pool), killing the process
    /// if it outlives `timeout`.
    func finish(timeout: Duration = .seconds(60)) async throws -> CommandOutput {
        var rawStatus: Int32 = 0
        do {
            try await waitUntil(timeout: timeout, pollInterval: .milliseconds(5), "curlew to exit") {
                waitpid(self.pid, &rawStatus, WNOHANG) == self.pid
            }
            reaped.withLock { $0 = true }
        } catch {
            kill(pid, SIGKILL)
            _ = waitpid(pid, &rawStatus, 0)
            reaped.withLock { $0 = true }
            throw TestSupportError("curlew did not exit within \(timeout); stderr:\n\(currentStderr)")
        }
        let output = CommandOutput(
            status: shellExitStatus(fromWaitStatus: rawStatus),
            stdout: (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "",
            stderr: currentStderr)
        try? FileManager.default.removeItem(atPath: directory)
        return output
    }
}
