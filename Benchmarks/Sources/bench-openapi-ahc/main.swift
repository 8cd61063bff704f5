// S9: a swift-openapi-runtime ClientTransport, AsyncHTTPClient's (swift-openapi-async-http-client), driven the
// way a generated client drives it: transport.send for GET <path>, the response body collected. The
// HTTPClient is configured as in bench-ahc.
import AsyncHTTPClient
import BenchSupport
import Foundation
import HTTPTypes
import NIOCore
import NIOSSL
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

let options = BenchOptions.parseOrExit()
let concurrency = options.concurrency
let budget = RequestBudget(total: options.requests)
let failures = FailureLog()
guard let target = splitURL(options.url) else {
    printError("bench-openapi-ahc: --url needs scheme://host[:port]/path")
    exitProcess(2)
}

var configuration = HTTPClient.Configuration()
configuration.connectionPool = .init(
    idleTimeout: .seconds(300),
    concurrentHTTP1ConnectionsPerHostSoftLimit: options.concurrency
)
configuration.httpVersion = options.http2 ? .automatic : .http1Only
configuration.decompression = .enabled(limit: .none)
if let cafile = options.cafile {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.trustRoots = .file(cafile)
    configuration.tlsConfiguration = tls
}
let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
let transport = AsyncHTTPClientTransport(configuration: .init(client: client, timeout: .seconds(30)))

let start = ContinuousClock.now
let tally = await withTaskGroup(of: WorkerTally.self) { group in
    for _ in 0..<concurrency {
        group.addTask {
            let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: target.path)
            return await WorkerTally.run(budget: budget, failures: failures) {
                let (response, body) = try await transport.send(
                    request, body: nil, baseURL: target.base, operationID: "getSmall")
                var received = 0
                if let body { received = try await [UInt8](collecting: body, upTo: 64 << 20).count }
                return (response.status.code, received)
            }
        }
    }
    return await group.total()
}
let elapsed = seconds(since: start)
do {
    try await client.shutdown().get()
} catch {
    printError("bench-openapi-ahc: shutdown failed: \(error)")
}
finish(client: "ahc-openapi", tally: tally, seconds: elapsed)
