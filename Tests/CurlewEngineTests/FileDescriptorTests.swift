import CurlewEngine
import CurlewLoopbackServer
import CurlewTestSupport
import Glibc
import Testing

/// Process-wide resource counts. Other tests open descriptors too, so `make test` runs this suite in a
/// process of its own (`swift test --filter FileDescriptorTests`), serialized.
@Suite("File descriptors", .serialized)
struct FileDescriptorTests {
    @Test(arguments: allLoops)
    func descriptorsReturnToTheirStartingCountAfterShutdown(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withLoopbackServer { server in try await exercise(loop, server) }
    }

    private func exercise(_ loop: CurlewClient.Configuration.EventLoopKind, _ server: LoopbackServer) async throws {
        // Warm up process-wide state before counting: libdispatch's epoll and its timerfd (created by the first
        // Task.sleep, which waitUntil uses), libcurl's globals.
        try await Task.sleep(for: .milliseconds(1))
        try await withClient(loop) { client in
            _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
        }
        let descriptorsBefore = TestProcess.openFileDescriptors()
        let before = openDescriptorsExceptDispatchTimers().count
        try await withClient(loop) { client in
            let request = try CurlewRequest(url: "\(server.baseURL)/small")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<64 {
                    group.addTask { for _ in 0..<20 { _ = try await client.execute(request) } }
                }
                try await group.waitForAll()
            }
            #expect(TestProcess.openFileDescriptorCount() > before)
            // Faults and cancellations must not leak either.
            for fault in ["close-mid-body", "reset-after-headers", "empty-reply", "malformed"] {
                _ = try? await client.execute(try CurlewRequest(url: "\(server.baseURL)/fault/\(fault)"))
            }
            // Cancellations of transfers that reached the server (their connections must close) and of ones that
            // did not.
            for round in 0..<50 {
                let served = server.requestsServed
                let task = Task {
                    try await client.execute(try CurlewRequest(url: "\(server.baseURL)/fault/never-answer"))
                }
                if round % 2 == 0 { try await waitUntil(timeout: .seconds(30)) { server.requestsServed > served } }
                task.cancel()
                _ = try? await task.value
            }
        }
        // Nothing may be open afterwards that was not open before (compared by what each descriptor refers to,
        // so a reused number holding a new socket counts as new). The in-process server closes its ends of the
        // connections asynchronously after the client hangs up, hence the bounded wait.
        let newDescriptors = { descriptorsOpened(since: descriptorsBefore) }
        try? await waitUntil(timeout: .seconds(30)) { newDescriptors().isEmpty }
        #expect(newDescriptors().isEmpty, "still open after shutdown: \(newDescriptors())")
        #expect(openDescriptorsExceptDispatchTimers().count <= before)
    }

    /// 4,000 transfers in flight at once, each on a connection of its own (issue 11): every request succeeds, the
    /// server answered each one, and nothing the client opened stays open after shutdown.
    @Test(arguments: allLoops)
    func fourThousandConnectionsAllSucceedAndCloseAfterShutdown(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        let concurrency = 4_000
        try await withLoopbackServer(threads: 2) { server in
            try await Task.sleep(for: .milliseconds(1))
            try await withClient(loop) { client in
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            }
            let descriptorsBefore = TestProcess.openFileDescriptors()
            let acceptedBefore = server.acceptedConnections
            let servedBefore = server.requestsServed
            // The server holds the first answers for half a second, so the transfers overlap and each needs a
            // connection; the second round reuses them. A bounded total timeout turns a lost transfer into a failure.
            let held = try CurlewRequest(url: "\(server.baseURL)/delay/500")
            let small = try CurlewRequest(url: "\(server.baseURL)/small")
            let succeeded = try await withClient(
                loop,
                configure: { configuration in
                    configuration.maxConnectionsPerHost = nil
                    configuration.maxCachedConnectionsPerLoop = concurrency
                    configuration.timeouts.total = .seconds(60)
                }
            ) { client in
                try await okResponses(client, workers: concurrency, each: [held, small])
            }
            #expect(succeeded == 2 * concurrency)
            #expect(server.requestsServed - servedBefore == 2 * concurrency)
            // Far beyond the default per-host limit of 256: the transfers really were in flight together.
            #expect(server.acceptedConnections - acceptedBefore > 1_000)
            let newDescriptors = { descriptorsOpened(since: descriptorsBefore) }
            try? await waitUntil(timeout: .seconds(10)) { newDescriptors().isEmpty }
            #expect(newDescriptors().isEmpty, "still open after shutdown: \(newDescriptors().count) descriptors")
        }
    }

    /// `shutdown()` itself closes what the client opened: a service that counts descriptors after shutting a
    /// client down, while still holding it, sees none left (the loops' eventfds included).
    @Test(arguments: allLoops)
    func shutdownClosesEveryDescriptorWhileTheClientIsStillHeld(
        loop: CurlewClient.Configuration.EventLoopKind
    ) async throws {
        try await withLoopbackServer { server in
            try await Task.sleep(for: .milliseconds(1))
            try await withClient(loop) { client in
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            }
            let descriptorsBefore = TestProcess.openFileDescriptors()
            var configuration = CurlewClient.Configuration()
            configuration.eventLoop = loop
            let client = CurlewClient(configuration: configuration)
            for _ in 0..<10 { _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small")) }
            await client.shutdown()
            let newDescriptors = { descriptorsOpened(since: descriptorsBefore) }
            // The client's own descriptors (eventfds, epoll, timers) are closed the moment shutdown() returns.
            // ("?": closed between the listing and the readlink, so gone.)
            let clientOwned = newDescriptors().filter { !$0.value.hasPrefix("socket:") && $0.value != "?" }
            #expect(clientOwned.isEmpty, "open after shutdown(): \(clientOwned)")
            // Sockets: the in-process server closes its ends after the client's, hence the bounded wait.
            try? await waitUntil(timeout: .seconds(30)) { newDescriptors().isEmpty }
            #expect(newDescriptors().isEmpty, "still open after shutdown: \(newDescriptors())")
            withExtendedLifetime(client) {}
        }
    }

    /// A client released without shutdown() stops its loops and closes every connection by itself.
    @Test(arguments: allLoops)
    func aClientReleasedWithoutShutdownCleansUp(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        try await withLoopbackServer { server in
            try await withClient(loop) { client in  // warm up process-wide state
                _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small"))
            }
            try await Task.sleep(for: .milliseconds(1))
            let descriptorsBefore = TestProcess.openFileDescriptors()
            do {
                var configuration = CurlewClient.Configuration()
                configuration.eventLoop = loop
                let client = CurlewClient(configuration: configuration)
                for _ in 0..<3 { _ = try await client.execute(try CurlewRequest(url: "\(server.baseURL)/small")) }
                // Released here: its connection and loop outlive it only until they have cleaned up.
            }
            let leftovers = { descriptorsOpened(since: descriptorsBefore) }
            try? await waitUntil(timeout: .seconds(30)) { leftovers().isEmpty }
            #expect(leftovers().isEmpty, "still open: \(leftovers())")
        }
    }

    /// A service that spawns processes must not hand them its connections: a child holding a socket keeps the
    /// connection open after the engine closed it. (libcurl 7.88 creates sockets without close-on-exec.)
    @Test(arguments: allLoops)
    func connectionSocketsAreCloseOnExec(loop: CurlewClient.Configuration.EventLoopKind) async throws {
        let nginx = try await NginxServer.shared()  // out of process, so every new socket here is the client's
        try await withClient(loop) { client in
            let before = TestProcess.openFileDescriptors()
            let request = try CurlewRequest(url: "http://127.0.0.1:\(nginx.httpPort)/small")
            _ = try await client.execute(request)
            let sockets = TestProcess.openFileDescriptors().filter {
                before[$0.key] != $0.value && $0.value.hasPrefix("socket:")
            }
            #expect(!sockets.isEmpty)
            for descriptor in sockets.keys {
                #expect(
                    fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0, "descriptor \(descriptor) is inherited by children")
            }
        }
    }
}

/// Descriptors open now that were not open in `before`, or held something else then. libdispatch's timerfds are left
/// out: libdispatch opens one per clock the first time anything in the process arms a timer on that clock (the Swift
/// runtime's sleeps on either clock, a Dispatch timer source) and keeps it for the process's life. The engine opens
/// no timerfd of its own (the Dispatch loop's timer shares libdispatch's), so none can be its leak.
private func descriptorsOpened(since before: [Int32: String]) -> [Int32: String] {
    openDescriptorsExceptDispatchTimers().filter { before[$0.key] != $0.value }
}

private func openDescriptorsExceptDispatchTimers() -> [Int32: String] {
    TestProcess.openFileDescriptors().filter { $0.value != "anon_inode:[timerfd]" }
}
