import ArgumentParser
import CurlewEngine
import CurlewSharding
import CurlewUpload

/// `curlew sync SOURCE DEST`: `curlew upload`'s options, plus `--delete`.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Make a WebDAV folder or an S3 prefix mirror a directory: send what is missing or changed, and "
            + "with --delete remove what the source no longer has.",
        discussion: """
            Takes every option of `curlew upload` (journal, filters, shards, S3 settings). A file the destination \
            lacks is sent (missing); one of another size is sent (size). On S3 a file of the same size is compared \
            by the store's checksums (the SHA-256 Curlew stores, the object's or parts' SHA-256, the ETag) and sent \
            only if they differ (checksum); on WebDAV, which reports no checksum, it is left alone when the \
            destination's copy is at least as new (size-and-time) and sent otherwise (newer). With --delete, \
            destination files the source no longer lists are removed once every upload succeeded, and never when \
            one failed; files the include and exclude patterns leave out are kept, and a shard deletes only files \
            of its own. --dry-run lists the destination and shows what would be sent and deleted, sending nothing \
            else. --json-events reports every file as it goes, deletions included.
            Exit status: 0 when everything was sent and deleted, 1 otherwise.
            """)

    @OptionGroup var upload: UploadCommand

    @Flag(
        help:
            "Delete destination files the source no longer has, after every upload succeeded (never when one failed).")
    var delete = false

    func validate() throws {
        guard upload.url != nil else {
            throw ValidationError("sync needs a destination: a WebDAV URL or s3://BUCKET/PREFIX")
        }
        if upload.source == "-" { throw ValidationError("sync needs a directory or manifest: - is a single stream") }
        if upload.mode != .put {
            throw ValidationError("sync needs a destination it can list: --mode multipart posts forms")
        }
        if upload.gzip { throw ValidationError("sync compares sizes: it cannot send --gzip copies") }
    }

    func run() async throws {
        try await upload.sync(deletes: delete)
    }
}
