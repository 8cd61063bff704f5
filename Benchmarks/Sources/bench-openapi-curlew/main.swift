// S9: a swift-openapi-runtime ClientTransport, Curlew's (CurlewOpenAPI), driven the way a generated client
// drives it: transport.send for GET <path>, the response body collected. C workers, each preferring the loop's
// executor as bench-curlew --mode executor does.
import ArgumentParser
import BenchSupport
import CurlewEngine
import CurlewOpenAPI
import Foundation
import HTTPTypes
import OpenAPIRuntime

struct OpenAPIOptions: ParsableArguments {
    @OptionGroup var common: BenchOptions

    @Option(help: "Number of event loops")
    var loops: Int = 1
}

let options = OpenAPIOptions.parseOrExit()
let concurrency = options.common.concurrency
let budget = RequestBudget(total: options.common.requests)
let failures = FailureLog()
guard let target = splitURL(options.common.url) else {
    printError("bench-openapi-curlew: --url needs scheme://host[:port]/path")
    exitProcess(2)
}

var configuration = CurlewClient.Configuration()
configuration.loopCount = max(1, options.loops)
configuration.httpVersion = options.common.http2 ? .http2 : .http1_1
configuration.tls.caFile = options.common.cafile
let client = CurlewClient(configuration: configuration)
let transport = CurlewTransport(client: client)
let executors = client.executors

@Sendable func work() async -> WorkerTally {
    let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: target.path)
    return await WorkerTally.run(budget: budget, failures: failures) {
        let (response, body) = try await transport.send(
            request, body: nil, baseURL: target.base, operationID: "getSmall")
        var received = 0
        if let body { received = try await [UInt8](collecting: body, upTo: 64 << 20).count }
        return (response.status.code, received)
    }
}

let start = ContinuousClock.now
let tally = await withTaskGroup(of: WorkerTally.self) { group in
    for index in 0..<concurrency {
        group.addTask(executorPreference: executors[index % executors.count]) { await work() }
    }
    return await group.total()
}
let elapsed = seconds(since: start)
await client.shutdown()
finish(client: "curlew-openapi", tally: tally, seconds: elapsed)
