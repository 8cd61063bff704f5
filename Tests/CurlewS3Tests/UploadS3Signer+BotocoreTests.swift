import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewS3

/// The signer against botocore's (the AWS CLI's and boto3's) S3 signer as an oracle: the same request, credentials
/// and instant give the same canonical request and signature.
///
/// botocore is the Python the test servers use (`ServerScripts.python`: `CURLEW_PYTHON`, else `python3`), installed
/// with boto3 by `make deps-python`. It is handed the request as S3 receives it: the path encoded by Python's
/// `quote` (not by the signer), the query as pairs, the headers as sent.
@Suite struct UploadS3SignerBotocoreTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        var method = "GET"
        var path = "/"
        var query: [(name: String, value: String)] = []
        var headers: [(name: String, value: String)] = []
        var payloadHash = SigV4Signer.emptyPayloadHash
        var sessionToken: String?

        var description: String { name }
    }

    static let date = Date(timeIntervalSince1970: 1_440_938_160)  // 2015-08-30T12:36:00Z
    static let host = "examplebucket.s3.amazonaws.com"

    static let cases: [Case] = [
        Case(name: "vanilla"),
        Case(name: "query order and case", query: [("Param2", "value2"), ("Param1", "value1"), ("param1", "b")]),
        Case(
            name: "header values trimmed, runs of spaces and tabs collapsed",
            headers: [
                ("My-Header1", "  value1 "), ("My-Header2", "\"a   b   c\""), ("x-amz-meta-note", "a\tb \t  c\t"),
                ("my-header1", "second"),
            ]),
        Case(name: "UTF-8 key and query", path: "/ሴ/ü file.txt", query: [("ሴ", "bär"), ("key", "a/b=c&d")]),
        Case(
            name: "spaces and reserved characters", path: "/example space/a+b%c#d", query: [("a b", "c d"), ("e", "")]),
        Case(
            name: "PUT with a session token and metadata", method: "PUT", path: "/photos/2026/x.jpg",
            headers: [
                ("content-type", "image/jpeg"), ("x-amz-meta-camera", "  Nikon   D750 "),
                ("x-amz-checksum-sha256", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="),
            ],
            payloadHash: "UNSIGNED-PAYLOAD", sessionToken: "FQoGZXIvYXdzEBYaD+token/with=chars"),
        Case(
            name: "POST of a form, CreateMultipartUpload style", method: "POST", path: "/big.bin",
            query: [("uploads", "")], headers: [("content-type", "application/x-www-form-urlencoded; charset=utf-8")]),
    ]

    @Test func canonicalRequestsAndSignaturesAreBotocores() throws {
        let credentials = AWSCredentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        let oracle = try Self.botocore(Self.cases, credentials: credentials)
        try #require(oracle.count == Self.cases.count)
        for (testCase, expected) in zip(Self.cases, oracle) {
            let signer = SigV4Signer(
                credentials: AWSCredentials(
                    accessKeyID: credentials.accessKeyID, secretAccessKey: credentials.secretAccessKey,
                    sessionToken: testCase.sessionToken),
                region: "us-east-1", service: "s3")
            let request = SigV4Signer.Request(
                method: testCase.method, path: testCase.path, query: testCase.query,
                headers: [("host", Self.host), ("x-amz-content-sha256", testCase.payloadHash)] + testCase.headers,
                payloadHash: testCase.payloadHash)
            let added = signer.authorizationHeaders(for: request, at: Self.date)
            var signed = request
            signed.headers += added.filter { $0.name != "authorization" }
            #expect(SigV4Signer.canonicalRequest(signed).text == expected.canonicalRequest, "\(testCase)")
            let authorization = added.first { $0.name == "authorization" }?.value ?? ""
            #expect(authorization.hasSuffix("Signature=\(expected.signature)"), "\(testCase)")
        }
    }

    struct OracleResult: Decodable {
        let canonicalRequest: String
        let signature: String
    }

    /// botocore's canonical request and signature for each case, at ``date``.
    static func botocore(_ cases: [Case], credentials: AWSCredentials) throws -> [OracleResult] {
        let script = """
            import json, sys
            from urllib.parse import quote
            from botocore.auth import S3SigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.credentials import Credentials
            results = []
            for case in json.load(sys.stdin):
                auth = S3SigV4Auth(Credentials(case["key"], case["secret"], case["token"]), "s3", "us-east-1")
                url = "https://" + case["host"] + quote(case["path"], safe="/~")
                request = AWSRequest(method=case["method"], url=url, params=[tuple(p) for p in case["query"]])
                for name, value in case["headers"]:
                    request.headers[name] = value  # appends: same-name fields stay separate
                request.context["timestamp"] = case["timestamp"]
                request.headers["X-Amz-Date"] = case["timestamp"]
                if case["token"]:
                    request.headers["X-Amz-Security-Token"] = case["token"]
                canonical = auth.canonical_request(request)
                signature = auth.signature(auth.string_to_sign(request, canonical), request)
                results.append({"canonicalRequest": canonical, "signature": signature})
            json.dump(results, sys.stdout)
            """
        let input: [[String: Any]] = cases.map { testCase in
            [
                "key": credentials.accessKeyID, "secret": credentials.secretAccessKey,
                "token": testCase.sessionToken ?? NSNull(), "host": host, "method": testCase.method,
                "path": testCase.path, "query": testCase.query.map { [$0.name, $0.value] },
                "headers": [["host", host], ["x-amz-content-sha256", testCase.payloadHash]]
                    + testCase.headers.map { [$0.name, $0.value] },
                "timestamp": "20150830T123600Z",
            ]
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [ServerScripts.python, "-c", script]
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: input))
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        let errors = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSupportError(
                "\(ServerScripts.python) with botocore failed (exit \(process.terminationStatus)): "
                    + String(decoding: errors, as: UTF8.self)
                    + "\nhint: `make deps-python` installs boto3 (and botocore) for \(ServerScripts.python)")
        }
        return try JSONDecoder().decode([OracleResult].self, from: output)
    }
}
