import CLibCurl

/// A libcurl easy handle and the error buffer it writes into; pooled per loop and reset between transfers.
struct EasyHandle {
    let raw: UnsafeMutableRawPointer
    /// libcurl keeps this pointer, so it is allocated once with the handle and freed with it.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// Whether the handle is configured for a plain GET with its client's defaults (see
    /// `Transfer.configureRepeatedPlainGET`); any other transfer resets it first.
    var isConfiguredForPlainGET = false

    /// - Parameter share: the process-wide share handle. Attached once: `curl_easy_reset` keeps it, and attaching
    ///   takes libcurl's process-wide share lock twice, so doing it per transfer would serialise all loops.
    static func make(share: UnsafeMutableRawPointer?) -> EasyHandle? {
        guard let raw = curl_easy_init() else { return nil }
        if let share { _ = curlew_easy_setopt_pointer(raw, CURLOPT_SHARE, share) }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        return EasyHandle(raw: raw, errorBuffer: errorBuffer, isConfiguredForPlainGET: false)
    }

    /// Clears every option so nothing of the previous transfer (pointers included) survives.
    func reset() {
        curl_easy_reset(raw)
        errorBuffer[0] = 0
    }

    func destroy() {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    var errorMessage: String? {
        errorBuffer[0] == 0 ? nil : String(cString: errorBuffer)
    }

    @inline(__always)
    func set(_ option: CURLoption, _ value: Int) -> CURLcode {
        curlew_easy_setopt_long(raw, option, value)
    }

    @inline(__always)
    func set(_ option: CURLoption, _ value: Bool) -> CURLcode {
        curlew_easy_setopt_long(raw, option, value ? 1 : 0)
    }

    @inline(__always)
    func set(_ option: CURLoption, offset value: Int64) -> CURLcode {
        curlew_easy_setopt_off_t(raw, option, curl_off_t(value))
    }

    @inline(__always)
    func set(_ option: CURLoption, pointer value: UnsafeRawPointer?) -> CURLcode {
        curlew_easy_setopt_pointer(raw, option, value)
    }

    /// libcurl copies blobs (`CURL_BLOB_COPY`), so the bytes need not outlive the call.
    @inline(__always)
    func set(_ option: CURLoption, blob bytes: [UInt8]) -> CURLcode {
        bytes.withUnsafeBytes { curlew_easy_setopt_blob(raw, option, $0.baseAddress, $0.count) }
    }

    /// libcurl copies string options, so a temporary C string is enough.
    @inline(__always)
    func set(_ option: CURLoption, _ value: String) -> CURLcode {
        value.withCString { curlew_easy_setopt_string(raw, option, $0) }
    }

    func info(_ info: CURLINFO) -> Int {
        var value = 0
        _ = curlew_easy_getinfo_long(raw, info, &value)
        return value
    }

    func info(offset info: CURLINFO) -> Int64 {
        var value: curl_off_t = 0
        _ = curlew_easy_getinfo_off_t(raw, info, &value)
        return Int64(value)
    }

    func info(microseconds info: CURLINFO) -> Duration {
        .microseconds(self.info(offset: info))
    }

    func info(string info: CURLINFO) -> String? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard curlew_easy_getinfo_string(raw, info, &pointer) == CURLE_OK, let pointer else { return nil }
        return String(cString: pointer)
    }
}
