// AsyncHTTPClient: one shared HTTPClient, async/await execute, C workers in a task group.
import AsyncHTTPClient
import BenchSupport
import NIOCore
import NIOSSL

let options = BenchOptions.parseOrExit()

var configuration = HTTPClient.Configuration()
configuration.connectionPool = .init(
    idleTimeout: .seconds(300),
    concurrentHTTP1ConnectionsPerHostSoftLimit: options.concurrency
)
configuration.httpVersion = options.http2 ? .automatic : .http1Only
// Sends Accept-Encoding and decodes like the libcurl clients (CURLOPT_ACCEPT_ENCODING "").
configuration.decompression = .enabled(limit: .none)
if let cafile = options.cafile {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.trustRoots = .file(cafile)
    configuration.tlsConfiguration = tls
}

let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
let url = options.url
let concurrency = options.concurrency
let budget = RequestBudget(total: options.requests)
let failures = FailureLog()

let start = ContinuousClock.now
let tally = await withTaskGroup(of: WorkerTally.self) { group in
    for _ in 0..<concurrency {
        group.addTask {
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
            return await WorkerTally.run(budget: budget, failures: failures) {
                let response = try await client.execute(request, timeout: .seconds(30))
                let body = try await response.body.collect(upTo: 64 << 20)
                return (Int(response.status.code), body.readableBytes)
            }
        }
    }
    return await group.total()
}
let elapsed = seconds(since: start)

do {
    try await client.shutdown().get()
} catch {
    printError("bench-ahc: shutdown failed: \(error)")
}
finish(client: "async-http-client", tally: tally, seconds: elapsed)
