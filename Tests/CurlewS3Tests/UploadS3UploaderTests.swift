import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewS3

/// ``S3ObjectOptions/skipExisting`` against moto (signature checks on): an object is recognised by the first rule it
/// offers, whatever part size or tool stored it, a file changed at the same size never is, and moto's request log
/// shows that nothing was written for a recognised file.
@Suite(.serialized) struct UploadS3UploaderTests {
    static let fileSize = (20 << 20) + 3

    /// An uploader of `bucket` on moto's checked server, with no journal.
    static func uploader(
        _ moto: MotoServer, bucket: String, client: CurlewClient, partSize: Int64, skipExisting: Bool
    ) throws -> S3Uploader {
        let s3 = S3Client(
            endpoint: try S3Endpoint(endpoint: moto.endpoint, region: "us-east-1", bucket: bucket),
            credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey),
            client: client)
        var options = S3ObjectOptions()
        options.partSize = partSize
        options.skipExisting = skipExisting
        return S3Uploader(client: s3, options: options, journal: nil)
    }

    static func upload(_ uploader: S3Uploader, path: String, key: String) async throws -> S3FileOutcome {
        let listed = UploadItem(relativePath: key, absolutePath: path, size: 0, modifiedNanoseconds: 0)
        let item = try #require(listed.currentState())
        return await uploader.upload(item, key: key, sent: { _ in })
    }

    /// Writes (PUT, POST) moto logged for the bucket.
    static func writes(_ moto: MotoServer, _ bucket: String) -> Int {
        moto.loggedRequests { method, target in
            (method == "PUT" || method == "POST") && target.hasPrefix("/\(bucket)/")
        }.count
    }

    @Test func anObjectCurlewStoredIsRecognisedWhateverPartSizeTheNextRunUses() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("rules")
        let tree = try SourceTree(prefix: "curlew-s3-rules")
        defer { tree.remove() }
        let path = try tree.write("large.bin", SourceTree.content(for: "large", size: Self.fileSize))
        let small = try tree.write("small.txt", SourceTree.content(for: "small", size: 4000))
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }

        let first = try Self.uploader(moto, bucket: bucket, client: client, partSize: 8 << 20, skipExisting: true)
        #expect(try await Self.upload(first, path: path, key: "large.bin") == .uploaded)
        #expect(try await Self.upload(first, path: small, key: "small.txt") == .uploaded)
        let inventory = try await moto.inspect("inventory", bucket: bucket)
        #expect(inventory.contains("curlew-sha256"), "the whole file's SHA-256 is stored with each object")
        let writesAfterFirst = Self.writes(moto, bucket)

        // The default part size now: the parts' composite checksum differs, the recorded SHA-256 does not.
        let second = try Self.uploader(moto, bucket: bucket, client: client, partSize: 16 << 20, skipExisting: true)
        #expect(try await Self.upload(second, path: path, key: "large.bin") == .alreadyThere(.wholeFileSHA256Metadata))
        #expect(try await Self.upload(second, path: small, key: "small.txt") == .alreadyThere(.wholeFileSHA256Metadata))
        #expect(Self.writes(moto, bucket) == writesAfterFirst, "nothing was written for files the bucket held")

        // The same size, other bytes: sent again.
        try tree.write("large.bin", SourceTree.content(for: "changed", size: Self.fileSize))
        #expect(try await Self.upload(second, path: path, key: "large.bin") == .uploaded)
    }

    /// What another tool stored (boto3's upload_file, no Curlew metadata) is recognised by the store's checksum or
    /// the ETag, with the part size read from the store, whatever part size this run uses.
    @Test(arguments: [
        (partSize: 8 << 20, checksum: "sha256", rule: S3ExistingObjectRule.partsSHA256),
        (partSize: 8 << 20, checksum: "none", rule: .etagMD5),
        (partSize: 64 << 20, checksum: "sha256", rule: .objectSHA256),
        (partSize: 64 << 20, checksum: "none", rule: .etagMD5),
    ])
    func anObjectAnotherToolStoredIsRecognisedByItsChecksumOrETag(
        partSize: Int, checksum: String, rule: S3ExistingObjectRule
    ) async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("boto")
        let tree = try SourceTree(prefix: "curlew-s3-boto")
        defer { tree.remove() }
        let path = try tree.write("large.bin", SourceTree.content(for: "large", size: Self.fileSize))
        _ = try await moto.inspect("put", bucket: bucket, ["large.bin", path, String(partSize), checksum])
        let writesAfterBoto = Self.writes(moto, bucket)
        let client = CurlewClient()
        defer { Task { await client.shutdown() } }

        let uploader = try Self.uploader(moto, bucket: bucket, client: client, partSize: 5 << 20, skipExisting: true)
        #expect(try await Self.upload(uploader, path: path, key: "large.bin") == .alreadyThere(rule))
        #expect(Self.writes(moto, bucket) == writesAfterBoto)

        try tree.write("large.bin", SourceTree.content(for: "changed", size: Self.fileSize))
        #expect(try await Self.upload(uploader, path: path, key: "large.bin") == .uploaded, "same size, other bytes")
    }
}
