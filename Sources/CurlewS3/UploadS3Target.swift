import Foundation

/// A location or endpoint that cannot name an S3 bucket: a bad `s3://` URL, bucket name or endpoint URL.
public struct S3ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// What is wrong, naming the value (never a credential).
    public let description: String

    package init(_ description: String) { self.description = description }
}

/// How the bucket appears in URLs: `path` (`https://host/bucket/key`, what MinIO, moto and most self-hosted stores
/// expect) or `virtual` (`https://bucket.host/key`, AWS's preferred form). `auto`: virtual on AWS's own endpoints
/// unless the bucket name has dots (they break the TLS wildcard), path on any `--endpoint`.
public enum S3Addressing: String, Sendable, CaseIterable {
    /// Virtual-hosted on AWS's own endpoints for buckets without dots; path-style on any other endpoint.
    case auto
    /// `https://host/bucket/key`.
    case path
    /// `https://bucket.host/key`.
    case virtual
}

/// `s3://BUCKET/PREFIX`: the bucket, and the key prefix every relative path is appended to.
public struct S3Location: Sendable, Equatable, CustomStringConvertible {
    /// The bucket's name.
    public let bucket: String
    /// Empty, or ends with `/`: `s3://b/backups` and `s3://b/backups/` both put `x.txt` at `backups/x.txt`.
    public let prefix: String
    /// The key as written after the bucket, without its leading `/`s: one object's key (`curlew upload -`).
    public let key: String

    /// Whether a target names S3 (`s3://…`) rather than an http(s) URL.
    public static func isS3(_ target: String) -> Bool { target.lowercased().hasPrefix("s3://") }

    /// Reads `s3://BUCKET/PREFIX`, checking the bucket name against S3's rules.
    ///
    /// - Throws: ``S3ConfigurationError`` when the text is not an `s3://` URL or the bucket name is invalid.
    public init(parsing target: String) throws(S3ConfigurationError) {
        guard Self.isS3(target) else {
            throw S3ConfigurationError("\(target.debugDescription) is not an s3://BUCKET/PREFIX target")
        }
        let rest = target.dropFirst("s3://".count)
        let bucket = rest.prefix { $0 != "/" }
        // S3's rules: 3 to 63 characters of lower-case letters, digits, dots and hyphens.
        guard (3...63).contains(bucket.count),
            bucket.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "." || $0 == "-") })
        else {
            throw S3ConfigurationError(
                "\(String(bucket).debugDescription) is not a valid bucket name (3-63 lower-case letters, digits, dots, hyphens)"
            )
        }
        self.bucket = String(bucket)
        let prefix = rest.dropFirst(bucket.count).drop { $0 == "/" }
        self.key = String(prefix)
        // The last byte decides: `hasSuffix` compares `Character`s, and a prefix ending in a prepended mark and `/`
        // (`x\u{600}/`) ends with the grapheme `\u{600}/`, not `/`, so it gained a second `/`.
        self.prefix = prefix.isEmpty || prefix.utf8.last == UInt8(ascii: "/") ? String(prefix) : prefix + "/"
    }

    public static func == (lhs: S3Location, rhs: S3Location) -> Bool {
        lhs.bucket == rhs.bucket && lhs.prefix == rhs.prefix
    }

    /// The object key of a file: the prefix, then its relative path.
    public func key(for relativePath: String) -> String { prefix + relativePath }

    /// `s3://BUCKET/PREFIX`, the prefix with its trailing `/`.
    public var description: String { "s3://\(bucket)/\(prefix)" }
}

/// Where requests for one bucket go: the URL and `Host` header for a key, in the chosen addressing style.
public struct S3Endpoint: Sendable {
    package let scheme: String
    /// Host and, if not the scheme's default, port: exactly the `Host` header libcurl sends, which is signed.
    package let authority: String
    /// The bucket every request goes to.
    public let bucket: String
    /// The region requests are signed for.
    public let region: String
    /// Whether the bucket is in the host name (`bucket.host/key`) rather than the path (`host/bucket/key`).
    public let virtualHosted: Bool

    /// Where requests for `bucket` go.
    ///
    /// - Parameters:
    ///   - endpoint: the store's `http(s)://host[:port]`, or nil for AWS's regional endpoint.
    ///   - region: the bucket's region, which every request is signed for.
    ///   - bucket: the bucket's name.
    ///   - addressing: where the bucket goes in URLs.
    /// - Throws: ``S3ConfigurationError`` when `endpoint` is not a bare `http(s)://host[:port]`.
    public init(
        endpoint: String?, region: String, bucket: String, addressing: S3Addressing = .auto
    ) throws(S3ConfigurationError) {
        let base = endpoint ?? "https://s3.\(region).amazonaws.com"
        guard let components = URLComponents(string: base), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            throw S3ConfigurationError("--endpoint \(base.debugDescription) is not an http:// or https:// URL")
        }
        guard components.path.isEmpty || components.path == "/", components.query == nil else {
            throw S3ConfigurationError("--endpoint \(base.debugDescription) must be a bare scheme://host[:port]")
        }
        let defaultPort = scheme == "https" ? 443 : 80
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let authority = components.port.map { $0 == defaultPort ? hostPart : "\(hostPart):\($0)" } ?? hostPart
        self.scheme = scheme
        self.bucket = bucket
        self.region = region
        switch addressing {
        case .path: virtualHosted = false
        case .virtual: virtualHosted = true
        case .auto: virtualHosted = endpoint == nil && !bucket.contains(".")
        }
        self.authority = virtualHosted ? "\(bucket).\(authority)" : authority
    }

    /// The unencoded request path for a key (the signer encodes it).
    package func path(forKey key: String) -> String {
        // An empty key is the bucket itself (ListMultipartUploads): `/bucket`, as SDKs sign it, not `/bucket/`.
        if key.isEmpty { return virtualHosted ? "/" : "/\(bucket)" }
        return virtualHosted ? "/" + key : "/\(bucket)/" + key
    }

    /// The URL of a request, `pathAndQuery` already encoded (empty: the endpoint itself).
    package func url(pathAndQuery: String) -> String {
        "\(scheme)://\(authority)\(pathAndQuery)"
    }
}
