import ArgumentParser
import CurlewEngine
import CurlewLoopbackServer
import Foundation

extension UploadMode: ExpressibleByArgument {}

struct UploadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Upload a directory tree or a list of files, N at a time, resumable through a journal.",
        discussion: """
            SOURCE is a directory (walked recursively) or a manifest file with one path per line.
            --mode put sends each file as PUT to URL + its relative path, percent-encoded per segment;
            --mode multipart POSTs a form to URL with the file as part `file` and its relative path as field `path`.
            Without a URL, an embedded loopback server receives the files (and checksums and discards them).
            With --journal, every file the server accepted (2xx) is recorded; running again with the same
            journal skips those and sends the rest. Ctrl-C stops starting new files and lets the ones in flight
            finish; a second Ctrl-C cancels them.
            Exit status: 0 when every file was sent, 1 when some failed (listed), 130 when interrupted.
            """
    )

    @Argument(help: "A directory (walked recursively) or a manifest file (one path per line).")
    var source: String

    @Argument(help: "Where to send the files. Omit it to send them to the embedded loopback server.")
    var url: String?

    @Option(name: [.customShort("c"), .long], help: "Files in flight at any time.")
    var concurrency: Int = 8

    @Option(help: "put: PUT to URL/relative-path; multipart: POST a form to URL.")
    var mode: UploadMode = .put

    @Option(name: .customLong("field"), help: "An extra form field name=value (repeatable, multipart mode).")
    var fields: [String] = []

    @Flag(help: "Compress each file with gzip on the fly (Content-Encoding: gzip).")
    var gzip = false

    @Option(name: [.customShort("H"), .customLong("header")], help: "A request header 'Name: value' (repeatable).")
    var headers: [String] = []

    @Option(help: "Retries per file, with bounded exponential backoff, for failures that are safe to retry.")
    var retries: Int = 2

    @Option(help: "Record accepted files here and skip those already recorded.")
    var journal: String?

    @Flag(help: "Print the summary as one JSON object on stdout.")
    var json = false

    @Option(help: "Start at most this many files per second (to spare a server).")
    var rate: Double?

    @OptionGroup var shared: SharedOptions

    func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
        guard retries >= 0 && retries <= 10 else { throw ValidationError("--retries must be between 0 and 10") }
        if let rate, !(rate > 0 && rate.isFinite) { throw ValidationError("--rate must be a positive number of files per second") }
        if !fields.isEmpty && mode != .multipart { throw ValidationError("--field needs --mode multipart") }
        for field in fields where !field.contains("=") || field.hasPrefix("=") {
            throw ValidationError("--field \(field.debugDescription) is not name=value")
        }
        for header in headers {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex else {
                throw ValidationError("header \(header.debugDescription) is not 'Name: value'")
            }
        }
    }

    func run() async throws {
        let listing = try UploadSource.list(source)
        let journal = try journal.map(UploadJournal.init(path:))
        let pending = listing.items.filter { !(journal?.isDone($0) ?? false) }
        let skipped = listing.items.count - pending.count

        var server: LoopbackServer?
        let target: String
        if let url {
            target = url.hasSuffix("/") || mode == .multipart ? url : url + "/"
        } else {
            let embedded = try await LoopbackServer.start()
            server = embedded
            target = embedded.baseURL + (mode == .put ? "/files/" : "/upload")
            if !json { print("embedded server: \(embedded.baseURL) (SwiftNIO, loopback only; checksums and discards what it receives)") }
        }
        // Fail on a bad URL before anything is sent, not once per file.
        do {
            _ = try CurlewRequest(method: .put, url: target)
        } catch let error as CurlewError {
            throw ValidationError("cannot send to \(target.debugDescription): \(error.detail)")
        }
        let plan = UploadPlan(
            baseURL: target, mode: mode, headers: headers.map(Self.splitHeader), fields: fields.map(Self.splitField),
            gzip: gzip, retries: retries, concurrency: concurrency, filesPerSecond: rate)

        var configuration = CurlewClient.Configuration()
        configuration.maxConnectionsPerHost = concurrency
        configuration.proxy = .none
        shared.applyTLS(to: &configuration)
        let client = CurlewClient(configuration: configuration)
        let totalBytes = pending.reduce(Int64(0)) { $0 + $1.size }
        if !json {
            print("curlew upload \(source) → \(target) (\(mode.rawValue))")
            var line = "  \(formatCount(listing.items.count)) files, \(formatBytes(listing.items.reduce(0) { $0 + $1.size }))"
            if skipped > 0 { line += "; \(formatCount(skipped)) already in the journal, \(formatCount(pending.count)) to send" }
            print(line + "; \(concurrency) at a time")
        }

        let runner = UploadRunner(client: client, plan: plan, items: pending, journal: journal)
        let progress = ProgressOutput(enabled: !shared.noProgress)
        let work = Task { await runner.run() }
        let interrupts = InterruptMonitor { presses in
            if presses == 1 {
                runner.requestStop()
                progress.finish()
                writeStandardError("interrupted: finishing the files in flight (Ctrl-C again to cancel them)\n")
            } else {
                work.cancel()
            }
        }
        let reporter = Task {
            await Self.reportProgress(runner, totalFiles: pending.count, totalBytes: totalBytes, every: shared.progressInterval.duration, to: progress)
        }
        let started = ContinuousClock.now
        let tally = await work.value
        let elapsed = ContinuousClock.now - started
        reporter.cancel()
        _ = await reporter.value
        progress.finish()
        interrupts.stop()
        journal?.finish()
        await client.shutdown()

        var summary = UploadSummary(
            source: source, url: target, mode: mode, concurrency: concurrency, listing: listing, skipped: skipped,
            tally: tally, notStarted: runner.notStarted, elapsed: elapsed, journal: journal?.path,
            interrupted: interrupts.wasInterrupted)
        if let server {
            summary.embeddedServer = .init(requests: server.requestsServed, bytes: server.bytesReceived)
            try? await server.shutdown()
        }
        if json {
            print(try jsonLine(summary))
        } else {
            print(summary.text)
        }
        if let failure = journal?.failure {
            throw CommandFailure("the journal could not be written: \(failure)")
        }
        if summary.interrupted { throw ExitCode(130) }
        if summary.failed > 0 { throw ExitCode(1) }
    }

    private static func reportProgress(
        _ runner: UploadRunner, totalFiles: Int, totalBytes: Int64, every interval: Duration, to output: ProgressOutput
    ) async {
        guard output.enabled else { return }
        let clock = ContinuousClock()
        let start = clock.now
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let snapshot = runner.progress
            let elapsed = (clock.now - start).seconds
            let bytesPerSecond = elapsed > 0 ? Double(snapshot.bytes) / elapsed : 0
            let filesPerSecond = elapsed > 0 ? Double(snapshot.files + snapshot.failed) / elapsed : 0
            var line = "\(formatCount(snapshot.files))/\(formatCount(totalFiles)) files"
            if snapshot.failed > 0 { line += " (\(formatCount(snapshot.failed)) failed)" }
            line += ", \(formatBytes(snapshot.bytes)) of \(formatBytes(totalBytes))"
            line += String(format: ", %.1f MB/s, %.0f files/s", bytesPerSecond / 1e6, filesPerSecond)
            let remainingBytes = Double(totalBytes - snapshot.bytes)
            let remainingFiles = Double(totalFiles - snapshot.files - snapshot.failed)
            // Whichever pace is slower decides: many small files are bound by files/s, big ones by MB/s.
            let eta = Swift.max(
                bytesPerSecond > 0 ? remainingBytes / bytesPerSecond : 0, filesPerSecond > 0 ? remainingFiles / filesPerSecond : 0)
            line += (snapshot.files + snapshot.failed) > 0 ? String(format: ", ETA %.0f s", eta) : ", ETA -"
            output.update(line)
        }
    }

    private static func splitHeader(_ header: String) -> (String, String) {
        let colon = header.firstIndex(of: ":")!
        return (
            String(header[..<colon]).trimmingCharacters(in: .whitespaces),
            String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        )
    }

    private static func splitField(_ field: String) -> (String, String) {
        let equals = field.firstIndex(of: "=")!
        return (String(field[..<equals]), String(field[field.index(after: equals)...]))
    }
}

/// The upload result as printed, in text or JSON. Field names are part of the command's interface (README).
struct UploadSummary: Encodable {
    struct EmbeddedServer: Encodable {
        var requests: Int
        var bytes: Int
    }

    var source: String
    var url: String
    var mode: String
    var concurrency: Int
    var files: Int
    var uploaded: Int
    var skipped: Int
    var failed: Int
    var notStarted: Int
    var bytes: Int64
    var durationSeconds: Double
    var filesPerSecond: Double
    var megabytesPerSecond: Double
    var retries: Int
    var connectionsOpened: Int
    var statusCodes: [String: Int]
    var journal: String?
    var interrupted: Bool
    var failures: [UploadFailure]
    var embeddedServer: EmbeddedServer?

    init(
        source: String, url: String, mode: UploadMode, concurrency: Int, listing: UploadListing, skipped: Int,
        tally: UploadTally, notStarted: Int, elapsed: Duration, journal: String?, interrupted: Bool
    ) {
        self.source = source
        self.url = url
        self.mode = mode.rawValue
        self.concurrency = concurrency
        self.files = listing.items.count + listing.problems.count
        self.uploaded = tally.uploaded
        self.skipped = skipped
        self.failures = (listing.problems.map { UploadFailure(path: $0.relativePath, error: $0.reason) } + tally.failures)
            .sorted { $0.path < $1.path }
        self.failed = failures.count
        self.notStarted = notStarted
        self.bytes = tally.bytes
        self.durationSeconds = elapsed.seconds
        self.filesPerSecond = elapsed > .zero ? Double(tally.uploaded) / elapsed.seconds : 0
        self.megabytesPerSecond = elapsed > .zero ? Double(tally.bytes) / 1e6 / elapsed.seconds : 0
        self.retries = tally.retries
        self.connectionsOpened = tally.connectionsOpened
        self.statusCodes = Dictionary(uniqueKeysWithValues: tally.statusCounts.map { (String($0.key), $0.value) })
        self.journal = journal
        self.interrupted = interrupted
    }

    var text: String {
        var lines: [String] = []
        func row(_ label: String, _ value: String) { lines.append(label.padding(toLength: 14, withPad: " ", startingAt: 0) + value) }
        var outcome = "\(formatCount(uploaded)) uploaded, \(formatCount(skipped)) skipped (journal), \(formatCount(failed)) failed"
        if notStarted > 0 { outcome += ", \(formatCount(notStarted)) not started" }
        if interrupted { outcome += ", interrupted" }
        row("files", "\(formatCount(files)): " + outcome)
        row("bytes", formatBytes(bytes))
        row("duration", String(format: "%.2f s", durationSeconds))
        row("throughput", String(format: "%.1f files/s, %.1f MB/s", filesPerSecond, megabytesPerSecond))
        row("status codes", statusCodes.isEmpty ? "none" : statusCodes.sorted { $0.key < $1.key }.map { "\($0.key): \(formatCount($0.value))" }.joined(separator: ", "))
        row("retries", formatCount(retries))
        row("connections", "\(formatCount(connectionsOpened)) opened")
        if let journal { row("journal", journal) }
        if let embeddedServer {
            row("server", "embedded server received \(formatCount(embeddedServer.requests)) requests, \(formatBytes(Int64(embeddedServer.bytes)))")
        }
        if !failures.isEmpty {
            lines.append("failed files:")
            for failure in failures { lines.append("  \(failure.path): \(failure.error)") }
        }
        return lines.joined(separator: "\n")
    }
}
