import Testing

@testable import CurlewS3

@Suite struct UploadS3ProtocolTests {
    static func reply(_ status: Int, _ code: String, region: String? = nil) -> S3ErrorReply {
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>\(code)</Code><Message>m &amp; more</Message>"
        if let region { xml += "<Region>\(region)</Region>" }
        return S3ErrorReply(status: status, body: Array((xml + "<RequestId>1</RequestId></Error>").utf8))
    }

    @Test(arguments: [
        (403, "InvalidAccessKeyId", "bad credentials"), (403, "SignatureDoesNotMatch", "bad credentials"),
        (400, "ExpiredToken", "bad credentials"), (403, "RequestTimeTooSkewed", "clock skew"),
        (404, "NoSuchBucket", "missing bucket"),
        (403, "AccessDenied", "access denied"),
    ])
    func runWideRefusalsAreNamed(status: Int, code: String, name: String) {
        #expect(Self.reply(status, code).runProblem?.hasPrefix(name) == true)
    }

    @Test func aWrongRegionNamesTheBucketsRegion() {
        let problem = Self.reply(400, "AuthorizationHeaderMalformed", region: "eu-central-1").runProblem
        #expect(
            problem
                == "wrong region: the bucket is in eu-central-1; use --region eu-central-1 (AuthorizationHeaderMalformed)"
        )
        // HEAD replies have no body; S3 says the region in a header, with 301 (another region's endpoint) or 400
        // (signed for another region: a --skip-existing run's first request).
        let moved = S3ErrorReply(status: 301, body: [], bucketRegionHeader: "ap-south-1")
        #expect(moved.runProblem == "wrong region: the bucket is in ap-south-1; use --region ap-south-1 (HTTP 301)")
        let misSigned = S3ErrorReply(status: 400, body: [], bucketRegionHeader: "eu-west-3")
        #expect(misSigned.runProblem == "wrong region: the bucket is in eu-west-3; use --region eu-west-3 (HTTP 400)")
        // A 400 to a HEAD that names no region, or the request's own, is about the request, not the run.
        #expect(S3ErrorReply(status: 400, body: []).runProblem == nil)
        #expect(
            S3ErrorReply(status: 400, body: [], bucketRegionHeader: "eu-west-3", requestRegion: "eu-west-3").runProblem
                == nil)
    }

    @Test func fileLevelRefusalsDoNotStopTheRun() {
        #expect(Self.reply(400, "BadDigest").runProblem == nil)
        #expect(Self.reply(400, "EntityTooLarge").runProblem == nil)
        #expect(!Self.reply(400, "BadDigest").isRetryable)
        #expect(Self.reply(503, "SlowDown").isRetryable)
        #expect(Self.reply(500, "InternalError").isRetryable)
        #expect(Self.reply(400, "BadDigest").summary == "HTTP 400 BadDigest: m & more")
    }

    /// A 2xx body is an error when its root element is `Error`, after S3's keep-alive whitespace and an XML
    /// declaration; a successful reply that names `<Error>` inside it is not one.
    @Test(arguments: [
        ("<Error><Code>InternalError</Code></Error>", true),
        ("   \n <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code></Error>", true),
        ("\u{FEFF}<?xml version=\"1.0\"?><!-- a comment --> <Error xmlns=\"x\"><Code>SlowDown</Code></Error>", true),
        (
            "<?xml version=\"1.0\"?><CompleteMultipartUploadResult><ETag>\"e-2\"</ETag></CompleteMultipartUploadResult>",
            false
        ),
        ("<CopyObjectResult><Key>a</Key><Note><Error></Error></Note></CopyObjectResult>", false),
        ("<Errors><Error/></Errors>", false),
        ("", false),
        ("<?xml version=\"1.0\"", false),
    ])
    func anErrorDocumentIsOneWhoseRootIsError(body: String, isError: Bool) {
        #expect(S3XML.isErrorDocument(Array(body.utf8)) == isError)
    }

    /// A whole document: a root element, closed (whatever its name); an empty, declaration-only or cut body is not.
    @Test func aWholeDocumentHasItsRootClosed() {
        let whole = "  <?xml version=\"1.0\"?>\n<CopyObjectResult><ETag>e</ETag></CopyObjectResult>"
        #expect(S3XML.isWholeDocument(Array(whole.utf8)))
        #expect(S3XML.rootElementName(of: Array(whole.utf8)) == "CopyObjectResult")
        for body in [
            "<X/>", "<X a=\"1\" />", "<!DOCTYPE X><X></X >", "<s3:X xmlns:s3=\"u\">\r\n<Y/></s3:X>\r\n",
        ] {
            #expect(S3XML.isWholeDocument(Array(body.utf8)), "\(body)")
        }
        for body in [
            "", "   ", "<?xml version=\"1.0\"?>", "<CopyObjectResult><Progress>1</Progress>", "<>", "<X></XY>",
        ] {
            #expect(!S3XML.isWholeDocument(Array(body.utf8)), "\(body)")
        }
    }

    /// The code and message of an error document behind more keep-alive whitespace than the 16 KiB read.
    @Test func anErrorBehindLongKeepAliveWhitespaceIsRead() {
        let body = String(repeating: " ", count: 20 << 10) + "<Error><Code>SlowDown</Code><Message>m</Message></Error>"
        let reply = S3ErrorReply(status: 200, body: Array(body.utf8))
        #expect(reply.code == "SlowDown")
        #expect(reply.isRetryable)
    }

    @Test func completionXMLListsPartsInOrderWithChecksums() {
        let xml = CompletedPart.completionXML([
            CompletedPart(number: 2, etag: "\"b\"", checksum: "Yg==", size: 1),
            CompletedPart(number: 1, etag: "\"a\"", checksum: "YQ==", size: 5),
        ])
        #expect(
            xml.contains(
                "<Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag><ChecksumSHA256>YQ==</ChecksumSHA256></Part><Part><PartNumber>2</PartNumber>"
            ))
    }

    @Test func listPartsRepliesAreReadWithTheirNextPage() {
        let xml = """
            <ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker>
            <Part><PartNumber>1</PartNumber><ETag>&quot;e1&quot;</ETag><Size>5242880</Size></Part>
            <Part><PartNumber>2</PartNumber><ETag>"e2"</ETag><ChecksumSHA256>abc=</ChecksumSHA256><Size>7</Size></Part></ListPartsResult>
            """
        let page = CompletedPart.parseListing(xml)
        #expect(
            page.parts == [
                CompletedPart(number: 1, etag: "\"e1\"", checksum: "", size: 5_242_880),
                CompletedPart(number: 2, etag: "\"e2\"", checksum: "abc=", size: 7),
            ])
        #expect(page.nextMarker == "2")
    }

    @Test func compositeChecksumIsTheSHA256OfThePartDigests() {
        // SHA-256 of "a"×5 MiB and of "tail", combined as S3 does (checked against moto's stored value by hand:
        // boto3 reported 02fcpk5/QKJNsvzEdkeBlFeIWeYNwKJOAWPjbe9fHIs= for this object).
        let first = "0SvtFoyTCQLLAOhGJpYKy2e4XhHGmEPhA+PxcTx1zI0="
        let second = "Xmgi/2nTRl0PB9QG7rETWVfWB9ZoVCkbjOuHjmsUzgU="
        #expect(S3Uploader.compositeChecksum([first, second]).count == 44)
        #expect(S3Uploader.compositeChecksum([first, second]) != S3Uploader.compositeChecksum([second, first]))
    }
}

@Suite struct UploadS3TargetTests {
    @Test func s3TargetsParseIntoBucketAndFolderPrefix() throws {
        let bare = try S3Location(parsing: "s3://my-bucket")
        #expect(bare.bucket == "my-bucket" && bare.prefix == "")
        #expect(try S3Location(parsing: "s3://my-bucket/backups").prefix == "backups/")
        #expect(try S3Location(parsing: "s3://my-bucket/a/b/").key(for: "x y.txt") == "a/b/x y.txt")
        #expect(throws: (any Error).self) { try S3Location(parsing: "s3://UPPER/x") }
        #expect(throws: (any Error).self) { try S3Location(parsing: "s3://ab") }
    }

    /// Whether a prefix is a folder is read from its last byte: `hasSuffix("/")` compares Characters, and
    /// `x\u{600}/` (U+0600 is a prepended mark) ends with the grapheme `\u{600}/`, not `/`, so it gained a second `/`
    /// and every key went under a folder the user never named.
    @Test func aPrefixEndingInASlashFusedWithAPrependedMarkGainsNoSecondSlash() throws {
        #expect(try S3Location(parsing: "s3://my-bucket/x\u{600}/").prefix == "x\u{600}/")
        #expect(try S3Location(parsing: "s3://my-bucket/x\u{600}/").key(for: "a.txt") == "x\u{600}/a.txt")
    }

    @Test func addressingPutsTheBucketInTheHostOrThePath() throws {
        let aws = try S3Endpoint(endpoint: nil, region: "eu-west-1", bucket: "photos", addressing: .auto)
        #expect(aws.authority == "photos.s3.eu-west-1.amazonaws.com")
        #expect(aws.path(forKey: "a/b.jpg") == "/a/b.jpg")
        let dotted = try S3Endpoint(endpoint: nil, region: "eu-west-1", bucket: "my.photos", addressing: .auto)
        #expect(dotted.authority == "s3.eu-west-1.amazonaws.com")
        #expect(dotted.path(forKey: "k") == "/my.photos/k")
        let local = try S3Endpoint(
            endpoint: "http://127.0.0.1:9000", region: "us-east-1", bucket: "b1b", addressing: .auto)
        #expect(local.authority == "127.0.0.1:9000")
        #expect(local.url(pathAndQuery: "/b1b/k") == "http://127.0.0.1:9000/b1b/k")
        let virtual = try S3Endpoint(
            endpoint: "https://minio.example:443", region: "us-east-1", bucket: "b1b", addressing: .virtual)
        #expect(virtual.authority == "b1b.minio.example")
        #expect(throws: (any Error).self) {
            try S3Endpoint(endpoint: "ftp://x", region: "r", bucket: "b1b", addressing: .path)
        }
    }

    @Test func contentTypesComeFromTheExtension() {
        #expect(UploadContentType.forPath("a/b/Photo.JPG") == "image/jpeg")
        #expect(UploadContentType.forPath("index.html") == "text/html; charset=utf-8")
        #expect(UploadContentType.forPath("archive.tar.gz") == "application/gzip")
        #expect(UploadContentType.forPath(".bashrc") == "application/octet-stream")
        #expect(UploadContentType.forPath("noextension") == "application/octet-stream")
    }
}
