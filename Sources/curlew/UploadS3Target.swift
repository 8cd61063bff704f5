import ArgumentParser
import Foundation

/// How the bucket appears in URLs: `path` (`https://host/bucket/key`, what MinIO, moto and most self-hosted stores
/// expect) or `virtual` (`https://bucket.host/key`, AWS's preferred form). `auto`: virtual on AWS's own endpoints
/// unless the bucket name has dots (they break the TLS wildcard), path on any `--endpoint`.
enum S3Addressing: String, Sendable, CaseIterable, ExpressibleByArgument {
    case auto
    case path
    case virtual
}

/// `s3://BUCKET/PREFIX`: the bucket, and the key prefix every relative path is appended to.
struct S3Location: Sendable, Equatable {
    let bucket: String
    /// Empty, or ends with `/`: `s3://b/backups` and `s3://b/backups/` both put `x.txt` at `backups/x.txt`.
    let prefix: String

    static func isS3(_ target: String) -> Bool { target.lowercased().hasPrefix("s3://") }

    init(parsing target: String) throws {
        guard Self.isS3(target) else {
            throw ValidationError("\(target.debugDescription) is not an s3://BUCKET/PREFIX target")
        }
        let rest = target.dropFirst("s3://".count)
        let bucket = rest.prefix { $0 != "/" }
        // S3's rules: 3 to 63 characters of lower-case letters, digits, dots and hyphens.
        guard (3...63).contains(bucket.count),
            bucket.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "." || $0 == "-") })
        else {
            throw ValidationError(
                "\(String(bucket).debugDescription) is not a valid bucket name (3-63 lower-case letters, digits, dots, hyphens)"
            )
        }
        self.bucket = String(bucket)
        let prefix = rest.dropFirst(bucket.count).drop { $0 == "/" }
        self.prefix = prefix.isEmpty || prefix.hasSuffix("/") ? String(prefix) : prefix + "/"
    }

    func key(for relativePath: String) -> String { prefix + relativePath }

    var description: String { "s3://\(bucket)/\(prefix)" }
}

/// Where requests for one bucket go: the URL and `Host` header for a key, in the chosen addressing style.
struct S3Endpoint: Sendable {
    let scheme: String
    /// Host and, if not the scheme's default, port: exactly the `Host` header libcurl sends, which is signed.
    let authority: String
    let bucket: String
    let virtualHosted: Bool

    /// - Parameter endpoint: `--endpoint`, or nil for AWS's regional endpoint.
    init(endpoint: String?, region: String, bucket: String, addressing: S3Addressing) throws {
        let base = endpoint ?? "https://s3.\(region).amazonaws.com"
        guard let components = URLComponents(string: base), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            throw ValidationError("--endpoint \(base.debugDescription) is not an http:// or https:// URL")
        }
        guard components.path.isEmpty || components.path == "/", components.query == nil else {
            throw ValidationError("--endpoint \(base.debugDescription) must be a bare scheme://host[:port]")
        }
        let defaultPort = scheme == "https" ? 443 : 80
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let authority = components.port.map { $0 == defaultPort ? hostPart : "\(hostPart):\($0)" } ?? hostPart
        self.scheme = scheme
        self.bucket = bucket
        switch addressing {
        case .path: virtualHosted = false
        case .virtual: virtualHosted = true
        case .auto: virtualHosted = endpoint == nil && !bucket.contains(".")
        }
        self.authority = virtualHosted ? "\(bucket).\(authority)" : authority
    }

    /// The unencoded request path for a key (the signer encodes it).
    func path(forKey key: String) -> String {
        virtualHosted ? "/" + key : "/\(bucket)/" + key
    }

    func url(pathAndQuery: String) -> String {
        "\(scheme)://\(authority)\(pathAndQuery)"
    }
}
