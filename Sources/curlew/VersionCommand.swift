import ArgumentParser
import CLibCurl
import CurlewEngine

/// Versions of the command and of the libcurl it runs on.
enum CurlewVersion {
    /// The command's version; `curlew --version` prints it.
    static let curlew = "0.15.0"

    /// libcurl's own version string, from the library loaded at run time (not the headers built against). The
    /// struct version is spelled out: `CURLVERSION_NOW` is a C macro Swift does not import (7.88 defines it as
    /// `CURLVERSION_ELEVENTH`).
    static var libcurl: String {
        guard let info = curl_version_info(CURLVERSION_ELEVENTH), let version = info.pointee.version else {
            return "unknown"
        }
        return String(cString: version)
    }

    /// What the loaded libcurl can do, as `curl --version` lists it.
    static var libcurlDetails: [(String, String)] {
        guard let info = curl_version_info(CURLVERSION_ELEVENTH)?.pointee else { return [] }
        func string(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { String(cString: $0) } }
        var rows: [(String, String)] = [("libcurl", libcurl)]
        if let ssl = string(info.ssl_version) { rows.append(("TLS", ssl)) }
        if let zlib = string(info.libz_version) { rows.append(("zlib", zlib)) }
        if let nghttp2 = string(info.nghttp2_version) { rows.append(("nghttp2", nghttp2)) }
        var protocols: [String] = []
        if var cursor = info.protocols {
            while let name = cursor.pointee {
                protocols.append(String(cString: name))
                cursor += 1
            }
        }
        rows.append(("protocols", protocols.joined(separator: " ")))
        let bits: [(Int32, String)] = [
            (CURL_VERSION_IPV6, "IPv6"), (CURL_VERSION_SSL, "SSL"), (CURL_VERSION_LIBZ, "libz"),
            (CURL_VERSION_HTTP2, "HTTP2"), (CURL_VERSION_HTTP3, "HTTP3"), (CURL_VERSION_BROTLI, "brotli"),
            (CURL_VERSION_ZSTD, "zstd"), (CURL_VERSION_ASYNCHDNS, "AsynchDNS"),
            (CURL_VERSION_UNIX_SOCKETS, "UnixSockets"),
            (CURL_VERSION_HTTPS_PROXY, "HTTPS-proxy"), (CURL_VERSION_ALTSVC, "alt-svc"),
            (CURL_VERSION_LARGEFILE, "Largefile"),
            (CURL_VERSION_IDN, "IDN"), (CURL_VERSION_THREADSAFE, "threadsafe"),
        ]
        rows.append(("features", bits.filter { info.features & $0.0 != 0 }.map(\.1).joined(separator: " ")))
        return rows
    }
}

struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Print curlew's version, and the libcurl it runs on with its TLS library, protocols and features."
    )

    func run() {
        print("curlew \(CurlewVersion.curlew)")
        let requirement = ("requires", "libcurl \(CurlewClient.oldestSupportedLibcurlVersion) or newer")
        for (label, value) in CurlewVersion.libcurlDetails + [requirement] {
            print(label.padding(toLength: 11, withPad: " ", startingAt: 0) + value)
        }
    }
}
