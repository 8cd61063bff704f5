import ArgumentParser

@main
struct CurlewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "curlew",
        abstract: "An HTTP load generator and bulk uploader on libcurl.",
        discussion: """
            Without a URL, both subcommands start an embedded loopback server (SwiftNIO) and run against it. \
            `curlew bench` measures request rates and latencies; `curlew upload` sends a directory tree or a list \
            of files, resumable through a journal. `curlew version` shows the libcurl in use.
            """,
        version: "curlew \(CurlewVersion.curlew) (libcurl \(CurlewVersion.libcurl))",
        subcommands: [
            BenchCommand.self, UploadCommand.self, SyncCommand.self, MergeCommand.self, CompareCommand.self,
            VersionCommand.self,
        ]
    )
}
