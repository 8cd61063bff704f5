import CurlewEngine
import CurlewLoopbackServer
import Foundation

// Until the `bench` and `upload` subcommands land, `curlew` runs a demo of the engine against an embedded
// loopback server: concurrent requests on the loops' executors, and the metrics of a few of them.

let requestCount = 20_000
let concurrency = 32

let server = try await LoopbackServer.start()
print("embedded server: \(server.baseURL) (SwiftNIO, loopback only)")
print("libcurl \(CurlewClient.libcurlVersion)")

let client = CurlewClient()
let small = try CurlewRequest(url: "\(server.baseURL)/small")
let json = try CurlewRequest(url: "\(server.baseURL)/json")

let first = try await client.execute(small)
let second = try await client.execute(small)
for (label, response) in [("first request", first), ("second request", second)] {
    let metrics = response.metrics
    print(
        "\(label): \(response.status.code), \(response.body.count) bytes, connect \(format(metrics.connected)), "
            + "first byte \(format(metrics.firstByte)), total \(format(metrics.total)), "
            + "connection \(metrics.reusedConnection ? "reused" : "new"), \(metrics.httpVersion.rawValue)")
}

let start = ContinuousClock.now
let executors = client.executors
let (succeeded, bytes) = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
    for worker in 0..<concurrency {
        // Request tasks on the loops' own threads: resume and next submission with no thread hop.
        group.addTask(executorPreference: executors[worker % executors.count]) {
            var succeeded = 0
            var bytes = 0
            for index in stride(from: worker, to: requestCount, by: concurrency) {
                let response = try await client.execute(index % 10 == 0 ? json : small)
                if response.status == .ok { succeeded += 1 }
                bytes += response.body.count
            }
            return (succeeded, bytes)
        }
    }
    var total = (0, 0)
    for try await (succeeded, bytes) in group { total = (total.0 + succeeded, total.1 + bytes) }
    return total
}
let elapsed = ContinuousClock.now - start
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print(
    "\(requestCount) requests, \(concurrency) in flight on \(executors.count) loop(s): \(succeeded) succeeded, "
        + "\(bytes) body bytes, \(String(format: "%.0f", Double(requestCount) / seconds)) requests/s")
print("server saw \(server.requestsServed) requests on \(server.acceptedConnections) connections")

await client.shutdown()
try await server.shutdown()

func format(_ duration: Duration) -> String {
    let microseconds = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    return "\(microseconds) µs"
}
