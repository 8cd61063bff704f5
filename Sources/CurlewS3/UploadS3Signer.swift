import Crypto
import CurlewEngine
package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An access key pair, and the session token that comes with temporary credentials.
///
/// `description` never shows the secret or the token: a credentials value that ends up in a log, an error message
/// or a test failure prints only the key ID.
public struct AWSCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The access key ID (`AKIA…`, `ASIA…` for temporary credentials).
    public let accessKeyID: String
    /// The secret access key: signs requests, never sent nor printed.
    public let secretAccessKey: String
    /// The session token of temporary credentials, sent as `x-amz-security-token`.
    public let sessionToken: String?

    /// Credentials from their parts.
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The credentials the AWS CLI would use: the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`), else the `AWS_PROFILE` (or `default`) profile of `~/.aws/credentials` and
    /// `~/.aws/config`.
    ///
    /// - Throws: ``AWSCredentialsError`` naming where it looked when none are found.
    public static func fromEnvironment() throws(AWSCredentialsError) -> AWSCredentials {
        try AWSCredentialResolver.fromProcess().resolve().credentials
    }

    /// The key ID only: the secret and token are redacted.
    public var description: String {
        "AWSCredentials(\(accessKeyID), secret redacted\(sessionToken == nil ? "" : ", session token redacted"))"
    }
    /// The key ID only, as ``description``.
    public var debugDescription: String { description }
    /// `dump` and debuggers see the key ID only.
    public var customMirror: Mirror { Mirror(self, children: ["accessKeyID": accessKeyID]) }
}

/// AWS Signature Version 4 (header form), as S3 and every S3-compatible store check it.
///
/// Pure: the same request, credentials and instant always give the same headers, so it is tested against AWS's
/// published test vectors. Paths are encoded once, segment by segment, and never normalised: that is S3's rule
/// (other services encode twice), and an object key like `a/./b` must stay that key.
package struct SigV4Signer: Sendable {
    /// What the signature covers. `path` and the query are raw (not percent-encoded): the signer encodes them, and
    /// the request must be sent with exactly that encoding (``SigV4Request/encodedPathAndQuery``).
    package struct Request: Sendable {
        var method: String
        var path: String
        var query: [(name: String, value: String)] = []
        /// Every header to sign, `host` included, as it will be sent.
        var headers: [(name: String, value: String)]
        /// Hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`.
        var payloadHash: String

        /// The path and query as they go on the wire, identical to what was signed.
        var encodedPathAndQuery: String {
            let query = SigV4Signer.canonicalQuery(query)
            return SigV4Signer.canonicalURI(path) + (query.isEmpty ? "" : "?" + query)
        }
    }

    package static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    package let credentials: AWSCredentials
    package let region: String
    package let service: String

    /// The headers to add to the request: `x-amz-date`, `x-amz-security-token` with temporary credentials, and
    /// `authorization`.
    package func authorizationHeaders(for request: Request, at date: Date) -> [(name: String, value: String)] {
        let stamp = Self.timestamp(date)
        var added: [(name: String, value: String)] = [("x-amz-date", stamp.dateTime)]
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        var signed = request
        signed.headers += added
        let (canonical, signedHeaders) = Self.canonicalRequest(signed)
        let scope = "\(stamp.date)/\(region)/\(service)/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(stamp.dateTime)\n\(scope)\n" + Self.hexSHA256(Array(canonical.utf8))
        let signature = Self.hex(
            HMAC<SHA256>.authenticationCode(for: Array(stringToSign.utf8), using: signingKey(date: stamp.date)))
        added.append(
            (
                "authorization",
                "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
            ))
        return added
    }

    private func signingKey(date: String) -> SymmetricKey {
        var key = SymmetricKey(data: Array("AWS4\(credentials.secretAccessKey)".utf8))
        for step in [date, region, service, "aws4_request"] {
            key = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(step.utf8), using: key)))
        }
        return key
    }

    /// The canonical request and the `SignedHeaders` list.
    package static func canonicalRequest(_ request: Request) -> (text: String, signedHeaders: String) {
        // Same-name headers join with commas in the order given; each value is Trimall'd.
        var byName: [String: [String]] = [:]
        for (name, value) in request.headers {
            byName[name.lowercased(), default: []].append(trimAll(value))
        }
        let names = byName.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(byName[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let text = [
            request.method, canonicalURI(request.path), canonicalQuery(request.query), canonicalHeaders, signedHeaders,
            request.payloadHash,
        ].joined(separator: "\n")
        return (text, signedHeaders)
    }

    /// SigV4's `Trimall`: whitespace removed from both ends, each inner run of it one space. Whitespace is what
    /// HTTP calls so in a field value, SP and HTAB (RFC 9110 §5.6.3), as botocore and the AWS SDKs collapse it:
    /// a tab left inside a value (metadata `a<TAB>b`) made S3 answer SignatureDoesNotMatch.
    package static func trimAll(_ value: String) -> String {
        let words = value.unicodeScalars.split { $0 == " " || $0 == "\t" }
        return words.map { String(String.UnicodeScalarView($0)) }.joined(separator: " ")
    }

    /// Each segment percent-encoded (RFC 3986 unreserved characters kept), `/` kept between them, empty segments
    /// kept too (`a//b` is a different key from `a/b`).
    package static func canonicalURI(_ path: String) -> String {
        let absolute = PercentEncoding.startsWithSlash(path) ? path : "/" + path
        return PercentEncoding.segments(of: absolute).map(PercentEncoding.encodeComponent).joined(separator: "/")
    }

    /// Names and values encoded (including `/` and `=`), sorted by encoded name, then value; `name=` for an empty value.
    package static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        let encoded: [(name: String, value: String)] = query.map { pair in
            (PercentEncoding.encodeComponent(pair.name), PercentEncoding.encodeComponent(pair.value))
        }
        let sorted = encoded.sorted {
            (left: (name: String, value: String), right: (name: String, value: String)) -> Bool in
            left.name == right.name ? left.value < right.value : left.name < right.name
        }
        return sorted.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
    }

    package static func timestamp(_ date: Date) -> (date: String, dateTime: String) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let day = String(format: "%04d%02d%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday))
        return (day, day + String(format: "T%02d%02d%02dZ", Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec)))
    }

    package static func hexSHA256(_ bytes: [UInt8]) -> String { hex(SHA256.hash(data: bytes)) }

    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
