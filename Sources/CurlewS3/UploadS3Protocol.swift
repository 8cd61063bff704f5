import CurlewEngine

/// The few pieces of S3's XML that the upload reads and writes. S3's replies are flat and machine-made, so a tag
/// scanner is enough (and keeps libxml2 out of a statically linked binary).
package enum S3XML {
    /// The text of every `<tag>…</tag>` in order, entities decoded.
    package static func values(_ tag: String, in text: String) -> [String] {
        var found: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "<\(tag)>") {
            guard let close = rest[open.upperBound...].range(of: "</\(tag)>") else { break }
            found.append(unescape(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return found
    }

    package static func value(_ tag: String, in text: String) -> String? { values(tag, in: text).first }

    package static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    package static func unescape(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        return text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&#34;", with: "\"").replacingOccurrences(of: "&amp;", with: "&")
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
        let parts = S3XML.values("Part", in: xml).compactMap { block -> CompletedPart? in
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

    package init(status: Int, body: [UInt8], bucketRegionHeader: String? = nil) {
        let text = String(decoding: body.prefix(16 << 10), as: UTF8.self)
        self.status = status
        self.code = S3XML.value("Code", in: text)
        self.message = S3XML.value("Message", in: text)
        self.region = S3XML.value("Region", in: text) ?? bucketRegionHeader
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
            return "wrong region: "
                + (region.map { "the bucket is in \($0); use --region \($0)" }
                    ?? "the bucket is in another region; set --region")
                + " (\(code!))"
        case "AccessDenied", "AllAccessDisabled":
            return "access denied: these credentials may not write here (\(code!))"
        default: break
        }
        // HEAD replies have no body: the status alone has to do.
        if code == nil && status == 301 {
            return "wrong region: the bucket is in \(region ?? "another region"); set --region"
        }
        if code == nil && status == 403 {
            return "access denied (HTTP 403 without details): check the credentials and the region"
        }
        return nil
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
        var text = "HTTP \(status)"
        if let code { text += " \(code)" }
        if let message, !message.isEmpty { text += ": \(message)" }
        return text
    }
}
