import CurlewTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one-node Slurm cluster of the test support, which the sharding tests (`--shard`, `curlew merge`) run
/// `curlew` under: job arrays run their tasks at the same time, dependencies hold, a task can be cancelled and
/// requeued under the same IDs.
@Suite struct SlurmClusterTests {
    /// Each task records what Slurm told it and when it started, then waits (at most 20 s) until all four have
    /// started: if Slurm ran the tasks one after another the first would give up and fail.
    static let parallelTask = """
        #!/bin/bash
        set -eu
        task=$SLURM_ARRAY_TASK_ID
        started=$(date +%s.%N)
        : > "started-$task"
        for _ in $(seq 400); do
            [ "$(ls started-* | wc -l)" -ge 4 ] && break
            sleep 0.05
        done
        if [ "$(ls started-* | wc -l)" -lt 4 ]; then
            echo "task $task: only $(ls started-* | wc -l) of 4 tasks had started after 20 s" >&2
            exit 3
        fi
        echo "$task $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_JOB_ID $started $(date +%s.%N)" > "task-$task.tmp"
        mv "task-$task.tmp" "task-$task.txt"

        """

    @Test func runsTheFourTasksOfAnArrayAtTheSameTime() async throws {
        let cluster = try await SlurmCluster.shared()
        let folder = try cluster.makeJobDirectory("parallel")
        let script = try cluster.writeScript(Self.parallelTask, named: "task.sh", in: folder)

        // --wait: sbatch returns when every task has ended, and fails if one failed.
        let jobID = try await cluster.submit(
            script: script, arguments: ["--array=0-3", "--wait", "--output=slurm-%A_%a.out"], timeout: .seconds(60))

        let records = try (0..<4).map { task in
            try String(contentsOfFile: "\(folder)/task-\(task).txt", encoding: .utf8).split(separator: " ").map(
                String.init)
        }
        #expect(records.map { $0[0] } == ["0", "1", "2", "3"])
        #expect(records.allSatisfy { $0[1] == "4" }, "SLURM_ARRAY_TASK_COUNT: \(records)")
        #expect(records.allSatisfy { $0[2] == String(jobID) }, "SLURM_ARRAY_JOB_ID: \(records)")
        // Every task started before any ended: they overlapped.
        let starts = records.map { Double($0[3])! }
        let ends = records.map { Double($0[4].trimmingCharacters(in: .whitespacesAndNewlines))! }
        #expect(starts.max()! <= ends.min()!, "starts \(starts), ends \(ends)")

        let tasks = try await cluster.tasks(ofJob: jobID)
        #expect(tasks.map(\.arrayTaskIndex) == [0, 1, 2, 3])
        #expect(tasks.allSatisfy { $0.state == "COMPLETED" && $0.arrayJobID == jobID }, "\(cluster.describe(tasks))")
    }

    @Test func runsADependentJobOnlyAfterTheWholeArray() async throws {
        let cluster = try await SlurmCluster.shared()
        let folder = try cluster.makeJobDirectory("dependency")
        // The tasks hold until the test releases them (at most 30 s), so the dependent job is seen waiting.
        let task = try cluster.writeScript(
            """
            #!/bin/bash
            set -eu
            : > "running-$SLURM_ARRAY_TASK_ID"
            for _ in $(seq 600); do [ -e release ] && break; sleep 0.05; done
            [ -e release ] || { echo "never released" >&2; exit 3; }
            date +%s.%N > "done-$SLURM_ARRAY_TASK_ID"

            """, named: "task.sh", in: folder)
        let merge = try cluster.writeScript(
            """
            #!/bin/bash
            set -eu
            date +%s.%N > merge-started
            ls done-* | wc -l > merge-saw

            """, named: "merge.sh", in: folder)

        let arrayID = try await cluster.submit(script: task, arguments: ["--array=0-3"])
        let mergeID = try await cluster.submit(script: merge, arguments: ["--dependency=afterok:\(arrayID)"])
        try await cluster.waitForTasks(ofJob: arrayID, timeout: .seconds(30), "the four tasks to run") { tasks in
            tasks.count == 4 && tasks.allSatisfy { $0.state == "RUNNING" }
        }
        let waiting = try await cluster.tasks(ofJob: mergeID)
        #expect(
            waiting.map(\.state) == ["PENDING"] && waiting.map(\.reason) == ["Dependency"],
            "\(cluster.describe(waiting))")
        #expect(!FileManager.default.fileExists(atPath: folder + "/merge-started"))

        #expect(FileManager.default.createFile(atPath: folder + "/release", contents: nil))
        let array = try await cluster.waitForJob(arrayID, timeout: .seconds(30))
        #expect(array.allSatisfy { $0.state == "COMPLETED" }, "\(cluster.describe(array))")
        let merged = try await cluster.waitForJob(mergeID, timeout: .seconds(30))
        #expect(merged.map(\.state) == ["COMPLETED"], "\(cluster.describe(merged))")
        #expect(
            try String(contentsOfFile: folder + "/merge-saw", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines) == "4")
        let lastDone = try (0..<4).map {
            try Double(
                String(contentsOfFile: "\(folder)/done-\($0)", encoding: .utf8).trimmingCharacters(
                    in: .whitespacesAndNewlines))!
        }.max()!
        let mergeStart = try Double(
            String(contentsOfFile: folder + "/merge-started", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines))!
        #expect(mergeStart >= lastDone)
    }

    @Test func requeuesACancelledTaskUnderTheSameArrayIDs() async throws {
        let cluster = try await SlurmCluster.shared()
        let folder = try cluster.makeJobDirectory("requeue")
        // Task 1 hangs on its first run (at most 60 s) and is cancelled; run again, it finishes like the others.
        let task = try cluster.writeScript(
            """
            #!/bin/bash
            set -eu
            echo "$SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_JOB_ID ${SLURM_RESTART_COUNT:-0}" >> "runs-$SLURM_ARRAY_TASK_ID"
            if [ "$SLURM_ARRAY_TASK_ID" = 1 ] && [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
                : > hanging
                sleep 60
            fi

            """, named: "task.sh", in: folder)

        let arrayID = try await cluster.submit(script: task, arguments: ["--array=0-2"])
        try await waitUntil(timeout: .seconds(30), "task 1 to hang") {
            FileManager.default.fileExists(atPath: folder + "/hanging")
        }
        try await cluster.cancel(jobID: arrayID, arrayTask: 1)
        let cancelled = try await cluster.waitForJob(arrayID, timeout: .seconds(30))
        #expect(cancelled.map(\.state) == ["COMPLETED", "CANCELLED", "COMPLETED"], "\(cluster.describe(cancelled))")

        try await cluster.requeue(jobID: arrayID, arrayTask: 1)
        let rerun = try await cluster.waitForTasks(ofJob: arrayID, timeout: .seconds(30), "task 1 to run again and end")
        { tasks in
            tasks.first { $0.arrayTaskIndex == 1 }.map { $0.isFinished && $0.restarts == 1 } ?? false
        }
        #expect(rerun.map(\.state) == ["COMPLETED", "COMPLETED", "COMPLETED"], "\(cluster.describe(rerun))")
        let runs = try String(contentsOfFile: folder + "/runs-1", encoding: .utf8).split(separator: "\n")
        #expect(runs == ["1 3 \(arrayID) 0", "1 3 \(arrayID) 1"])
    }

    @Test func stopEndsTheJobsAndTheDaemonsOfAClusterOfItsOwn() async throws {
        let cluster = try await SlurmCluster.start()
        let folder = try cluster.makeJobDirectory("stop")
        let task = try cluster.writeScript(
            """
            #!/bin/bash
            echo $$ > "pid-$SLURM_ARRAY_TASK_ID.tmp"
            mv "pid-$SLURM_ARRAY_TASK_ID.tmp" "pid-$SLURM_ARRAY_TASK_ID"
            sleep 60

            """, named: "task.sh", in: folder)
        let daemons = cluster.daemonProcessIDs()
        #expect(Set(daemons.keys) == ["munged", "slurmctld", "slurmd"])
        _ = try await cluster.submit(script: task, arguments: ["--array=0-1"])
        try await waitUntil(timeout: .seconds(30), "both tasks to run") {
            (0..<2).allSatisfy { FileManager.default.fileExists(atPath: "\(folder)/pid-\($0)") }
        }
        let jobProcesses = try (0..<2).map {
            try pid_t(
                String(contentsOfFile: "\(folder)/pid-\($0)", encoding: .utf8).trimmingCharacters(
                    in: .whitespacesAndNewlines))!
        }

        await cluster.stop()
        for (name, pid) in daemons {
            #expect(kill(pid, 0) != 0 && errno == ESRCH, "\(name) (PID \(pid)) is still running")
        }
        for pid in jobProcesses {
            #expect(kill(pid, 0) != 0 && errno == ESRCH, "the job's shell (PID \(pid)) is still running")
        }
        #expect(!FileManager.default.fileExists(atPath: cluster.directory))
    }
}
