// Shared pieces of the benchmark clients: the common command line, the shared request
// budget the workers draw from, and the one-line JSON report the harness parses.
import ArgumentParser
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The command line every client accepts.
public struct BenchOptions: ParsableArguments {
    @Option(help: "URL to GET")
    public var url: String

    @Option(help: "Number of concurrent workers (and connections for HTTP/1.1)")
    public var concurrency: Int = 1

    @Option(help: "Exact number of requests to issue in total")
    public var requests: Int

    @Option(help: "PEM file with the CA that signed the server's certificate")
    public var cafile: String?

    @Flag(help: "Use HTTP/2 (ALPN over TLS)")
    public var http2: Bool = false

    public init() {}

    public mutating func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
        guard requests >= 1 else { throw ValidationError("--requests must be at least 1") }
    }
}

/// Hands out exactly `total` request slots across all workers.
public final class RequestBudget: Sendable {
    public let total: Int
    private let issued = Atomic<Int>(0)

    public init(total: Int) {
        self.total = total
    }

    /// True if the caller may issue one more request.
    @inline(__always)
    public func claim() -> Bool {
        issued.add(1, ordering: .relaxed).oldValue < total
    }
}

/// What one worker did.
public struct WorkerTally: Sendable {
    public var succeeded = 0
    public var failed = 0
    public init() {}

    public static func + (lhs: WorkerTally, rhs: WorkerTally) -> WorkerTally {
        var sum = lhs
        sum.succeeded += rhs.succeeded
        sum.failed += rhs.failed
        return sum
    }
}

/// Prints only the first few failures to stderr, so a broken client explains itself
/// without flooding the log.
extension WorkerTally {
    /// One worker: sends requests until the budget is spent. `send` returns the response's status code and body
    /// size; anything but 200, and any error, counts as a failure and is logged.
    public static func run(
        budget: RequestBudget, failures: FailureLog, send: () async throws -> (status: Int, bytes: Int)
    ) async -> WorkerTally {
        var tally = WorkerTally()
        while budget.claim() {
            do {
                let (status, bytes) = try await send()
                if status == 200 {
                    tally.succeeded += 1
                } else {
                    tally.failed += 1
                    failures.record("status \(status), \(bytes) bytes")
                }
            } catch {
                tally.failed += 1
                failures.record("error: \(error)")
            }
        }
        return tally
    }
}

extension TaskGroup where ChildTaskResult == WorkerTally {
    /// The workers' tallies added up, once every worker has finished.
    nonisolated(nonsending) public mutating func total() async -> WorkerTally {
        var total = WorkerTally()
        for await tally in self { total = total + tally }
        return total
    }
}

public final class FailureLog: Sendable {
    private let printed = Atomic<Int>(0)
    private let limit: Int

    public init(limit: Int = 3) {
        self.limit = limit
    }

    public func record(_ message: @autoclosure () -> String) {
        if printed.add(1, ordering: .relaxed).oldValue < limit {
            printError(message())
        }
    }
}

public func printError(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { buffer in
        _ = write(2, buffer.baseAddress, buffer.count)
    }
}

/// Seconds elapsed since `start` on the continuous clock.
public func seconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    let parts = elapsed.components
    return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
}

/// The single JSON line the harness reads from stdout.
public func printReport(client: String, tally: WorkerTally, seconds: Double) {
    let line =
        "{\"client\": \"\(client)\", \"requests\": \(tally.succeeded + tally.failed), "
        + "\"failures\": \(tally.failed), \"seconds\": \(seconds)}"
    print(line)
    fflush(nil)
}

/// Prints the report and exits: 0 if every request succeeded, 1 otherwise.
public func finish(client: String, tally: WorkerTally, seconds: Double) -> Never {
    printReport(client: client, tally: tally, seconds: seconds)
    exit(tally.failed == 0 ? 0 : 1)
}

/// Ends the process with `code` (for argument and set-up errors).
public func exitProcess(_ code: Int32) -> Never {
    fflush(nil)
    exit(code)
}

// MARK: - Uploads (S4-S6)

/// What an upload client sends.
public enum UploadMode: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// The file as the raw body, streamed (S4).
    case raw
    /// multipart/form-data: fields a=1 and b=2, then the file as part "file" (S5).
    case multipart
    /// The file gzip-compressed on the fly, `Content-Encoding: gzip`, chunked (S6).
    case gzip
}

/// The command line of the upload clients: one request of one file.
public struct UploadOptions: ParsableArguments {
    @Option(help: "URL to upload to (nginx.sh's /upload answers with the number of body bytes it read)")
    public var url: String

    @Option(help: "The file to upload")
    public var file: String

    @Option(help: "raw | multipart | gzip")
    public var mode: UploadMode = .raw

    @Option(help: "HTTP method")
    public var method: String = "POST"

    @Option(help: "gzip level for --mode gzip")
    public var level: Int = 1

    @Flag(help: "Accept any 2xx and do not compare the server's byte count (for WebDAV PUT checks)")
    public var noCheck: Bool = false

    public init() {}
}

/// The size of a regular file, or nil.
public func fileSize(_ path: String) -> Int64? {
    var status = stat()
    guard stat(path, &status) == 0 else { return nil }
    return Int64(status.st_size)
}

/// The number the benchmark server answers with: the body bytes it read.
public func serverByteCount(_ body: some Sequence<UInt8>) -> Int64? {
    let digits = body.filter { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: " ") }
    return Int64(String(decoding: digits, as: UTF8.self))
}

/// Checks an upload's outcome the way every client does, prints the JSON line and exits.
///
/// - sentBytes: body bytes on the wire as the client counted them (chunk framing included), if known.
/// - server: the server's count of body bytes it read (decoded from chunks).
public func finishUpload(
    client: String, options: UploadOptions, status: Int, seconds: Double, fileBytes: Int64, sentBytes: Int64?,
    serverBytes: Int64?, error: String? = nil
) -> Never {
    var problem = error
    if problem == nil {
        if options.noCheck {
            if !(200..<300).contains(status) { problem = "status \(status)" }
        } else if status != 200 {
            problem = "status \(status)"
        } else if let serverBytes {
            switch options.mode {
            case .raw:
                if serverBytes != fileBytes {
                    problem = "the server read \(serverBytes) bytes, the file has \(fileBytes)"
                }
            case .multipart:
                if serverBytes <= fileBytes || (sentBytes != nil && sentBytes != serverBytes) {
                    problem = "the server read \(serverBytes) bytes, \(sentBytes.map(String.init) ?? "?") were sent"
                }
            case .gzip:
                // Chunked: what was sent includes the chunk framing, the server counts the decoded body.
                if serverBytes <= 0
                    || (sentBytes != nil
                        && (sentBytes! < serverBytes || sentBytes! > serverBytes + serverBytes / 100 + 64))
                {
                    problem = "the server read \(serverBytes) bytes, \(sentBytes.map(String.init) ?? "?") were sent"
                }
            }
        } else {
            problem = "no byte count in the server's answer"
        }
    }
    if let problem { printError("\(client): upload failed: \(problem)") }
    let line =
        "{\"client\": \"\(client)\", \"mode\": \"\(options.mode.rawValue)\", \"requests\": 1, "
        + "\"failures\": \(problem == nil ? 0 : 1), \"seconds\": \(seconds), \"bytes\": \(fileBytes), "
        + "\"sent_bytes\": \(sentBytes ?? -1), \"server_bytes\": \(serverBytes ?? -1)}"
    print(line)
    fflush(nil)
    exit(problem == nil ? 0 : 1)
}
