import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewS3

/// ListObjectsV2 page after page, and DeleteObject, against moto with signature checks on; boto3 says what is there.
@Suite struct UploadS3ListingTests {
    /// MinIO (Go's XML encoder) writes `'` as `&#39;` and a line feed as `&#xA;`; AWS writes a carriage return as
    /// `&#13;`. Before, only the named entities and `&#34;` were decoded: a key `John's.txt` listed as
    /// `John&#39;s.txt`, so `sync` sent the file again on every run and `--delete` deleted a key that does not exist.
    @Test func listedKeysHaveEveryCharacterReferenceDecoded() {
        let xml = """
            <ListBucketResult><IsTruncated>false</IsTruncated>
            <Contents><Key>John&#39;s&#xA;line&#13;.txt</Key><Size>3</Size></Contents>
            <Contents><Key>a &amp;amp; &lt;b&gt; &quot;c&quot; &apos;d&apos; &#x1F600; &#0; &#+39; &#x; &amp</Key><Size>4</Size></Contents>
            </ListBucketResult>
            """
        let keys = S3XML.parseObjectListing(xml).objects.map(\.key)
        #expect(keys == ["John's\nline\r.txt", "a &amp; <b> \"c\" 'd' \u{1F600} &#0; &#+39; &#x; &amp"])
        // What the upload writes reads back as the same key, a carriage return included.
        let awkward = "r\u{D}n\u{A}<&>\"'"
        #expect(S3XML.unescape(Substring(S3XML.escape(awkward))) == awkward)
        #expect(!S3XML.escape(awkward).contains("\r"))
    }

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
