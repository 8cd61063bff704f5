// FoundationNetworking URLSession: ephemeral session, data(for:), C workers in a task group.
//
// On Linux URLSession cannot be told to trust a private CA: swift-corelibs-foundation reads
// URLSessionCertificateAuthorityInfoFile only on Android, has no server-trust challenge,
// and Debian's libcurl has a compiled-in CA bundle (so SSL_CERT_FILE is ignored).
// --cafile is therefore refused rather than silently turning verification off.
import BenchSupport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let options = BenchOptions.parseOrExit()

if options.cafile != nil {
    printError("bench-urlsession: a private CA (--cafile) cannot be configured for URLSession on Linux")
    exitProcess(2)
}
guard let url = URL(string: options.url) else {
    printError("bench-urlsession: bad URL \(options.url)")
    exitProcess(2)
}

let configuration = URLSessionConfiguration.ephemeral
configuration.httpMaximumConnectionsPerHost = options.concurrency
configuration.timeoutIntervalForRequest = 30
let session = URLSession(configuration: configuration)
let concurrency = options.concurrency
let budget = RequestBudget(total: options.requests)
let failures = FailureLog()

let start = ContinuousClock.now
let tally = await withTaskGroup(of: WorkerTally.self) { group in
    for _ in 0..<concurrency {
        group.addTask {
            let request = URLRequest(url: url)
            return await WorkerTally.run(budget: budget, failures: failures) {
                let (data, response) = try await session.data(for: request)
                return ((response as? HTTPURLResponse)?.statusCode ?? 0, data.count)
            }
        }
    }
    return await group.total()
}
let elapsed = seconds(since: start)

session.invalidateAndCancel()
finish(client: "urlsession", tally: tally, seconds: elapsed)
