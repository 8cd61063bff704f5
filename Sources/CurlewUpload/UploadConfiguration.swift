public import CurlewS3
public import CurlewSharding

/// What to upload, where to, and how: the value an ``Upload`` is made from.
///
/// Only `source` and `destination` are required; every other setting has the command's default.
public struct UploadConfiguration: Sendable {
    /// The files to send.
    public var source: UploadSource
    /// Where they go.
    public var destination: UploadDestination
    /// Files in flight at once (for S3: requests in flight, across the parts of large files too).
    public var concurrency = 8
    /// Retries per request, with bounded exponential backoff, for failures that are safe to retry (0 to 10).
    public var retries = 2
    /// Extra request headers, e.g. `Authorization` (http(s) destinations only: S3 requests are signed).
    public var headers: [(name: String, value: String)] = []
    /// Compresses each file with gzip on the fly (`Content-Encoding: gzip`; http(s) destinations only).
    public var gzip = false
    /// A digest of each file in its PUT's headers, for servers that check it (``UploadDestination/put(baseURL:)``
    /// without gzip only).
    public var checksumHeader: UploadChecksumHeader?
    /// Bytes per second at most, across every file and part of the upload; nil for no limit.
    public var bytesPerSecondLimit: Int64?
    /// Files started per second at most, to spare a server; nil starts the next file as soon as one finishes.
    public var filesPerSecond: Double?
    /// Glob patterns of files to send (`*.jpg`, `logs/*`); empty sends every file.
    public var includes: [String] = []
    /// Glob patterns of files not to send; excludes win over includes.
    public var excludes: [String] = []
    /// Files smaller than this many bytes are not sent.
    public var minSize: Int64?
    /// Files larger than this many bytes are not sent.
    public var maxSize: Int64?
    /// Files modified more recently than this are not sent (still being written, say).
    public var minAge: Duration?
    /// Files modified longer ago than this are not sent (only the last day's, say).
    public var maxAge: Duration?
    /// Where to record every file the server accepted; an upload with the same journal skips those. Multipart
    /// uploads to S3 are journaled part by part, so a stopped upload resumes a large file from its next part.
    /// One upload at a time holds a journal: making an ``Upload`` whose journal another upload (in this process or
    /// another) holds throws ``UploadError`` of kind ``UploadError/Kind/journal``; an upload holds it from when it
    /// is made until its run ends, or until it is dropped unrun.
    public var journalPath: String?
    /// Called with every file event as it happens (started, part stored, done, skipped with its rule, failed with
    /// its cause), from the upload's workers, several at once: what `curlew upload --json-events` writes out. Keep it
    /// quick; files of one worker wait for it.
    public var onEvent: (@Sendable (UploadEvent) -> Void)?
    /// This process's share of the files, by a stable hash of their paths; ``ShardAssignment/whole`` sends all.
    /// A sharded upload keeps its journal at `journalPath` + `.shard-I-of-N`.
    public var shard: ShardAssignment = .whole

    /// The patterns, sizes and ages, as one filter.
    package var filter: UploadFilter {
        UploadFilter(
            includes: includes, excludes: excludes, minSize: minSize, maxSize: maxSize, minAge: minAge, maxAge: maxAge)
    }

    /// A configuration with the defaults: 8 files at a time, 2 retries, no journal.
    public init(source: UploadSource, destination: UploadDestination) {
        self.source = source
        self.destination = destination
    }
}

/// Where an upload sends its files.
///
/// A struct rather than an enum, so that destinations can be added without breaking a caller's `switch`: it is
/// written as enum cases were (`.put(baseURL: url)`, `.s3(destination)`) and read back with properties (``baseURL``,
/// ``multipartForm``, ``s3``), each nil for the other kinds; ``name`` is stable.
public struct UploadDestination: Sendable, CustomStringConvertible {
    /// The package's exhaustive view of the destination.
    package enum Storage: Sendable {
        case put(baseURL: String)
        case multipartForm(url: String, fields: [(name: String, value: String)])
        case s3(S3Destination)
    }

    /// What the destination is, for an exhaustive `switch` inside the package.
    package let storage: Storage
    /// What a journal records the destination as when its address says nothing lasting: the command's embedded
    /// server, on a new port every run. Nil: the address (`Upload.journalDestination`).
    package var journalName: String?

    private init(_ storage: Storage) { self.storage = storage }

    /// Each file as a PUT to `baseURL` followed by its relative path, each segment percent-encoded (WebDAV, most
    /// object stores' plain HTTP APIs). A `/` is added to `baseURL`'s path if it has none; a query on `baseURL`
    /// (`?token=…`) follows each file's path.
    public static func put(baseURL: String) -> UploadDestination { UploadDestination(.put(baseURL: baseURL)) }

    /// Each file as a POST of a multipart form to `url`: the file as part `file`, its relative path as field
    /// `path`, then the extra `fields`.
    public static func multipartForm(
        url: String, fields: [(name: String, value: String)] = []
    ) -> UploadDestination {
        UploadDestination(.multipartForm(url: url, fields: fields))
    }

    /// Each file as an S3 object, signed with SigV4; large files in parts.
    public static func s3(_ destination: S3Destination) -> UploadDestination { UploadDestination(.s3(destination)) }

    /// The base URL of a ``put(baseURL:)`` destination, as given; nil for every other kind.
    public var baseURL: String? {
        if case .put(let baseURL) = storage { baseURL } else { nil }
    }

    /// The URL and extra fields of a ``multipartForm(url:fields:)`` destination; nil for every other kind.
    public var multipartForm: (url: String, fields: [(name: String, value: String)])? {
        if case .multipartForm(let url, let fields) = storage { (url, fields) } else { nil }
    }

    /// The bucket, endpoint and credentials of an ``s3(_:)`` destination; nil for every other kind.
    public var s3: S3Destination? {
        if case .s3(let destination) = storage { destination } else { nil }
    }

    /// The stable name: the static member's name (`"put"`, `"multipartForm"`, `"s3"`).
    public var name: String {
        switch storage {
        case .put: "put"
        case .multipartForm: "multipartForm"
        case .s3: "s3"
        }
    }

    /// The ``name``: the URL and credentials are left out, so a destination can be logged.
    public var description: String { name }
}

/// An S3 bucket and key prefix, and how to reach and sign for it.
public struct S3Destination: Sendable {
    /// The bucket and the key prefix every relative path is appended to.
    public var location: S3Location
    /// Where the bucket's requests go (its bucket must be the location's).
    public var endpoint: S3Endpoint
    /// What every request is signed with.
    public var credentials: AWSCredentials
    /// What every object carries, and how large files are cut into parts.
    public var objectOptions: S3ObjectOptions

    /// A destination from an `s3://BUCKET/PREFIX` URL.
    ///
    /// - Parameters:
    ///   - url: `s3://BUCKET/PREFIX`.
    ///   - endpoint: the store's `http(s)://host[:port]`; nil for AWS's regional endpoint.
    ///   - region: the bucket's region.
    ///   - addressing: where the bucket goes in request URLs.
    ///   - credentials: what every request is signed with.
    ///   - objectOptions: content type, metadata, storage class, ACL, part size, skip-existing.
    /// - Throws: ``S3ConfigurationError`` for a bad URL, bucket name or endpoint.
    public init(
        _ url: String, endpoint: String? = nil, region: String = "us-east-1", addressing: S3Addressing = .auto,
        credentials: AWSCredentials, objectOptions: S3ObjectOptions = S3ObjectOptions()
    ) throws(S3ConfigurationError) {
        let location = try S3Location(parsing: url)
        self.location = location
        self.endpoint = try S3Endpoint(
            endpoint: endpoint, region: region, bucket: location.bucket, addressing: addressing)
        self.credentials = credentials
        self.objectOptions = objectOptions
    }
}

/// How far an upload is, as ``Upload/progress`` reports it after each file.
public struct UploadProgress: Sendable, Hashable {
    /// Files the server accepted, or already held.
    public let filesDone: Int
    /// Files that failed.
    public let filesFailed: Int
    /// Files this run has to send (the journal's and the filters' left out).
    public let filesTotal: Int
    /// Bytes sent so far, large files counted while they are sent.
    public let bytesSent: Int64
    /// Bytes of the files this run has to send.
    public let bytesTotal: Int64
}
