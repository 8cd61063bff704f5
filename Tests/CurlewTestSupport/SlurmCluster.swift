import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A real Slurm cluster of one node on 127.0.0.1: `munged`, `slurmctld` and `slurmd` from Debian's packages, each in
/// the foreground under `Tests/servers/supervise.py`, so they die with the test process however it ends.
///
/// Everything lives in a fresh scratch directory (``directory``): the MUNGE key and socket, `slurm.conf`, the
/// controller's state and the node's spool. The daemons talk over two TCP ports of their own on 127.0.0.1 and MUNGE
/// over its own socket, so the cluster touches nothing system-wide (no `/etc/slurm`, no `/run/munge`), and two test
/// processes can each run one.
///
/// The node is this machine (named after `hostname -s`, with its CPUs), and its partition (`test`, the default)
/// oversubscribes every CPU ``jobsPerCPU`` times (`OverSubscribe=FORCE`): a four-task array of one-CPU tasks runs all
/// four at once on a two-core machine, as it would on four nodes. There is no accounting (`sacct` knows nothing):
/// ``tasks(ofJob:)`` reads `scontrol show job`, which keeps finished jobs for an hour (`MinJobAge`).
///
/// Jobs inherit the submitting environment (`sbatch --export=ALL`), which is the test process's, less any `SLURM_*`
/// or `SBATCH_*` variable of an outer Slurm job, plus `SLURM_CONF` and what the caller adds.
///
/// Needs `apt-get install slurm-wlm munge` (`make test` installs both).
public final class SlurmCluster: Sendable {
    /// How many one-CPU jobs share a CPU at most (`OverSubscribe=FORCE:8`).
    public static let jobsPerCPU = 8
    /// The partition every job lands in unless it names another (there is no other).
    public static let partition = "test"

    /// The node's name, `hostname -s` (`slurmctld` only runs where `SlurmctldHost` names the machine).
    public let nodeName: String
    /// The CPUs the node declares: the machine's.
    public let cpus: Int
    /// The generated `slurm.conf`; every client command needs it as `SLURM_CONF` (see ``environment``).
    public let configPath: String
    /// The cluster's scratch directory; ``makeJobDirectory(_:)`` makes folders for jobs below it.
    public let directory: String
    /// `SlurmctldPort` and `SlurmdPort`, on 127.0.0.1.
    public let controllerPort: Int
    public let nodePort: Int
    private let munged: SupervisedProcess
    private let controller: SupervisedProcess
    private let node: SupervisedProcess
    private let stopped = Atomic<Bool>(false)

    /// What a Slurm client (`sbatch`, `squeue`, `scontrol`, `scancel`, `sinfo`) needs to reach this cluster.
    public var environment: [String: String] { ["SLURM_CONF": self.configPath] }

    /// How many one-CPU tasks can run at the same time.
    public var taskSlots: Int { self.cpus * Self.jobsPerCPU }

    private init(
        nodeName: String, cpus: Int, configPath: String, directory: String, ports: (Int, Int),
        munged: SupervisedProcess, controller: SupervisedProcess, node: SupervisedProcess
    ) {
        self.nodeName = nodeName
        self.cpus = cpus
        self.configPath = configPath
        self.directory = directory
        self.controllerPort = ports.0
        self.nodePort = ports.1
        self.munged = munged
        self.controller = controller
        self.node = node
    }

    private static let startup = StartOnce { try await SlurmCluster.start() }

    /// The process-wide cluster, started on the first call (a second or two); concurrent callers share one start,
    /// and a failed start is rethrown to every later caller. Do not ``stop()`` it: it lives until the process ends.
    public static func shared() async throws -> SlurmCluster {
        try await startup.value
    }

    // MARK: - Jobs

    /// A fresh folder for one test's scripts and outputs (world-readable, below ``directory``).
    public func makeJobDirectory(_ hint: String) throws -> String {
        let path = "\(self.directory)/jobs/\(hint)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        return path
    }

    /// Writes an executable batch script (`text` should start with `#!/bin/bash`) and returns its path.
    public func writeScript(_ text: String, named name: String, in directory: String) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        return path
    }

    /// `sbatch --parsable ARGUMENTS SCRIPT SCRIPT-ARGUMENTS`, returning the job's ID (an array's: `SLURM_ARRAY_JOB_ID`).
    ///
    /// - Parameters:
    ///   - script: the path of the batch script.
    ///   - arguments: `sbatch` options, e.g. `["--array=0-3", "--dependency=afterok:12", "--output=…"]`. With
    ///     `--wait`, this returns when the job has ended, and throws if it failed (sbatch exits with its status).
    ///   - environment: variables the job gets on top of the test process's (sbatch's `--export=ALL`).
    ///   - workingDirectory: where sbatch runs, hence the job's working directory and where `slurm-%j.out` lands
    ///     (default: the script's folder).
    ///   - timeout: for sbatch itself; with `--wait`, for the whole job (the job is cancelled when it passes).
    @discardableResult
    public func submit(
        script: String, arguments: [String] = [], scriptArguments: [String] = [], environment: [String: String] = [:],
        workingDirectory: String? = nil, timeout: Duration = .seconds(60)
    ) async throws -> Int {
        let folder = workingDirectory ?? (script as NSString).deletingLastPathComponent
        let output = try await self.run(
            ["sbatch", "--parsable"] + arguments + [script] + scriptArguments, environment: environment,
            workingDirectory: folder, timeout: timeout)
        let jobID = output.stdout.split(separator: "\n").first.flatMap { Int($0.split(separator: ";")[0]) }
        guard let jobID else {
            throw TestSupportError(
                "sbatch \(arguments.joined(separator: " ")) \(script) failed: \(output)\n\(self.controller.stderrTail(maxBytes: 3000))"
            )
        }
        guard output.status == 0 else {
            // --wait: the job failed or outlived the timeout; leave nothing of it running.
            _ = try? await self.run(["scancel", String(jobID)])
            let tasks = (try? await self.tasks(ofJob: jobID)) ?? []
            let what =
                output.timedOut ? "did not end within \(timeout)" : "failed (sbatch exit status \(output.status))"
            throw TestSupportError(
                "sbatch \(arguments.joined(separator: " ")) \(script): job \(jobID) \(what):\n\(self.describe(tasks))")
        }
        return jobID
    }

    /// The job's records in `scontrol show job`: one per array task that has started (or finished), one for the
    /// still pending rest of an array (its ``SlurmTask/arrayTaskID`` is a range such as `2-3`), one for a plain job.
    public func tasks(ofJob jobID: Int) async throws -> [SlurmTask] {
        let output = try await self.run(["scontrol", "--oneliner", "show", "job", String(jobID)])
        guard output.status == 0 else {
            throw TestSupportError(
                "scontrol show job \(jobID) failed (a job is forgotten an hour after it ends): \(output)")
        }
        return SlurmTask.parse(scontrolOneliner: output.stdout).sorted {
            ($0.arrayTaskIndex ?? -1, $0.jobID) < ($1.arrayTaskIndex ?? -1, $1.jobID)
        }
    }

    /// Polls the job (every 100 ms) until `condition` holds for its records; the timeout's error lists each task's
    /// state and reason and the end of its output.
    @discardableResult
    public func waitForTasks(
        ofJob jobID: Int, timeout: Duration, _ description: String, until condition: ([SlurmTask]) -> Bool
    ) async throws -> [SlurmTask] {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let tasks = try await self.tasks(ofJob: jobID)
            if condition(tasks) { return tasks }
            if clock.now >= deadline {
                throw TestSupportError(
                    "job \(jobID): timed out after \(timeout) waiting for \(description):\n\(self.describe(tasks))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Waits until the job, every task of an array included, has ended (whether it completed, failed or was
    /// cancelled: check ``SlurmTask/state``), and returns its tasks in array order.
    @discardableResult
    public func waitForJob(_ jobID: Int, timeout: Duration = .seconds(60)) async throws -> [SlurmTask] {
        try await self.waitForTasks(ofJob: jobID, timeout: timeout, "every task to end") { tasks in
            !tasks.isEmpty && tasks.allSatisfy(\.isFinished)
        }
    }

    /// `scancel [--signal=SIGNAL] [--batch] JOB[_TASK]`: the whole job, or one task of an array. Without a signal the
    /// job ends `CANCELLED` (SIGTERM, then SIGKILL after `KillWait`, 5 s); with one, the job's processes get it and
    /// the job ends as they do.
    ///
    /// `signal: "KILL"` alone is no `kill -9`: slurmctld takes it as a plain cancel, so the processes get SIGTERM
    /// first and the job ends `CANCELLED` with exit `0:15`. With `batchStep: true` (`--batch`) slurmd sends the
    /// signal itself to the batch script's process (the program a script `exec`s): SIGKILL then kills it as the
    /// OOM killer would, and the job ends `FAILED` with exit `0:9`.
    public func cancel(jobID: Int, arrayTask: Int? = nil, signal: String? = nil, batchStep: Bool = false) async throws {
        let target = arrayTask.map { "\(jobID)_\($0)" } ?? String(jobID)
        let output = try await self.run(
            ["scancel"] + (signal.map { ["--signal=\($0)"] } ?? []) + (batchStep ? ["--batch"] : []) + [target])
        guard output.status == 0 else { throw TestSupportError("scancel \(target) failed: \(output)") }
    }

    /// Runs an ended job (or one task of an array) again under the same IDs: `SLURM_ARRAY_JOB_ID`, the task ID and
    /// `SLURM_ARRAY_TASK_COUNT` stay, `SLURM_RESTART_COUNT` goes up. A running one is killed first.
    ///
    /// `scontrol requeue` holds a job back for the credential lifetime (`cred_expire`, 120 s): slurmd revoked the
    /// job's credential when it killed the job, and refuses ("Job N already killed, do not launch batch job") a new
    /// one that is not newer, in whole seconds, than that revocation. This waits until the old run is gone, then
    /// for the next second, and lets the job start at once (`scontrol update StartTime=now`): under a second.
    ///
    /// A job that depends on this one with `afterok` and was marked `DependencyNeverSatisfied` when this one failed
    /// stays so; give it its dependency anew (`scontrol update JobId=… Dependency=afterok:…`) or let it depend with
    /// `afterany`.
    public func requeue(jobID: Int, arrayTask: Int? = nil, timeout: Duration = .seconds(30)) async throws {
        let target = arrayTask.map { "\(jobID)_\($0)" } ?? String(jobID)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        // A job still COMPLETING (its processes are being reaped) cannot be requeued yet.
        while true {
            let output = try await self.run(["scontrol", "requeue", target])
            if output.status == 0 { break }
            guard clock.now < deadline else {
                throw TestSupportError("scontrol requeue \(target) failed for \(timeout): \(output)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        // PENDING (not COMPLETING or REQUEUED): slurmd has killed the old run, and revoked its credential before that.
        var pendingSince = time(nil)
        while true {
            let output = try await self.run(["scontrol", "--oneliner", "show", "job", target])
            if SlurmTask.parse(scontrolOneliner: output.stdout).first?.state == "PENDING" {
                pendingSince = time(nil)
                break
            }
            guard clock.now < deadline else {
                throw TestSupportError("job \(target) was not pending again within \(timeout): \(output)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        try await waitUntil(
            timeout: .seconds(2), pollInterval: .milliseconds(20),
            "the second after job \(target)'s credential was revoked"
        ) {
            time(nil) > pendingSince
        }
        let update = try await self.run(["scontrol", "update", "JobId=\(target)", "StartTime=now"])
        guard update.status == 0 else {
            throw TestSupportError("scontrol update JobId=\(target) StartTime=now failed: \(update)")
        }
    }

    /// Runs a client command (`squeue`, `scontrol`, `sbatch`, `bash deploy/slurm/…`) against this cluster, with
    /// ``environment`` and `environment` on top of the test process's, and returns what it printed whatever its
    /// exit status. Throws only if it cannot start; one that outlives `timeout` is killed (``SlurmCommandOutput/timedOut``).
    public func run(
        _ arguments: [String], environment: [String: String] = [:], workingDirectory: String? = nil,
        timeout: Duration = .seconds(30)
    ) async throws -> SlurmCommandOutput {
        try await SlurmClient.run(
            arguments, environment: SlurmClient.environment(adding: self.environment.merging(environment) { $1 }),
            workingDirectory: workingDirectory, scratch: self.directory, timeout: timeout)
    }

    /// Cancels every job, waits (at most 15 s) for their processes to end, then stops `slurmd`, `slurmctld` and
    /// `munged` by PID and removes ``directory``. For a cluster from ``start()``; the shared one is stopped when the
    /// test process exits.
    public func stop() async {
        guard !self.stopped.exchange(true, ordering: .relaxed) else { return }
        if let queue = try? await self.run(["squeue", "--noheader", "--format=%A"]), queue.status == 0 {
            let jobs = Set(queue.stdout.split(separator: "\n").map { String($0) })
            if !jobs.isEmpty {
                _ = try? await self.run(["scancel"] + jobs.sorted())
                try? await waitUntil(timeout: .seconds(15), pollInterval: .milliseconds(100), "every job to end") {
                    let left = try await self.run(["squeue", "--noheader", "--format=%A"])
                    return left.status == 0 && left.stdout.isEmpty
                }
            }
        }
        let daemons = [self.node, self.controller, self.munged]
        _ = try? await offCooperativePool {
            for daemon in daemons { daemon.terminate() }
        }
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    /// The daemons' own PIDs (`munged`, `slurmctld`, `slurmd`, from their pid files; the supervisors are their
    /// parents), to check that ``stop()`` left none behind.
    public func daemonProcessIDs() -> [String: Int32] {
        let files = ["munged": "munge/munged.pid", "slurmctld": "slurmctld.pid", "slurmd": "slurmd.pid"]
        return files.compactMapValues { file in
            (try? String(contentsOfFile: "\(self.directory)/\(file)", encoding: .utf8))
                .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
    }

    /// One line per task (state, reason, exit status) with the end of its output, for failure messages.
    public func describe(_ tasks: [SlurmTask]) -> String {
        guard !tasks.isEmpty else { return "(no job records)\n" + self.controller.stderrTail(maxBytes: 3000) }
        let lines = tasks.map { task in
            guard let path = task.standardOutput, let data = FileManager.default.contents(atPath: path), !data.isEmpty
            else {
                return "  \(task)"
            }
            let tail = String(decoding: data.suffix(1500), as: UTF8.self).replacingOccurrences(of: "\n", with: "\n    ")
            return "  \(task)\n    output (\(path)):\n    \(tail)"
        }.joined(separator: "\n")
        // A task that failed before its script ran says why only in slurmd's log.
        let failed = tasks.contains { $0.isFinished && $0.state != "COMPLETED" && $0.state != "CANCELLED" }
        return failed ? lines + "\n" + self.node.stderrTail(maxBytes: 3000) : lines
    }

    // MARK: - Start-up

    /// A cluster of its own, for a test that stops or breaks it; ``stop()`` it. Most tests want ``shared()``.
    public static func start() async throws -> SlurmCluster {
        let executables = try SlurmExecutables.locate()
        let directory = try TemporaryDirectory.make(prefix: "curlew-slurm")
        do {
            return try await self.start(executables, in: directory)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    private static func start(_ executables: SlurmExecutables, in directory: String) async throws -> SlurmCluster {
        let files = FileManager.default
        // munged refuses a socket below a directory that others cannot search ("execute permissions for all
        // required"); mkdtemp made this one 0700.
        try files.setAttributes([.posixPermissions: 0o711], ofItemAtPath: directory)
        for (subdirectory, mode) in [
            ("munge", 0o711), ("state", 0o700), ("spool", 0o755), ("jobs", 0o755), ("commands", 0o700),
        ] {
            try files.createDirectory(
                atPath: directory + "/" + subdirectory, withIntermediateDirectories: false,
                attributes: [.posixPermissions: mode])
        }
        let munge = try await self.startMunge(executables.munged, in: directory)
        let nodeName = Self.shortHostName()
        let cpus = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

        // The daemons cannot be handed listening sockets, so ports are picked up front; another process can take
        // one in between, hence the retry on "Address already in use" (as for nginx).
        let attempts = 5
        for attempt in 1...attempts {
            let ports = try Self.twoFreePorts()
            let configPath = directory + "/slurm.conf"
            try SlurmConfig.text(
                directory: directory, nodeName: nodeName, cpus: cpus, ports: ports, mungeSocket: munge.socket
            )
            .write(toFile: configPath, atomically: true, encoding: .utf8)
            let environment = "SLURM_CONF=" + configPath
            let controller = try await SupervisedProcess.launch(
                name: "slurmctld", program: ["env", environment, executables.slurmctld, "-D"], listen: 0,
                stderrPath: directory + "/slurmctld-\(attempt).log", cleanupDirectory: nil)
            let node: SupervisedProcess
            do {
                node = try await SupervisedProcess.launch(
                    name: "slurmd", program: ["env", environment, executables.slurmd, "-D", "-N", nodeName], listen: 0,
                    stderrPath: directory + "/slurmd-\(attempt).log", cleanupDirectory: nil)
            } catch {
                _ = try? await offCooperativePool { controller.terminate() }
                throw error
            }
            let cluster = SlurmCluster(
                nodeName: nodeName, cpus: cpus, configPath: configPath, directory: directory, ports: ports,
                munged: munge.process, controller: controller, node: node)
            do {
                try await cluster.waitUntilIdle(timeout: .seconds(60))
                return cluster
            } catch {
                _ = try? await offCooperativePool {
                    node.terminate()
                    controller.terminate()
                }
                let portTaken = [controller, node].contains { $0.stderrTail().contains("Address already in use") }
                if portTaken && attempt < attempts { continue }
                _ = try? await offCooperativePool { munge.process.terminate() }
                throw error
            }
        }
        throw TestSupportError("slurm: could not bind free ports after \(attempts) attempts")
    }

    private static func startMunge(
        _ munged: String, in directory: String
    ) async throws -> (process: SupervisedProcess, socket: String) {
        let keyPath = directory + "/munge/munge.key"
        // MUNGE wants 1 KiB of random bytes, readable by its owner alone.
        var generator = SystemRandomNumberGenerator()
        let key = Data((0..<1024).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        guard FileManager.default.createFile(atPath: keyPath, contents: key, attributes: [.posixPermissions: 0o400])
        else {
            throw TestSupportError("cannot write the MUNGE key \(keyPath)")
        }
        let socket = directory + "/munge/munge.socket"
        guard socket.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw TestSupportError(
                "the MUNGE socket path \(socket) is too long for a unix socket; set TMPDIR to a shorter folder")
        }
        let process = try await SupervisedProcess.launch(
            name: "munged",
            program: [
                munged, "--foreground", "--socket=" + socket, "--key-file=" + keyPath,
                "--pid-file=\(directory)/munge/munged.pid",
                "--log-file=\(directory)/munge/munged.log", "--seed-file=\(directory)/munge/munged.seed",
                "--num-threads=2",
            ],
            listen: 0, stderrPath: directory + "/munged.log",
            // The cluster's directory goes when the test process does (munged is the last daemon to stop).
            cleanupDirectory: directory)
        do {
            try await process.waitUntilReady(timeout: .seconds(30)) { UnixSocketProbe.acceptsConnections(path: socket) }
        } catch let exited as ServerExited {
            throw TestSupportError("\(exited)\nhint: `apt-get install munge`")
        }
        return (process, socket)
    }

    /// Waits until `sinfo` reports the node idle, failing early with a daemon's stderr if one exits.
    private func waitUntilIdle(timeout: Duration) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var last = ""
        while true {
            for daemon in [self.munged, self.controller, self.node] where daemon.hasExited {
                throw TestSupportError(
                    "\(daemon.name) exited while the Slurm cluster started.\n\(daemon.stderrTail())\nslurm.conf: \(self.configPath)"
                )
            }
            let output = try await self.run(["sinfo", "--noheader", "--format=%t"], timeout: .seconds(10))
            last = "\(output)"
            if output.status == 0 && output.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "idle" {
                return
            }
            if clock.now >= deadline {
                throw TestSupportError(
                    "the Slurm node did not become idle within \(timeout); last sinfo: \(last)\n\(self.controller.stderrTail(maxBytes: 3000))\n\(self.node.stderrTail(maxBytes: 3000))"
                )
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    private static func shortHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.split(separator: ".").first.map(String.init) ?? "localhost"
    }

    private static func twoFreePorts() throws -> (Int, Int) {
        let first = try FreePort.allocate()
        var second = try FreePort.allocate()
        while second == first { second = try FreePort.allocate() }
        return (first, second)
    }
}

/// One record of `scontrol show job`: a plain job, one task of an array, or an array's still pending tasks.
public struct SlurmTask: Sendable, Equatable, CustomStringConvertible {
    /// This record's own job ID (an array task has one of its own besides the array's).
    public let jobID: Int
    /// `SLURM_ARRAY_JOB_ID`, for a task of an array.
    public let arrayJobID: Int?
    /// The task ID, or for the pending rest of an array a set such as `1-3` or `0,2`.
    public let arrayTaskID: String?
    /// `PENDING`, `RUNNING`, `COMPLETING`, `COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`, …
    public let state: String
    /// Why it is pending or how it ended: `None`, `Dependency`, `DependencyNeverSatisfied`, `BeginTime`, …
    public let reason: String
    /// The exit status of the batch script (`ExitCode=STATUS:SIGNAL`), and the signal that ended it, if one did.
    public let exitStatus: Int
    public let exitSignal: Int
    /// How often the job was requeued (`SLURM_RESTART_COUNT` in its environment).
    public let restarts: Int
    /// The file the batch script's stdout goes to.
    public let standardOutput: String?

    /// The task ID as a number (nil for a plain job or a pending range).
    public var arrayTaskIndex: Int? { self.arrayTaskID.flatMap { Int($0) } }

    /// The states a job does not leave (unless requeued).
    public static let finishedStates: Set<String> = [
        "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
        "OUT_OF_MEMORY",
    ]

    public var isFinished: Bool { Self.finishedStates.contains(self.state) }

    public var description: String {
        let name = self.arrayJobID.map { "\($0)_\(self.arrayTaskID ?? "?") (job \(self.jobID))" } ?? "job \(self.jobID)"
        return
            "\(name): \(self.state), reason \(self.reason), exit \(self.exitStatus):\(self.exitSignal), restarts \(self.restarts)"
    }

    /// Parses `scontrol --oneliner show job` (one `Key=Value …` line per record). Values may hold spaces (a command
    /// line, a folder); every field read here comes before those, and the first occurrence of a key wins.
    static func parse(scontrolOneliner text: String) -> [SlurmTask] {
        text.split(separator: "\n").compactMap { line in
            var fields: [Substring: Substring] = [:]
            for token in line.split(separator: " ") {
                guard let equals = token.firstIndex(of: "=") else { continue }
                let key = token[..<equals]
                if fields[key] == nil { fields[key] = token[token.index(after: equals)...] }
            }
            guard let jobID = fields["JobId"].flatMap({ Int($0) }), let state = fields["JobState"] else { return nil }
            let exit = (fields["ExitCode"] ?? "0:0").split(separator: ":").map { Int($0) ?? 0 }
            return SlurmTask(
                jobID: jobID,
                arrayJobID: fields["ArrayJobId"].flatMap { Int($0) },
                arrayTaskID: fields["ArrayTaskId"].map(String.init),
                state: String(state),
                reason: fields["Reason"].map(String.init) ?? "",
                exitStatus: exit.first ?? 0,
                exitSignal: exit.count > 1 ? exit[1] : 0,
                restarts: fields["Restarts"].flatMap { Int($0) } ?? 0,
                standardOutput: fields["StdOut"].map(String.init))
        }
    }
}

/// What a client command printed and how it ended.
public struct SlurmCommandOutput: Sendable, CustomStringConvertible {
    public let arguments: [String]
    /// The exit status, or 128 + the signal that ended it.
    public let status: Int32
    public let stdout: String
    public let stderr: String
    /// The command outlived its timeout and was killed.
    public let timedOut: Bool

    public var description: String {
        "`\(self.arguments.joined(separator: " "))` exited \(self.status)\(self.timedOut ? " (killed at its timeout)" : "")"
            + (self.stdout.isEmpty ? "" : "\nstdout: \(self.stdout)")
            + (self.stderr.isEmpty ? "" : "\nstderr: \(self.stderr)")
    }
}

/// The cluster's `slurm.conf`. What matters, and why:
/// - `SlurmctldHost=NAME(127.0.0.1)`, `NodeAddr=127.0.0.1` and ports of their own: loopback only, beside anything else.
/// - `AuthInfo=socket=…`: clients and daemons reach this cluster's munged, not a system one.
/// - `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`: no cgroups to set up (or to have, in a container).
/// - `SelectType=select/cons_tres` with `CR_Core` and `OverSubscribe=FORCE:8`: jobs get cores, and up to eight jobs
///   share each one, so an array of four one-CPU (or two-CPU, or `--exclusive`) tasks runs at once on two cores. The
///   node declares the CPUs it has: declaring more would need `SlurmdParameters=config_overrides` and still cap
///   parallelism at the made-up count.
/// - Pid files, state and spool in the scratch directory, so no two clusters share one.
/// - `MinJobAge=3600`: without accounting, `scontrol show job` is the only record of a finished job.
/// - `KillWait=5`: a cancelled job gets SIGKILL 5 s after SIGTERM (30 s by default).
enum SlurmConfig {
    static func text(directory: String, nodeName: String, cpus: Int, ports: (Int, Int), mungeSocket: String) -> String {
        """
        # Generated by CurlewTestSupport (SlurmCluster) for one test process; deleted when that process exits.
        ClusterName=curlew-test
        SlurmctldHost=\(nodeName)(127.0.0.1)
        SlurmctldPort=\(ports.0)
        SlurmdPort=\(ports.1)
        SlurmUser=root
        SlurmdUser=root
        AuthType=auth/munge
        CredType=cred/munge
        AuthInfo=socket=\(mungeSocket)
        StateSaveLocation=\(directory)/state
        SlurmdSpoolDir=\(directory)/spool
        SlurmctldPidFile=\(directory)/slurmctld.pid
        SlurmdPidFile=\(directory)/slurmd.pid
        SlurmctldDebug=info
        SlurmdDebug=info
        ProctrackType=proctrack/linuxproc
        TaskPlugin=task/none
        SelectType=select/cons_tres
        SelectTypeParameters=CR_Core
        SchedulerType=sched/backfill
        MpiDefault=none
        SwitchType=switch/none
        AccountingStorageType=accounting_storage/none
        JobAcctGatherType=jobacct_gather/none
        JobCompType=jobcomp/none
        ReturnToService=2
        MinJobAge=3600
        KillWait=5
        InactiveLimit=0
        NodeName=\(nodeName) NodeAddr=127.0.0.1 CPUs=\(cpus) RealMemory=1000 State=UNKNOWN
        PartitionName=\(SlurmCluster.partition) Nodes=\(nodeName) Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:\(SlurmCluster.jobsPerCPU)

        """
    }
}

/// Where Debian's `slurm-wlm` and `munge` put the daemons.
struct SlurmExecutables {
    let munged: String
    let slurmctld: String
    let slurmd: String

    static func locate() throws -> SlurmExecutables {
        let path =
            (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init) + [
                "/usr/sbin", "/usr/bin", "/sbin",
            ]
        func find(_ name: String, package: String) throws -> String {
            for folder in path where FileManager.default.isExecutableFile(atPath: folder + "/" + name) {
                return folder + "/" + name
            }
            throw TestSupportError(
                "\(name) not found: `apt-get install \(package)` (make test installs slurm-wlm and munge)")
        }
        for client in ["sbatch", "squeue", "scontrol", "scancel", "sinfo"] {
            _ = try find(client, package: "slurm-wlm")
        }
        return SlurmExecutables(
            munged: try find("munged", package: "munge"),
            slurmctld: try find("slurmctld", package: "slurm-wlm"),
            slurmd: try find("slurmd", package: "slurm-wlm"))
    }
}

/// Runs Slurm's client commands with stdout and stderr in files, waiting without blocking a thread.
enum SlurmClient {
    /// The test process's environment less what would point a client elsewhere or change its output (an outer
    /// Slurm job's `SLURM_*`, `SBATCH_*`, `SQUEUE_FORMAT`…), plus `extra`.
    static func environment(adding extra: [String: String]) -> [String: String] {
        let prefixes = ["SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SCANCEL_", "SCONTROL_"]
        return ProcessInfo.processInfo.environment
            .filter { variable in !prefixes.contains { variable.key.hasPrefix($0) } }
            .merging(extra) { $1 }
    }

    static func run(
        _ arguments: [String], environment: [String: String], workingDirectory: String?, scratch: String,
        timeout: Duration
    ) async throws -> SlurmCommandOutput {
        let base = "\(scratch)/commands/\(UUID().uuidString)"
        defer {
            try? FileManager.default.removeItem(atPath: base + ".out")
            try? FileManager.default.removeItem(atPath: base + ".err")
        }
        // `env -C` rather than posix_spawn_file_actions_addchdir_np, which Swift's Glibc module does not import.
        let argv = (workingDirectory.map { ["env", "-C", $0] } ?? []) + arguments
        let pid: pid_t
        do {
            pid = try spawnWithOutputFiles(
                argv, environment: environment, stdoutPath: base + ".out", stderrPath: base + ".err")
        } catch {
            throw TestSupportError("\(error) (Slurm's clients: `apt-get install slurm-wlm`)")
        }
        var raw: Int32 = 0
        var timedOut = false
        do {
            try await waitUntil(
                timeout: timeout, pollInterval: .milliseconds(5), "`\(arguments.joined(separator: " "))` to exit"
            ) {
                waitpid(pid, &raw, WNOHANG) == pid
            }
        } catch {
            kill(pid, SIGKILL)
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            timedOut = true
        }
        return SlurmCommandOutput(
            arguments: arguments,
            status: shellExitStatus(fromWaitStatus: raw),
            stdout: (try? String(contentsOfFile: base + ".out", encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: base + ".err", encoding: .utf8)) ?? "",
            timedOut: timedOut)
    }
}

/// Whether something accepts connections on a unix socket (munged's), without blocking for long.
enum UnixSocketProbe {
    static func acceptsConnections(path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return connected == 0
    }
}
