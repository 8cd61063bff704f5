import Crypto
import Foundation

@testable import CurlewS3

/// The S3 request signer (`SigV4Signer`) against a second implementation written here from AWS's Signature
/// Version 4 specification ("Create a canonical request", "Create a string to sign", "Calculate the signature"):
/// for random credentials, region, instant, method, object key, query and headers, the canonical request and the
/// `Authorization` header are the same.
///
/// The generated headers are what the S3 client can send: names are tokens in any case, values have no CR, LF or
/// NUL (`addHeader` refuses those) and may hold spaces and tabs anywhere. Whitespace in values follows HTTP (RFC 9110
/// §5.6.3: SP and HTAB), which is what the spec's `Trimall` and the SDKs (botocore, the Java SDK) collapse.
enum SigV4Property {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let methods = ["GET", "PUT", "POST", "HEAD", "DELETE"]
        let method = methods[input.number(below: methods.count)]
        let token = input.byte() & 1 == 1 ? text(&input, from: Alphabet.headerValue) : nil
        let credentials = AWSCredentials(
            accessKeyID: text(&input, from: Alphabet.token), secretAccessKey: input.text(), sessionToken: token)
        let region = text(&input, from: Alphabet.token)
        let service = text(&input, from: Alphabet.token)
        let seconds = 1_440_938_160 + Int64(input.number(below: 1 << 16)) * Int64(input.number(below: 1 << 16))
        let path = input.text()
        var query: [(name: String, value: String)] = []
        for _ in 0..<input.number(below: 5) { query.append((input.text(), input.text())) }
        var headers: [(name: String, value: String)] = [("host", "examplebucket.s3.amazonaws.com")]
        for _ in 0..<input.number(below: 6) {
            let name = text(&input, from: Alphabet.token)
            if name.isEmpty { continue }
            headers.append((name, text(&input, from: Alphabet.headerValue)))
        }
        let payloadHash = input.byte() & 1 == 1 ? "UNSIGNED-PAYLOAD" : SigV4Signer.emptyPayloadHash

        let signer = SigV4Signer(credentials: credentials, region: region, service: service)
        let request = SigV4Signer.Request(
            method: method, path: path, query: query, headers: headers, payloadHash: payloadHash)
        let date = Date(timeIntervalSince1970: Double(seconds))
        let added = signer.authorizationHeaders(for: request, at: date)

        let stamp = Reference.timestamp(seconds)
        var expectedAdded: [(name: String, value: String)] = [("x-amz-date", stamp.dateTime)]
        if let token { expectedAdded.append(("x-amz-security-token", token)) }
        let canonical = Reference.canonicalRequest(
            method: method, path: path, query: query, headers: headers + expectedAdded, payloadHash: payloadHash)
        var signedRequest = request
        signedRequest.headers += expectedAdded
        let signersCanonical = SigV4Signer.canonicalRequest(signedRequest).text
        if Array(signersCanonical.utf8) != Array(canonical.text.utf8) {
            return "canonical request\n\(signersCanonical.debugDescription)\nis not\n\(canonical.text.debugDescription)"
        }
        let scope = "\(stamp.date)/\(region)/\(service)/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(stamp.dateTime)\n\(scope)\n" + Reference.hexSHA256(canonical.text)
        let signature = Reference.signature(
            of: stringToSign, secret: credentials.secretAccessKey, date: stamp.date, region: region, service: service)
        expectedAdded.append(
            (
                "authorization",
                "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), "
                    + "SignedHeaders=\(canonical.signedHeaders), Signature=\(signature)"
            ))
        guard
            added.map({ Array(($0.name + ": " + $0.value).utf8) })
                == expectedAdded.map({ Array(($0.name + ": " + $0.value).utf8) })
        else {
            return "the signer adds \(added), the specification \(expectedAdded)"
        }
        return nil
    }

    private enum Alphabet {
        /// RFC 9110 `tchar`, in both cases.
        static let token = Array("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        /// What a header value may hold: SP and HTAB (often, so that runs of both occur), printable ASCII, and
        /// non-ASCII letters.
        static let headerValue =
            [" ", "\t", " ", "\t", " "] + (0x21...0x7E).map { String(UnicodeScalar(UInt8($0))) } + ["é", "ሴ"]
    }

    /// A field of the input read as characters of `alphabet`, one byte each.
    private static func text(_ input: inout FuzzInput, from alphabet: [Character]) -> String {
        String(input.field().map { alphabet[Int($0) % alphabet.count] })
    }

    private static func text(_ input: inout FuzzInput, from alphabet: [String]) -> String {
        input.field().map { alphabet[Int($0) % alphabet.count] }.joined()
    }

    /// Signature Version 4 as the specification words it, byte by byte.
    private enum Reference {
        static func canonicalRequest(
            method: String, path: String, query: [(name: String, value: String)],
            headers: [(name: String, value: String)], payloadHash: String
        ) -> (text: String, signedHeaders: String) {
            // S3: the absolute path, each segment URI-encoded once, `/` kept, nothing normalised.
            let absolute = path.utf8.first == UInt8(ascii: "/") ? path : "/" + path
            let canonicalURI = uriEncode(absolute, keepingSlash: true)
            // Names and values URI-encoded, then sorted by name, then by value, byte by byte.
            let pairs = query.map { (name: Array(uriEncode($0.name).utf8), value: Array(uriEncode($0.value).utf8)) }
                .sorted { left, right in
                    left.name == right.name
                        ? left.value.lexicographicallyPrecedes(right.value)
                        : left.name.lexicographicallyPrecedes(right.name)
                }
            let canonicalQuery = pairs.map { String(decoding: $0.name + [0x3D] + $0.value, as: UTF8.self) }
                .joined(separator: "&")
            // Lower-case names, sorted; values of one name joined with commas in order, each Trimall'd.
            var values: [[UInt8]: [String]] = [:]
            for (name, value) in headers {
                values[Array(name.utf8).map(asciiLowercased), default: []].append(trimAll(value))
            }
            let names = values.keys.sorted { $0.lexicographicallyPrecedes($1) }
            let canonicalHeaders = names.map {
                String(decoding: $0, as: UTF8.self) + ":" + values[$0]!.joined(separator: ",") + "\n"
            }.joined()
            let signedHeaders = names.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ";")
            let text =
                method + "\n" + canonicalURI + "\n" + canonicalQuery + "\n" + canonicalHeaders + "\n" + signedHeaders
                + "\n" + payloadHash
            return (text, signedHeaders)
        }

        /// `UriEncode()`: every UTF-8 byte but `A-Za-z0-9-._~` as `%XY` with upper-case hex.
        static func uriEncode(_ text: String, keepingSlash: Bool = false) -> String {
            var output = ""
            for byte in text.utf8 {
                switch byte {
                case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E:
                    output.unicodeScalars.append(Unicode.Scalar(byte))
                case 0x2F where keepingSlash:
                    output += "/"
                default:
                    output += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
                }
            }
            return output
        }

        /// Leading and trailing whitespace removed, each inner run of it one space.
        static func trimAll(_ value: String) -> String {
            var words: [[UInt8]] = [[]]
            for byte in value.utf8 {
                if byte == 0x20 || byte == 0x09 {
                    if !words[words.count - 1].isEmpty { words.append([]) }
                } else {
                    words[words.count - 1].append(byte)
                }
            }
            return String(decoding: Array(words.filter { !$0.isEmpty }.joined(separator: [0x20])), as: UTF8.self)
        }

        static func asciiLowercased(_ byte: UInt8) -> UInt8 { (0x41...0x5A).contains(byte) ? byte + 0x20 : byte }

        /// `YYYYMMDD` and `YYYYMMDD'T'HHMMSS'Z'` in UTC, from days since 1970 by the civil calendar.
        static func timestamp(_ seconds: Int64) -> (date: String, dateTime: String) {
            let days = seconds / 86_400
            let secondOfDay = seconds % 86_400
            // Howard Hinnant's days-to-civil algorithm.
            let shifted = days + 719_468
            let era = shifted / 146_097
            let dayOfEra = shifted - era * 146_097
            let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
            let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
            let monthIndex = (5 * dayOfYear + 2) / 153
            let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
            let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
            let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
            let date = "\(year)".leftPadded(to: 4) + "\(month)".leftPadded(to: 2) + "\(day)".leftPadded(to: 2)
            let time =
                "\(secondOfDay / 3600)".leftPadded(to: 2) + "\(secondOfDay / 60 % 60)".leftPadded(to: 2)
                + "\(secondOfDay % 60)".leftPadded(to: 2)
            return (date, date + "T" + time + "Z")
        }

        static func hexSHA256(_ text: String) -> String { hex(SHA256.hash(data: Array(text.utf8))) }

        /// kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request").
        static func signature(
            of stringToSign: String, secret: String, date: String, region: String, service: String
        )
            -> String
        {
            var key = Array(("AWS4" + secret).utf8)
            for part in [date, region, service, "aws4_request"] { key = hmac(key, part) }
            return hex(hmac(key, stringToSign))
        }

        static func hmac(_ key: [UInt8], _ text: String) -> [UInt8] {
            Array(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: SymmetricKey(data: key)))
        }

        static func hex(_ bytes: some Sequence<UInt8>) -> String {
            bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
