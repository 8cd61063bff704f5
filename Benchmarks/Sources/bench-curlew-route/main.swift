// The route layer on the engine: C workers in a task group, each looping provider.request() (S1) or
// provider.request().decode() (S3), on the thread loops' executors as bench-curlew --mode executor does.
//
//   --layer route    a Route through an HTTPProvider (the figure for curlew-route)
//   --layer engine   the same requests on the engine directly, decoding with the same JSONDecoder: the S3
//                    baseline, since bench-curlew does not decode
//   --decode         decode the body into the /json model (S3)
import ArgumentParser
import BenchSupport
import Curlew
import CurlewEngine
import Foundation
import HTTPTypes

enum Layer: String, ExpressibleByArgument, CaseIterable, Sendable {
    case route
    case engine
}

struct RouteOptions: ParsableArguments {
    @OptionGroup var common: BenchOptions

    @Option(help: "route | engine")
    var layer: Layer = .route

    @Option(help: "Number of event loops")
    var loops: Int = 1

    @Flag(help: "Decode the body into the /json model (S3)")
    var decode = false
}

/// nginx's /json document (Benchmarks/nginx/nginx.sh).
struct Catalog: Decodable {
    struct Item: Decodable {
        let id: Int
        let name: String
        let price: Double
        let tags: [String]
        let active: Bool
    }

    let items: [Item]
    let count: Int
}

struct BenchProvider: HTTPProvider {
    let baseURL: String
    let transport: any HTTPTransport
}

let options = RouteOptions.parseOrExit()
let concurrency = options.common.concurrency
let budget = RequestBudget(total: options.common.requests)
let failures = FailureLog()
let decodes = options.decode
let layer = options.layer

var configuration = CurlewClient.Configuration()
configuration.loopCount = max(1, options.loops)
configuration.httpVersion = options.common.http2 ? .http2 : .http1_1
configuration.tls.caFile = options.common.cafile
let client = CurlewClient(configuration: configuration)

// The provider's base URL is the scheme and authority; the route is the path.
let url = options.common.url
let pathStart = url.range(of: "://").flatMap { url[$0.upperBound...].firstIndex(of: "/") } ?? url.endIndex
let provider = BenchProvider(baseURL: String(url[..<pathStart]), transport: client)
let route = Route(path: String(url[pathStart...]))
let engineRequest: CurlewRequest
do {
    engineRequest = try CurlewRequest(url: url)
} catch {
    printError("bench-curlew-route: bad URL: \(error)")
    exitProcess(2)
}
let decoder = JSONDecoder()
let executors = client.executors

@Sendable func work() async -> WorkerTally {
    await WorkerTally.run(budget: budget, failures: failures) {
        switch layer {
        case .route:
            let response = try await provider.request(route)
            if decodes { _ = try response.decode(Catalog.self) }
            return (response.status.code, response.body.count)
        case .engine:
            let response = try await client.execute(engineRequest)
            if decodes { _ = try decoder.decode(Catalog.self, from: Data(response.body)) }
            return (response.status.code, response.body.count)
        }
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
finish(client: layer == .route ? "curlew-route" : "curlew-engine-decode", tally: tally, seconds: elapsed)
