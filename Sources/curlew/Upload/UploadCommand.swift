import ArgumentParser
import CurlewEngine
import CurlewLoopbackServer
import CurlewS3
import CurlewSharding
import CurlewUpload
import Foundation

extension UploadError {
    /// The command's form of the library's error: a usage error (exit status 64, with the usage) when the
    /// arguments are at fault, a plain failure (exit status 1) otherwise. Either may name a file or a server's
    /// answer, so it is made printable (``TerminalText``).
    var commandError: any Error {
        switch kind.storage {
        case .invalidConfiguration, .unreadableSource: ValidationError(TerminalText.printable(description))
        case .journal, .unreadableDestination: CommandFailure(description)
        }
    }
}

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
            journal skips those and sends the rest. Ctrl-C (or SIGTERM, as schedulers send) stops starting new
            files and lets the ones in flight finish; a second one cancels them.
            Exit status: 0 when every file was sent, 1 when some failed (listed), 130 when interrupted.

            s3://BUCKET/PREFIX uploads to Amazon S3 or any S3-compatible store (--endpoint), each request signed
            with AWS Signature Version 4. Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
            AWS_SESSION_TOKEN, else the AWS_PROFILE (or default) profile of ~/.aws/credentials and ~/.aws/config;
            they are never printed. Files above --part-size go up in parts, in parallel; every object and part
            carries its SHA-256 (x-amz-checksum-sha256), and a multipart object's stored checksum is compared with
            the file's. With --journal, a run killed mid-file resumes from the next missing part. Bad credentials,
            a missing bucket, clock skew or a wrong region stop the run, named once.
            """
    )

    @Argument(
        help:
            "A directory (walked recursively), a manifest file (one path per line), or - for standard input (a stream of any length, sent as one object to URL)."
    )
    var source: String

    /// `curlew upload - URL`: standard input, as one object.
    private var readsStandardInput: Bool { source == "-" }

    @Argument(
        help:
            "Where to send the files: an http(s) URL or s3://BUCKET/PREFIX. Omit it to use the embedded loopback server."
    )
    var url: String?

    @Option(help: "s3: the store's URL, e.g. http://127.0.0.1:9000 (default: AWS's endpoint for the region).")
    var endpoint: String?

    @Option(help: "s3: the bucket's region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1).")
    var region: String?

    @Option(name: .customLong("s3-addressing"), help: "s3: path (host/bucket/key), virtual (bucket.host/key), or auto.")
    var s3Addressing: S3Addressing = .auto

    @Option(
        name: .customLong("part-size"),
        help: "s3: files above this go up in parts of this size (5MiB-5GiB; raised to fit 10,000 parts).")
    var partSize: ByteSizeArgument = ByteSizeArgument(bytes: 16 << 20, text: "16MiB")

    @Option(
        name: .customLong("content-type"), help: "s3: the Content-Type of every object (default: by file extension).")
    var contentType: String?

    @Option(name: .customLong("metadata"), help: "s3: user metadata key=value stored with every object (repeatable).")
    var metadata: [String] = []

    @Option(name: .customLong("storage-class"), help: "s3: the storage class, e.g. STANDARD_IA (passed through).")
    var storageClass: String?

    @Option(help: "s3: a canned ACL, e.g. private, bucket-owner-full-control (passed through).")
    var acl: String?

    @Flag(
        name: .customLong("skip-existing"),
        help:
            "s3: skip files the bucket holds already (same size, then the SHA-256 Curlew stored, the store's SHA-256 or the ETag's MD5)."
    )
    var skipExisting = false

    @Option(
        help:
            "Send only files matching this glob (repeatable): a name pattern like '*.jpg', or a path pattern like 'logs/*'."
    )
    var include: [String] = []

    @Option(help: "Do not send files matching this glob (repeatable); excludes win over includes.")
    var exclude: [String] = []

    @Option(name: .customLong("min-size"), help: "Send only files of at least this size, e.g. 1KiB or 10MB.")
    var minSize: ByteSizeArgument?

    @Option(name: .customLong("max-size"), help: "Send only files of at most this size, e.g. 100MiB.")
    var maxSize: ByteSizeArgument?

    @Option(
        name: .customLong("min-age"),
        help: "Send only files not modified for at least this long, e.g. 10m (files still being written stay).")
    var minAge: DurationArgument?

    @Option(
        name: .customLong("max-age"), help: "Send only files modified within this long, e.g. 24h (the last day's).")
    var maxAge: DurationArgument?

    /// The patterns, sizes and ages as the library's filter.
    private var filter: UploadFilter {
        UploadFilter(
            includes: include, excludes: exclude, minSize: minSize?.bytes, maxSize: maxSize?.bytes,
            minAge: minAge?.duration, maxAge: maxAge?.duration)
    }

    @Option(
        name: .customLong("checksum-header"),
        help:
            "put: send each file's digest for the server to check: md5 (Content-MD5) or sha256 (Digest and Content-Digest). s3:// targets always send SHA-256."
    )
    var checksumHeader: UploadChecksumHeader?

    @Option(help: "At most this many bytes per second across the run, e.g. 20MB (decimal) or 8MiB (binary).")
    var bwlimit: ByteSizeArgument?

    @Flag(name: .customLong("dry-run"), help: "List what would be sent, and send nothing (no request at all).")
    var dryRun = false

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

    @Flag(
        name: .customLong("json-events"),
        help:
            "Write one JSON object per file event to stdout as it happens (started, partDone, done, skipped with its rule, failed with its error), one per line; the text summary goes to stderr (with --json, the summary is the last line)."
    )
    var jsonEvents = false

    @Option(help: "Start at most this many files per second (to spare a server).")
    var rate: Double?

    @OptionGroup(title: "Sharding") var sharding: ShardOptions

    @OptionGroup var shared: SharedOptions

    /// The most files `--concurrency` puts in flight.
    static let maximumConcurrency = 100_000
    /// The fewest files per second `--rate` takes.
    static let minimumRate = 0.000_001

    func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
        // The same ceiling as bench's -c: far past any useful number of files in flight, and the connection limit
        // computed from it (times the event loops) stays far from overflowing.
        guard concurrency <= Self.maximumConcurrency else {
            throw ValidationError("--concurrency must be at most \(Self.maximumConcurrency)")
        }
        guard retries >= 0 && retries <= 10 else { throw ValidationError("--retries must be between 0 and 10") }
        if let rate, !(rate > 0 && rate.isFinite) {
            throw ValidationError("--rate must be a positive number of files per second")
        }
        // Slower than one file in 11.6 days is surely a typo (a rate per day or per hour written as per second),
        // and the run would seem to hang after its first file.
        if let rate, rate < Self.minimumRate {
            throw ValidationError("--rate must be at least 0.000001 files per second (one file in 11.6 days)")
        }
        if let contradiction = filter.contradiction { throw ValidationError(contradiction) }
        if readsStandardInput {
            guard url != nil else {
                throw ValidationError("upload - needs a URL: the stream's own URL or s3://BUCKET/KEY")
            }
            let fileOnly: [(String, Bool)] = [
                ("--journal", journal != nil), ("--include/--exclude", !include.isEmpty || !exclude.isEmpty),
                ("--min-size/--max-size", minSize != nil || maxSize != nil),
                ("--min-age/--max-age", minAge != nil || maxAge != nil), ("--gzip", gzip),
                ("--mode multipart", mode != .put), ("--skip-existing", skipExisting), ("--dry-run", dryRun),
                ("--rate", rate != nil), ("--checksum-header", checksumHeader != nil),
                ("--shard", sharding.shard != nil),
            ]
            if let option = fileOnly.first(where: \.1)?.0 {
                throw ValidationError("\(option) is for files: it does not apply to a stream from standard input (-)")
            }
        }
        if !fields.isEmpty && mode != .multipart { throw ValidationError("--field needs --mode multipart") }
        for field in fields where !field.contains("=") || field.hasPrefix("=") {
            throw ValidationError("--field \(field.debugDescription) is not name=value")
        }
        if checksumHeader != nil && (mode != .put || gzip || (url.map(S3Location.isS3) ?? false)) {
            throw ValidationError(
                "--checksum-header is for plain PUT targets without --gzip (s3:// targets always carry SHA-256)")
        }
        if let bwlimit, bwlimit.bytes < 1024 { throw ValidationError("--bwlimit must be at least 1kB per second") }
        let isS3 = url.map(S3Location.isS3) ?? false
        if !isS3 {
            let s3Only: [(String, Bool)] = [
                ("--endpoint", endpoint != nil), ("--region", region != nil),
                ("--s3-addressing", s3Addressing != .auto),
                ("--content-type", contentType != nil), ("--metadata", !metadata.isEmpty),
                ("--storage-class", storageClass != nil),
                ("--acl", acl != nil), ("--skip-existing", skipExisting),
            ]
            if let (name, _) = s3Only.first(where: \.1) {
                throw ValidationError("\(name) needs an s3://BUCKET/PREFIX target")
            }
        } else {
            if mode != .put || gzip { throw ValidationError("s3:// targets take neither --mode multipart nor --gzip") }
            if !headers.isEmpty {
                // Every header of a signed request must be signed and understood by the store: the options say which.
                throw ValidationError(
                    "-H is for http(s) targets; for s3:// use --content-type, --metadata, --storage-class or --acl")
            }
            guard (PartPlan.minimumPartSize...PartPlan.maximumPartSize).contains(partSize.bytes) else {
                throw ValidationError("--part-size must be between 5MiB and 5GiB (S3's limits)")
            }
            do {
                _ = try S3Location(parsing: url!)
            } catch {
                throw ValidationError("\(error)")
            }
        }
        for entry in metadata {
            guard let equals = entry.firstIndex(of: "="), equals != entry.startIndex,
                entry[..<equals].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
            else {
                throw ValidationError(
                    "--metadata \(entry.debugDescription) is not key=value (key: letters, digits, - and _)")
            }
        }
        _ = try parseHeaderOptions(headers)
    }

    func run() async throws {
        try shared.requireSupportedLibcurl()
        let (shard, runID) = try sharding.resolved()
        if let outputDirectory = sharding.outputDirectory { try ShardOptions.prepare(directory: outputDirectory) }
        do {
            try await send(shard: shard, runID: runID)
        } catch let error as UploadError {
            throw error.commandError
        }
    }

    private func send(shard: ShardAssignment, runID: String?) async throws {
        // Standard input has no listing: it is one stream (`sendStandardInput`).
        let source = readsStandardInput ? nil : try UploadSource.at(self.source)
        if dryRun, let source {
            // Nothing is opened or sent: not the journal for writing, not a connection.
            let selection = try UploadSelection.make(
                source: source, filter: filter, shard: shard, journalPath: journal)
            // Checked as the real run binds it: a journal of another destination is refused, not read as skips.
            let recorded = try selection.journalPath.map { path in
                try UploadJournal.read(
                    path: path,
                    boundTo: Upload.journalDestination(try plannedDestination(embeddedServerURL: nil).destination))
            }
            let pending = selection.listing.items.filter { recorded?[$0.relativePath] != $0.version }
            printDryRun(pending, listing: selection.listing, excluded: selection.excluded)
            return
        }

        let (client, destination, destinationLine, server) = try await openDestination()
        guard let source else {
            try await sendStandardInput(to: destination, client: client, destinationLine: destinationLine)
            return
        }

        let configuration = try uploadConfiguration(source: source, destination: destination, shard: shard)
        let upload = try Upload(configuration, client: client)
        // With --json-events, stdout carries JSON lines only.
        let json = self.json || jsonEvents
        if let destinationLine, !json { printLine(destinationLine) }
        let selection = upload.selection
        let listing = selection.listing
        let pending = upload.pending
        let skipped = listing.items.count - pending.count
        let totalBytes = pending.reduce(Int64(0)) { $0 + $1.size }
        if !json {
            printLine(
                "curlew upload \(self.source) → \(URLRedaction.messages.displaying(upload.target))"
                    + (upload.s3Client == nil ? " (\(mode.rawValue))" : ""))
            var line =
                "  \(formatCount(listing.items.count)) files, \(formatBytes(listing.items.reduce(0) { $0 + $1.size }))"
            if selection.excluded > 0 { line += " (\(formatCount(selection.excluded)) excluded by filters)" }
            if skipped > 0 {
                line += "; \(formatCount(skipped)) already in the journal, \(formatCount(pending.count)) to send"
            }
            printLine(line + "; \(concurrency) at a time")
            if !shard.isWhole {
                printLine(
                    "  shard \(shard)" + (runID.map { " of run \($0)" } ?? "")
                        + ": \(formatCount(selection.ownedByShard)) of the \(formatCount(selection.listedBeforeSharding)) files (by path hash)"
                        + (selection.journalPath.map { ", journal \($0)" } ?? ""))
            }
        }

        let progress = ProgressOutput(enabled: !shared.noProgress)
        let work = Task { try await upload.runKeepingSummary() }
        let interrupts = InterruptMonitor { presses in
            if presses == 1 {
                upload.stopStartingFiles()
                progress.finish()
                writeStandardError("interrupted: finishing the files in flight (interrupt again to cancel them)\n")
            } else {
                work.cancel()
            }
        }
        let reporter = Task {
            await Self.reportProgress(
                upload, totalFiles: pending.count, totalBytes: totalBytes, every: shared.progressInterval.duration,
                to: progress)
        }
        let outcome = try await work.value
        reporter.cancel()
        _ = await reporter.value
        progress.finish()
        interrupts.stop()
        await client.shutdown()

        var summary = outcome.summary
        summary.interrupted = interrupts.wasInterrupted
        summary.runId = runID
        if let server {
            summary.embeddedServer = .init(requests: server.requestsServed, bytes: server.bytesReceived)
            try? await server.shutdown()
        }
        if let outputDirectory = sharding.outputDirectory {
            var record = summary
            record.run = UploadRunRecord(
                plan: UploadRunPlan(url: url ?? "(embedded server)", mode: mode.rawValue, shards: shard.count))
            let path = ShardOptions.outputPath(
                directory: outputDirectory, kind: "upload", shard: shard, suffix: ".json")
            do {
                try Data((try jsonLine(record) + "\n").utf8).write(to: URL(fileURLWithPath: path))
            } catch {
                throw CommandFailure(
                    "cannot write --output-dir \(path.debugDescription): \(error.localizedDescription)")
            }
        }
        if self.json {
            EventLines.standardOutput.writeLine(try jsonLine(summary))
        } else if jsonEvents {
            writeStandardError(summary.text + "\n")
        } else {
            printLine(summary.text)
        }
        if let problem = summary.error { writeStandardError("Error: \(problem)\n") }
        if let failure = outcome.journalFailure {
            throw CommandFailure("the journal could not be written: \(failure)")
        }
        if summary.interrupted { throw ExitCode(130) }
        if summary.failed > 0 { throw ExitCode(1) }
    }

    /// The engine client's connection limits for `--concurrency` requests in flight (files, or an S3 run's
    /// `TransferSlots`).
    ///
    /// Each event loop gets an equal share of the per-host limit, and every part of one file is sent from its
    /// worker's loop, so a limit of `concurrency` in all would leave part of a big file's parts waiting in one loop's
    /// queue while the other loop's share stood idle: half the parallelism on two cores, and parts that fail as
    /// `timeout.waitingForConnection` once a slow link makes the wait longer than the connect timeout. The requests in
    /// flight are bounded by the workers and the slots; the connection limit only keeps libcurl from opening more,
    /// so each loop may have as many as all the requests.
    static func clientConfiguration(concurrency: Int) -> CurlewClient.Configuration {
        var configuration = CurlewClient.Configuration()
        configuration.maxConnectionsPerHost = concurrency * max(configuration.loopCount, 1)
        return configuration
    }

    /// The engine client, where the files go (and a line saying so, printed once the run could start), and the
    /// embedded server when no URL was given.
    private func openDestination() async throws -> (
        client: CurlewClient, destination: UploadDestination, destinationLine: String?, server: LoopbackServer?
    ) {
        var clientConfiguration = Self.clientConfiguration(concurrency: concurrency)
        clientConfiguration.proxy = .none
        shared.applyTLS(to: &clientConfiguration)
        let client = CurlewClient(configuration: clientConfiguration)

        var server: LoopbackServer?
        if url == nil { server = try await LoopbackServer.start() }
        let (destination, destinationLine) = try plannedDestination(embeddedServerURL: server?.baseURL)
        return (client, destination, destinationLine, server)
    }

    /// Where the files go, and a line saying so (printed once the run could start: the journal opened, the URL
    /// checked). Opens nothing: `embeddedServerURL` is the embedded server's when no URL was given (nil for a dry
    /// run, which starts none; an embedded server's journal names no address).
    private func plannedDestination(
        embeddedServerURL: String?
    ) throws -> (destination: UploadDestination, destinationLine: String?) {
        let destination: UploadDestination
        var destinationLine: String?
        if let url, S3Location.isS3(url) {
            // A bad bucket name is a usage error (exit 64), before any credential is looked for.
            do { _ = try S3Location(parsing: url) } catch { throw ValidationError("\(error)") }
            let resolved: AWSCredentialResolver.Resolved
            do { resolved = try AWSCredentialResolver.fromProcess().resolve() } catch {
                throw CommandFailure("\(error)")
            }
            let region = region ?? resolved.region ?? "us-east-1"
            var objectOptions = S3ObjectOptions()
            objectOptions.partSize = partSize.bytes
            objectOptions.contentType = contentType
            objectOptions.metadata = Dictionary(metadata.map(Self.splitField).map { ($0.name, $0.value) }) { $1 }
            objectOptions.storageClass = storageClass
            objectOptions.acl = acl
            objectOptions.skipExisting = skipExisting
            let s3: S3Destination
            do {
                // As written: a stream (`upload -`) takes its key exactly.
                s3 = try S3Destination(
                    url, endpoint: endpoint, region: region, addressing: s3Addressing,
                    credentials: resolved.credentials, objectOptions: objectOptions)
            } catch {
                throw ValidationError("\(error)")
            }
            destination = .s3(s3)
            let style = s3.endpoint.virtualHosted ? "virtual-hosted" : "path-style"
            destinationLine =
                "s3: \(s3.endpoint.url(pathAndQuery: "")) (\(style)), region \(region), credentials from \(resolved.source)"
        } else if let url {
            destination =
                mode == .put ? .put(baseURL: url) : .multipartForm(url: url, fields: fields.map(Self.splitField))
        } else {
            let embeddedURL = embeddedServerURL ?? "http://127.0.0.1"
            var embeddedDestination: UploadDestination =
                mode == .put
                ? .put(baseURL: embeddedURL + "/files/")
                : .multipartForm(url: embeddedURL + "/upload", fields: fields.map(Self.splitField))
            embeddedDestination.journalName = "(embedded server)"
            destination = embeddedDestination
            destinationLine =
                "embedded server: \(embeddedURL) (SwiftNIO, loopback only; checksums and discards what it receives)"
        }
        return (destination, destinationLine)
    }

    /// The library's configuration from the options.
    private func uploadConfiguration(
        source: UploadSource, destination: UploadDestination, shard: ShardAssignment
    ) throws -> UploadConfiguration {
        var configuration = UploadConfiguration(source: source, destination: destination)
        configuration.concurrency = concurrency
        configuration.retries = retries
        configuration.headers = try parseHeaderOptions(headers)
        configuration.gzip = gzip
        configuration.checksumHeader = checksumHeader
        configuration.bytesPerSecondLimit = bwlimit?.bytes
        configuration.filesPerSecond = rate
        configuration.includes = include
        configuration.excludes = exclude
        configuration.minSize = minSize?.bytes
        configuration.maxSize = maxSize?.bytes
        configuration.minAge = minAge?.duration
        configuration.maxAge = maxAge?.duration
        configuration.journalPath = journal
        configuration.shard = shard
        if jsonEvents { configuration.onEvent = EventLines.standardOutput.write }
        return configuration
    }

    /// `curlew sync`: the source mirrored at the destination (``Sync``).
    func sync(deletes: Bool) async throws {
        try shared.requireSupportedLibcurl()
        let (shard, _) = try sharding.resolved()
        do {
            try await syncFiles(shard: shard, deletes: deletes)
        } catch let error as UploadError {
            throw error.commandError
        }
    }

    private func syncFiles(shard: ShardAssignment, deletes: Bool) async throws {
        let source = try UploadSource.at(self.source)
        let (client, destination, destinationLine, _) = try await openDestination()
        let sync = try Sync(
            try uploadConfiguration(source: source, destination: destination, shard: shard), client: client,
            deletes: deletes)
        if dryRun {
            let preview: SyncPreview
            do { preview = try await sync.plan() } catch {
                await client.shutdown()
                throw error
            }
            await client.shutdown()
            for upload in preview.uploads {
                printLine("would send \(upload.path) (\(formatBytes(upload.size))): \(upload.reason)")
            }
            for path in preview.deletions { printLine("would delete \(path)") }
            printLine(
                "dry run: \(formatCount(preview.uploads.count)) to send (files of the same size on S3 only if their "
                    + "checksums differ), \(formatCount(preview.unchanged.count)) unchanged, "
                    + "\(formatCount(preview.deletions.count)) to delete"
                    + (deletes || preview.deletions.isEmpty ? "" : " (without --delete: none)"))
            return
        }
        let json = self.json || jsonEvents
        if let destinationLine, !json { printLine(destinationLine) }
        let summary: SyncSummary
        do { summary = try await sync.run() } catch {
            await client.shutdown()
            throw error
        }
        await client.shutdown()
        if self.json {
            EventLines.standardOutput.writeLine(try jsonLine(summary))
        } else {
            let reasons = summary.toSendByReason.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            var text = summary.upload.text + "\nsync: compared and sent "
            text += reasons.isEmpty ? "none" : reasons.joined(separator: ", ")
            let unchanged = summary.unchangedByRule.values.reduce(0, +)
            if unchanged > 0 { text += "; \(formatCount(unchanged)) unchanged (size and time)" }
            text += "; \(formatCount(summary.deleted)) deleted"
            if summary.deletionsWithheld > 0 {
                var reasons: [String] = []
                if summary.upload.failed > 0 || summary.upload.notStarted > 0 { reasons.append("files failed") }
                if summary.sourcePathsNotListed > 0 {
                    reasons.append(
                        "\(formatCount(summary.sourcePathsNotListed)) path(s) of the source could not be listed or read"
                    )
                }
                if summary.upload.interrupted { reasons.append("the run was interrupted") }
                text +=
                    "; \(formatCount(summary.deletionsWithheld)) deletions withheld because "
                    + reasons.joined(separator: " and ")
            }
            if !summary.deleteFailures.isEmpty { text += "; \(summary.deleteFailures.count) deletions refused" }
            if jsonEvents { writeStandardError(text + "\n") } else { printLine(text) }
        }
        if summary.upload.failed > 0 || !summary.deleteFailures.isEmpty || summary.upload.interrupted {
            throw ExitCode(1)
        }
    }

    /// `curlew upload - URL`: standard input as one object (``StreamUpload``), in constant memory.
    private func sendStandardInput(
        to destination: UploadDestination, client: CurlewClient, destinationLine: String?
    ) async throws {
        var configuration = StreamUpload.Configuration(destination: destination)
        configuration.concurrency = concurrency
        configuration.retries = retries
        configuration.headers = try parseHeaderOptions(headers)
        configuration.bytesPerSecondLimit = bwlimit?.bytes
        let upload = try StreamUpload(configuration, client: client)
        if let destinationLine, !json { printLine(destinationLine) }
        let input = DescriptorReader(descriptor: STDIN_FILENO)
        let work = Task { await upload.run { try await input.read(upTo: $0) } }
        // The stream is one object: an interrupt cancels it at once, and an S3 multipart upload is aborted rather
        // than completed with what was read so far (a producer killed by the same Ctrl-C ends the input early).
        let interrupts = InterruptMonitor { _ in work.cancel() }
        let summary = await work.value
        interrupts.stop()
        await client.shutdown()
        if json {
            print(try jsonLine(summary))
        } else if let error = summary.error {
            printLine("curlew upload - → \(summary.url): failed: \(error)")
        } else {
            let seconds = max(summary.seconds, 0.001)
            printLine(
                "curlew upload - → \(summary.url): \(formatBytes(summary.bytes))"
                    + (summary.parts > 0 ? " in \(summary.parts) parts" : "")
                    + String(
                        format: " in %.2f s (%@/s), sha256 %@", seconds,
                        formatBytes(Int64(Double(summary.bytes) / seconds)), summary.sha256 ?? "-")
                    + (summary.sha256Stored ? " (stored with the object)" : ""))
        }
        if interrupts.wasInterrupted { throw ExitCode(130) }
        if summary.error != nil { throw ExitCode(1) }
    }

    /// `--dry-run`: what would be sent, one line each, then a count; nothing is opened or sent.
    private func printDryRun(_ pending: [UploadItem], listing: UploadListing, excluded: Int) {
        let s3 = url.flatMap { S3Location.isS3($0) ? try? S3Location(parsing: $0) : nil }
        for item in pending {
            var line = "would send \(item.relativePath) (\(formatBytes(item.size)))"
            if let s3 {
                let plan = PartPlan(fileSize: item.size, requestedPartSize: partSize.bytes)
                line +=
                    " → s3://\(s3.bucket)/\(s3.key(for: item.relativePath))"
                    + (plan.isMultipart ? " in \(plan.partCount) parts of \(formatBytes(plan.partSize))" : "")
            }
            printLine(line)
        }
        let bytes = pending.reduce(Int64(0)) { $0 + $1.size }
        var summary = "dry run: \(formatCount(pending.count)) files, \(formatBytes(bytes)) would be sent"
        if listing.items.count > pending.count {
            summary += "; \(formatCount(listing.items.count - pending.count)) already in the journal"
        }
        if excluded > 0 { summary += "; \(formatCount(excluded)) excluded by filters" }
        if skipExisting { summary += "; --skip-existing is not checked (that needs a request per file)" }
        printLine(summary)
    }

    private static func reportProgress(
        _ upload: Upload, totalFiles: Int, totalBytes: Int64, every interval: Duration, to output: ProgressOutput
    ) async {
        guard output.enabled else { return }
        let clock = ContinuousClock()
        let start = clock.now
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let snapshot = upload.progressSnapshot
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
                bytesPerSecond > 0 ? remainingBytes / bytesPerSecond : 0,
                filesPerSecond > 0 ? remainingFiles / filesPerSecond : 0)
            line += (snapshot.files + snapshot.failed) > 0 ? String(format: ", ETA %.0f s", eta) : ", ETA -"
            output.update(line)
        }
    }

    private static func splitField(_ field: String) -> (name: String, value: String) {
        let equals = field.firstIndex(of: "=")!
        return (String(field[..<equals]), String(field[field.index(after: equals)...]))
    }
}

/// The summary's text form: what `curlew upload` and `curlew merge` print without `--json`.
extension UploadSummary {
    var text: String {
        var lines: [String] = []
        func row(_ label: String, _ value: String) {
            lines.append(label.padding(toLength: 14, withPad: " ", startingAt: 0) + value)
        }
        var outcome =
            "\(formatCount(uploaded)) uploaded, \(formatCount(skipped)) skipped (journal), \(formatCount(failed)) failed"
        if alreadyThere > 0 {
            let rules = alreadyThereByRule.sorted { $0.key < $1.key }.map { "\($0.key): \(formatCount($0.value))" }
            outcome += ", \(formatCount(alreadyThere)) already there (\(rules.joined(separator: ", ")))"
        }
        if let resentAfterCrash {
            outcome +=
                ", \(formatCount(resentAfterCrash.count)) forms resent after a crash (stored twice unless the server"
                + " honours Idempotency-Key: \(resentAfterCrash.joined(separator: ", ")))"
        }
        if excluded > 0 { outcome += ", \(formatCount(excluded)) excluded" }
        if notStarted > 0 { outcome += ", \(formatCount(notStarted)) not started" }
        if interrupted { outcome += ", interrupted" }
        if let placement = ShardAssignment.summaryRow(shard: shard, runId: runId, shardsMerged: shardsMerged) {
            row(placement.label, placement.value)
        }
        row("files", "\(formatCount(files)): " + outcome)
        row("bytes", formatBytes(bytes))
        row("duration", String(format: "%.2f s", durationSeconds))
        row("throughput", String(format: "%.1f files/s, %.1f MB/s", filesPerSecond, megabytesPerSecond))
        row(
            "status codes",
            statusCodes.isEmpty
                ? "none"
                : statusCodes.sorted { $0.key < $1.key }.map { "\($0.key): \(formatCount($0.value))" }.joined(
                    separator: ", "))
        row("retries", formatCount(retries))
        row("connections", "\(formatCount(connectionsOpened)) opened")
        if let journal { row("journal", journal) }
        if let embeddedServer {
            row(
                "server",
                "embedded server received \(formatCount(embeddedServer.requests)) requests, \(formatBytes(Int64(embeddedServer.bytes)))"
            )
        }
        if !failures.isEmpty {
            lines.append("failed files:")
            for failure in failures { lines.append("  \(failure.path): \(failure.error)") }
        }
        return lines.joined(separator: "\n")
    }
}
