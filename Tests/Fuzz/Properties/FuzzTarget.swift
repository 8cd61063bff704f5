/// One place where bytes from outside (a caller, a file, a server) become decisions, and the property that must
/// hold for every input: `check` returns nil, or a description of how the property failed.
///
/// `curlew-fuzz NAME` runs a target under libFuzzer (`make fuzz`); the ordinary test suite replays each target's
/// corpus in `Tests/Fuzz/Corpus/NAME/` through the same `check`, so an input that once failed stays fixed.
package struct FuzzTarget: Sendable {
    package let name: String
    package let check: @Sendable ([UInt8]) -> String?

    package static let all: [FuzzTarget] = [
        FuzzTarget(name: "url", check: URLValidationProperty.check),
        FuzzTarget(name: "header-field", check: HeaderFieldProperty.check),
        FuzzTarget(name: "header-line", check: HeaderLineProperty.check),
        FuzzTarget(name: "multipart", check: MultipartProperty.check),
        FuzzTarget(name: "gzip", check: GzipProperty.check),
        FuzzTarget(name: "sigv4", check: SigV4Property.check),
        FuzzTarget(name: "bench-targets", check: BenchTargetsProperty.check),
        FuzzTarget(name: "load-options", check: LoadOptionsProperty.check),
        FuzzTarget(name: "upload-journal", check: UploadJournalProperty.check),
        FuzzTarget(name: "hdr-log", check: HdrLogProperty.check),
        FuzzTarget(name: "shard-file", check: ShardFileProperty.check),
        FuzzTarget(name: "transfer-framing", check: TransferFramingProperty.check),
        FuzzTarget(name: "sync-listing", check: SyncListingProperty.check),
        FuzzTarget(name: "content-decoding", check: ContentDecodingProperty.check),
    ]

    package static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}
