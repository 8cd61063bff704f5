import CurlewEngine

/// The few pieces of S3's XML that the upload reads and writes. S3's replies are flat and machine-made, so a tag
/// scanner is enough (and keeps libxml2 out of a statically linked binary).
package enum S3XML {
    /// The text of every `<tag>…</tag>` in order, entities decoded: for elements that hold text.
    package static func values(_ tag: String, in text: some StringProtocol) -> [String] {
        elements(tag, in: text).map(unescape)
    }

    /// The content of every `<tag>…</tag>` in order, as it is: for elements that hold others, whose values
    /// ``values(_:in:)`` then decodes once (decoded twice, a key `a&amp;b` would read as `a&b`).
    package static func elements(_ tag: String, in text: some StringProtocol) -> [Substring] {
        var found: [Substring] = []
        var rest = Substring(text)
        while let open = rest.range(of: "<\(tag)>") {
            guard let close = rest[open.upperBound...].range(of: "</\(tag)>") else { break }
            found.append(rest[open.upperBound..<close.lowerBound])
            rest = rest[close.upperBound...]
        }
        return found
    }

    package static func value(_ tag: String, in text: some StringProtocol) -> String? { values(tag, in: text).first }

    /// Whether `body` is an S3 error document: its root element is `Error`. S3 answers CompleteMultipartUpload and
    /// CopyObject with 200 before it knows the outcome, so a failure can come as a 2xx whose body is an error
    /// (after whitespace sent to keep the connection open). Only the root counts: a successful reply may name
    /// anything inside it.
    package static func isErrorDocument(_ body: [UInt8]) -> Bool { rootElementName(of: body) == "Error" }

    /// Whether `body` is a whole XML document: a root element, closed (or self-closing). A store that fails after
    /// its 200 may leave the body empty, with only the XML declaration, or cut (Ceph RGW sends a copy's opening
    /// `<CopyObjectResult>` with progress before the copy is done). The root's name is not checked: stores differ
    /// (moto answers CompleteMultipartUpload with `CompleteMultipartUploadResponse`, S3 with `…Result`).
    package static func isWholeDocument(_ body: [UInt8]) -> Bool {
        guard let root = rootStartTag(of: body) else { return false }
        guard let tagEnd = root.after.firstIndex(of: UInt8(ascii: ">")) else { return false }
        if tagEnd > root.after.startIndex && root.after[tagEnd - 1] == UInt8(ascii: "/") { return true }
        // The end tag: `</name`, white space allowed before its `>`.
        var rest = root.after[(tagEnd + 1)...]
        let endTag = Array("</\(root.name)".utf8)
        while let found = rest.firstRange(of: endTag) {
            let afterName = rest[found.upperBound...].drop(while: isWhitespace)
            if afterName.first == UInt8(ascii: ">") { return true }
            rest = rest[found.upperBound...]
        }
        return false
    }

    /// The name of the root element: the first element after whitespace, a byte order mark, the XML declaration,
    /// a document type, comments and processing instructions; nil when there is none.
    package static func rootElementName(of body: [UInt8]) -> String? { rootStartTag(of: body)?.name }

    /// The root element's name and what follows it, from its attributes on.
    private static func rootStartTag(of body: [UInt8]) -> (name: String, after: ArraySlice<UInt8>)? {
        var rest = body.drop(while: isWhitespace)
        if rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3).drop(while: isWhitespace) }
        while rest.starts(with: Array("<?".utf8)) || rest.starts(with: Array("<!".utf8)) {
            let close: [UInt8] =
                rest.starts(with: Array("<?".utf8))
                ? Array("?>".utf8) : rest.starts(with: Array("<!--".utf8)) ? Array("-->".utf8) : Array(">".utf8)
            guard let end = rest.firstRange(of: close) else { return nil }
            rest = rest[end.upperBound...].drop(while: isWhitespace)
        }
        guard rest.first == UInt8(ascii: "<") else { return nil }
        let name = rest.dropFirst().prefix { !isWhitespace($0) && $0 != UInt8(ascii: ">") && $0 != UInt8(ascii: "/") }
        return name.isEmpty ? nil : (String(decoding: name, as: UTF8.self), rest[name.endIndex...])
    }

    /// XML's white space: what S3 sends to keep a connection open, and what may stand before the root.
    package static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    /// `text` as XML character data. A carriage return is written as a reference: an XML parser reads a raw one as
    /// a line feed, and a key holding one would name another object.
    package static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "\r", with: "&#13;")
    }

    /// XML character data with its references decoded, in one pass: the five named entities and every numeric
    /// character reference, decimal or hexadecimal (`&#39;` and `&#xA;` from MinIO and Go's encoder, `&#13;` from
    /// AWS). A reference that is not one is kept as it is.
    package static func unescape(_ text: Substring) -> String {
        guard text.utf8.contains(UInt8(ascii: "&")) else { return String(text) }
        var result = ""
        var rest = text
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            let afterAmpersand = rest.index(after: ampersand)
            // The longest reference S3 can send is `&#x10FFFF;` (10 characters).
            guard let semicolon = rest[afterAmpersand...].prefix(9).firstIndex(of: ";"),
                let decoded = character(referencedBy: rest[afterAmpersand..<semicolon])
            else {
                result += "&"
                rest = rest[afterAmpersand...]
                continue
            }
            result.unicodeScalars.append(decoded)
            rest = rest[rest.index(after: semicolon)...]
        }
        return result + rest
    }

    /// The character a reference's name (between `&` and `;`) stands for.
    private static func character(referencedBy name: Substring) -> Unicode.Scalar? {
        switch name {
        case "quot": return "\""
        case "apos": return "'"
        case "lt": return "<"
        case "gt": return ">"
        case "amp": return "&"
        default:
            guard name.first == "#" else { return nil }
            let isHexadecimal = name.dropFirst().first == "x" || name.dropFirst().first == "X"
            let digits = name.dropFirst(isHexadecimal ? 2 : 1)
            // Digits only: the integer parsers would take a sign too.
            guard !digits.isEmpty, digits.allSatisfy(\.isHexDigit) else { return nil }
            // Only characters XML allows (a NUL is none: no key holds one).
            guard let value = UInt32(digits, radix: isHexadecimal ? 16 : 10),
                value >= 0x20 || value == 0x09
                    || value == 0x0A || value == 0x0D
            else { return nil }
            return Unicode.Scalar(value)
        }
    }
}

/// A part the store holds: from UploadPart's reply, the journal, or ListParts.
package struct CompletedPart: Sendable, Equatable {
    package let number: Int
    package let etag: String
    /// Base64 SHA-256, as `x-amz-checksum-sha256` carries it; empty if the store did not say.
    package let checksum: String
    package let size: Int64

    package init(number: Int, etag: String, checksum: String, size: Int64) {
        self.number = number
        self.etag = etag
        self.checksum = checksum
        self.size = size
    }

    /// CompleteMultipartUpload's body.
    package static func completionXML(_ parts: [CompletedPart]) -> String {
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in parts.sorted(by: { $0.number < $1.number }) {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(S3XML.escape(part.etag))</ETag>"
            if !part.checksum.isEmpty { xml += "<ChecksumSHA256>\(part.checksum)</ChecksumSHA256>" }
            xml += "</Part>"
        }
        return xml + "</CompleteMultipartUpload>"
    }

    /// ListParts' reply: the parts, and the marker of the next page if the listing is truncated.
    package static func parseListing(_ xml: String) -> (parts: [CompletedPart], nextMarker: String?) {
        let parts = S3XML.elements("Part", in: xml).compactMap { block -> CompletedPart? in
            guard let number = S3XML.value("PartNumber", in: block).flatMap({ Int($0) }),
                let etag = S3XML.value("ETag", in: block)
            else { return nil }
            return CompletedPart(
                number: number, etag: etag, checksum: S3XML.value("ChecksumSHA256", in: block) ?? "",
                size: S3XML.value("Size", in: block).flatMap { Int64($0) } ?? -1)
        }
        let truncated = S3XML.value("IsTruncated", in: xml) == "true"
        return (parts, truncated ? S3XML.value("NextPartNumberMarker", in: xml) : nil)
    }
}

/// A refusal from the store, read from its status and XML error body, and what it means for the run.
package struct S3ErrorReply: Sendable, Equatable {
    package let status: Int
    package let code: String?
    package let message: String?
    /// The bucket's region, when the store says the request went to the wrong one.
    package let region: String?
    /// The region the request was signed for, when known.
    private let requestRegion: String?

    package init(status: Int, body: [UInt8], bucketRegionHeader: String? = nil, requestRegion: String? = nil) {
        // S3's keep-alive whitespace may stand before the document, for as long as the operation took.
        let text = String(decoding: body.drop(while: S3XML.isWhitespace).prefix(16 << 10), as: UTF8.self)
        self.status = status
        self.code = S3XML.value("Code", in: text)
        self.message = S3XML.value("Message", in: text)
        self.region = S3XML.value("Region", in: text) ?? bucketRegionHeader
        self.requestRegion = requestRegion
    }

    /// A problem of the whole run, not of one file: every other request would fail the same way, so the run stops
    /// and names it once. Nil for problems of one file.
    package var runProblem: String? {
        switch code {
        case "InvalidAccessKeyId":
            return "bad credentials: the store does not know this access key ID (InvalidAccessKeyId)"
        case "SignatureDoesNotMatch":
            return "bad credentials: the signature does not match; check the secret access key (SignatureDoesNotMatch)"
        case "InvalidToken", "ExpiredToken", "TokenRefreshRequired":
            return "bad credentials: the session token is invalid or expired (\(code!))"
        case "RequestTimeTooSkewed":
            return
                "clock skew: this machine's clock differs from the store's by more than 15 minutes; fix the clock (RequestTimeTooSkewed)"
        case "NoSuchBucket": return "missing bucket: the bucket does not exist (NoSuchBucket)"
        case "AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException":
            return wrongRegion + " (\(code!))"
        case "AccessDenied", "AllAccessDisabled":
            return "access denied: these credentials may not write here (\(code!))"
        default: break
        }
        // HEAD replies have no body: the status and the x-amz-bucket-region header have to do. S3 answers a HEAD
        // signed for another region with 400 and one sent to another region's endpoint with 301, both naming the
        // bucket's region in that header. A 400 that names the request's own region is about the request.
        if code == nil && (status == 301 || (status == 400 && region != nil && region != requestRegion)) {
            return wrongRegion + " (HTTP \(status))"
        }
        if code == nil && status == 403 {
            return "access denied (HTTP 403 without details): check the credentials and the region"
        }
        return nil
    }

    private var wrongRegion: String {
        "wrong region: "
            + (region.map { "the bucket is in \($0); use --region \($0)" }
                ?? "the bucket is in another region; set --region")
    }

    /// Worth another attempt: the store is busy or had a hiccup.
    package var isRetryable: Bool {
        if let code,
            ["SlowDown", "InternalError", "RequestTimeout", "ServiceUnavailable", "OperationAborted"].contains(code)
        {
            return true
        }
        return RetryRules.upload.retryableStatuses.contains(status) || status == 500
    }

    package var summary: String {
        // A 2xx refusal: the status line said success, the body then said otherwise.
        var text = (200..<300).contains(status) ? "HTTP \(status) with an error" : "HTTP \(status)"
        if let code { text += " \(code)" }
        if let message, !message.isEmpty { text += ": \(message)" }
        return text
    }
}
