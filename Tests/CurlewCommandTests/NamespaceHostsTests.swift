import CurlewTestSupport
import Foundation
import Glibc
import Testing

/// The test support's hosts of their own (network namespaces), which SlurmShardedRunTests runs bench shards on:
/// each client reaches the server from its own address, and nothing is left behind, even by a test process that died.
@Suite(.enabled(if: NamespaceHosts.unavailableReason == nil, "network namespaces need root and iproute2's ip"))
struct NamespaceHostsTests {
    @Test func clientsReachTheServerFromTheirOwnAddressesAndRemoveLeavesNothing() async throws {
        // A namespace left by a test process that is gone (named after its PID) is swept by the next create.
        let exited = try spawnWithOutputFiles(
            ["/bin/true"], environment: [:], stdoutPath: "/dev/null", stderrPath: "/dev/null")
        var status: Int32 = 0
        #expect(waitpid(exited, &status, 0) == exited)
        let abandoned = "curlew-t\(exited)-abandoned-srv"
        let added = try await CurlewBinary.runProgram(["ip", "netns", "add", abandoned])
        #expect(added.status == 0, "\(added.stderr)")

        let hosts = try await NamespaceHosts.create(clients: 2)
        #expect(!NamespaceHosts.exists(abandoned))
        try await hosts.withNginx { nginx in
            for index in 0..<2 {
                let output = try await CurlewBinary.runProgram(
                    hosts.execPrefix(client: index) + [
                        "curl", "-sS", "--max-time", "10", nginx.baseURL + "/hits/namespace-test",
                    ])
                #expect(output.status == 0 && output.stdout == "hit\n", "\(output.stderr)")
            }
            let log = try String(contentsOfFile: nginx.hitsLogPath, encoding: .utf8)
            #expect(
                log.split(separator: "\n").map { String($0.split(separator: " ")[0]) } == hosts.clientAddresses,
                "\(log)")
        }
        #expect(NamespaceHosts.ownNamespaces().isEmpty, "left behind: \(NamespaceHosts.ownNamespaces())")
        #expect(([hosts.server] + hosts.clients).allSatisfy { !NamespaceHosts.exists($0) })
    }
}
