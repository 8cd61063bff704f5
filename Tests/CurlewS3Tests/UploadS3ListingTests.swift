import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewS3

/// ListObjectsV2 page after page, and DeleteObject, against moto with signature checks on; boto3 says what is there.
@Suite struct UploadS3ListingTests {
    @Test func everyPageIsReadAndOnlyThePrefixIsListed() async throws {
        let moto = try await MotoServer.shared(.checked)
        let bucket = try await moto.makeBucket("listing")
        let client = CurlewClient()
        let s3 = S3Client(
            endpoint: try S3Endpoint(endpoint: moto.endpoint, region: "us-east-1", bucket: bucket),
            credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey),
            client: client)
        let keys = (0..<7).map { "in/file-\($0).txt" } + ["in/deep/x.bin", "out/y.txt"]
        for (index, key) in keys.enumerated() {
            _ = try await s3.send(.put, key: key, body: .bytes(Array(repeating: UInt8(index), count: index + 1)))
        }
        // Three keys a page: three pages for the eight keys under `in`. (moto's signature check refuses a
        // prefix ending in `/`, boto3's own requests included, so this one does not.)
        let listed = try await s3.listObjects(prefix: "in", pageSize: 3)
        #expect(listed.map(\.key) == keys.filter { $0.hasPrefix("in/") }.sorted())
        #expect(listed.first { $0.key == "in/file-6.txt" }?.size == 7)
        let pages = moto.loggedRequests { method, target in
            method == "GET" && target.hasPrefix("/\(bucket)") && target.contains("list-type=2")
        }
        #expect(pages.count == 3, "8 keys at 3 a page")

        try await s3.deleteObject(key: "in/deep/x.bin")
        try await s3.deleteObject(key: "in/never-there")
        let inventory = try await moto.inspect("inventory", bucket: bucket)
        let remaining = try #require(try JSONSerialization.jsonObject(with: Data(inventory.utf8)) as? [String: Any])
        #expect(Set(remaining.keys) == Set(keys).subtracting(["in/deep/x.bin"]))
        await client.shutdown()
    }
}
