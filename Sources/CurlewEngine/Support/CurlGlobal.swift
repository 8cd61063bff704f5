import CLibCurl
import Glibc

/// Process-wide libcurl state: initialised exactly once, before any other libcurl call.
enum CurlGlobal {
    /// What the linked libcurl can do, read once after `curl_global_init`.
    struct Capabilities: Sendable {
        /// The libcurl this process runs on, which every version-specific behaviour is keyed off.
        let libcurl: LibcurlVersion
        /// Its own version text, for example "8.14.1-DEV".
        let version: String
        let supportsHTTP2: Bool
    }

    /// Swift's lazy global initialisation runs this once, thread-safely.
    static let capabilities: Capabilities = {
        curlew_disable_openssl_atexit()
        curlew_ignore_sigpipe()
        let code = curlew_global_init(Int(CURL_GLOBAL_ALL))
        precondition(code == CURLE_OK, "curl_global_init failed with code \(code.rawValue)")
        guard let info = curlew_version_info() else {
            return Capabilities(
                libcurl: LibcurlVersion(number: 0), version: "unknown", supportsHTTP2: false)
        }
        let features = info.pointee.features
        return Capabilities(
            libcurl: LibcurlVersion(number: UInt32(info.pointee.version_num)),
            version: info.pointee.version.map { String(cString: $0) } ?? "unknown",
            supportsHTTP2: features & CURL_VERSION_HTTP2 != 0
        )
    }()

    /// One share handle for the process: DNS cache and TLS sessions are shared by every loop.
    nonisolated(unsafe) static let share: UnsafeMutableRawPointer? = {
        _ = capabilities
        return curlew_share_create()
    }()

    /// A new share handle with a cookie store of its own, for a client that keeps cookies; nil if libcurl has no
    /// memory for it. The caller cleans it up once no easy handle uses it.
    static func makeCookieShare() -> UnsafeMutableRawPointer? {
        _ = share  // initialises the lock mutexes the new share uses
        return curlew_share_create_with_cookies()
    }

    static func ensureInitialized() {
        _ = capabilities
        _ = share
    }
}

extension Duration {
    /// Whole nanoseconds, saturating; negative durations become zero. `.max` is a timeout the engine counts as no
    /// limit (a deadline that far cannot be represented), as with `.seconds(Int64.max)`.
    package var saturatingNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        let (wholeNanos, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .max }
        // Round sub-nanosecond remainders up so a tiny positive duration never becomes zero.
        let fraction = UInt64((attoseconds + 999_999_999) / 1_000_000_000)
        let (total, overflow2) = wholeNanos.addingReportingOverflow(fraction)
        return overflow2 ? .max : total
    }
}

/// libcurl takes milliseconds and treats 0 as "no timeout": round up, never down to zero.
@inline(__always)
func curlMilliseconds(fromNanoseconds nanoseconds: UInt64) -> Int {
    let milliseconds = (nanoseconds / 1_000_000) + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
    return Int(clamping: max(milliseconds, 1))
}
