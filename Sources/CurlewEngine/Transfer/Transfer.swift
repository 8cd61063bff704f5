import CLibCurl
import HTTPTypes
import Synchronization

#if DEBUG
/// Debug builds (and so the test suite) check that every transfer resumes its caller exactly once.
typealias TransferContinuation = CheckedContinuation<CurlewResponse, any Error>
#else
typealias TransferContinuation = UnsafeContinuation<CurlewResponse, any Error>
#endif

/// One request's life on a loop: its options, libcurl callbacks, collected bytes and the caller's continuation.
///
/// Thread confinement: everything but the immutable request is touched only on the loop that owns the
/// transfer (inside libcurl callbacks or the loop's own code), hence `@unchecked Sendable`. The object is
/// retained for libcurl (`Unmanaged.passRetained`) while its easy handle is in the multi handle, and libcurl's
/// callbacks receive it as unretained userdata.
final class Transfer: @unchecked Sendable {
    let request: CurlewRequest
    let settings: ClientSettings
    /// When the caller submitted it: the total timeout counts from here.
    let submittedAt: UInt64

    var stateMachine = TransferStateMachine()
    var continuation: TransferContinuation?
    var easy: EasyHandle?
    var headerList: UnsafeMutablePointer<curl_slist>?

    // Appended to from libcurl's callbacks, a few times per request. Only the loop touches them and no access
    // overlaps another (a callback never re-enters the transfer), so the runtime's exclusivity check is skipped.
    @exclusivity(unchecked) var responseBody: [UInt8] = []
    @exclusivity(unchecked) var rawHeaders: [UInt8] = []
    var bodyLimit = 0
    /// The bound on decoded bytes of a content-encoded body, when smaller than `bodyLimit`.
    var decodedLimit: Int?
    var limitExceeded = false
    /// Body bytes handed to a streaming or file sink, for the size limit.
    var receivedBodyBytes: Int64 = 0
    /// The request body, opened when the transfer starts and closed when it ends.
    var openedBody: OpenedBody?
    /// Where the response body goes.
    let sink: ResponseSink
    /// The loop running the transfer, which wakers and consumers ask to resume a paused transfer.
    var loop: (any CurlEventLoop)?
    /// Whether a callback paused the transfer (`CURL_READFUNC_PAUSE` / `CURL_WRITEFUNC_PAUSE`) and it waits for
    /// the body's producer or the response's consumer; a paused transfer is not idle.
    var sendPaused = false
    var receivePaused = false
    /// Whether the final response's header block has arrived: from then on an upload that waits for its
    /// producer is idle like any other transfer, since the server has answered.
    var responseStarted = false
    /// Whether the request carries the engine's own `Expect: 100-continue`, and whether the server refused it.
    var sentExpectContinue = false
    var expectationRejected = false
    var lastProgressReport: UInt64 = 0
    /// The last progress report, read from libcurl before the handle goes back to the pool.
    var finalProgress: TransferProgress?

    var startedAt: UInt64 = 0
    var totalDeadline: UInt64?
    var idleTimeout: UInt64 = 0
    var lastActivity: UInt64 = 0
    /// The owning loop's clock, read by the callbacks instead of the system clock.
    /// Unowned: the loop's core owns its clock and outlives every transfer it runs; only the loop reads it while the
    /// transfer runs. Saves a retain/release pair per request.
    unowned(unsafe) var loopClock: LoopClock?
    /// Whether the idle clock runs: only once the request is on its way. Before that (waiting for a free
    /// connection, resolving, connecting) the connect and total timeouts apply, not the idle one.
    var idleClockStarted = false

    /// The earliest of the idle and total deadlines, as of the last activity.
    var nextDeadline: UInt64 {
        min(totalDeadline ?? .max, idleTimeout == 0 ? .max : lastActivity + idleTimeout)
    }

    /// Links of the loop's list of running transfers. Unowned: a linked transfer is kept alive by the reference taken
    /// for libcurl (`MultiCore.start`), which is given up only by code that also holds the transfer and unlinks it,
    /// so the list needs no references of its own (two retain/release pairs per request fewer).
    unowned(unsafe) var previous: Transfer?
    unowned(unsafe) var next: Transfer?
    var isLinked = false

    init(request: CurlewRequest, settings: ClientSettings, submittedAt: UInt64, sink: ResponseSink = .collect) {
        self.request = request
        self.settings = settings
        self.submittedAt = submittedAt
        self.sink = sink
    }

    // MARK: libcurl callbacks (called on the loop, inside libcurl)

    @inline(__always)
    func receiveBody(_ data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        if idleTimeout != 0, let loopClock { markActivity(loopClock.now) }
        guard count > 0, let data else { return count }
        if case .collect = sink {} else { return receiveStreamedBody(UnsafeRawBufferPointer(start: data, count: count)) }
        if responseBody.count + count > bodyLimit {
            limitExceeded = true
            return 0  // CURLE_WRITE_ERROR: libcurl stops the transfer
        }
        if responseBody.isEmpty { reserveBodyCapacity() }
        responseBody.append(contentsOf: UnsafeRawBufferPointer(start: data, count: count))
        return count
    }

    private func reserveBodyCapacity() {
        guard let easy else { return }
        // Trust an announced length only so far: a server's word must not make us allocate the whole limit up front.
        let announced = easy.info(offset: CURLINFO_CONTENT_LENGTH_DOWNLOAD_T)
        if announced > 0 { responseBody.reserveCapacity(Int(min(announced, Int64(min(bodyLimit, 1 << 20))))) }
    }

    @inline(__always)
    func receiveHeaderLine(_ data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        guard count > 0, let data else { return count }
        let line = UnsafeRawBufferPointer(start: data, count: count)
        if count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
            line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/")
        {
            // A new status line starts a new header block (100 Continue, redirects): keep only the last.
            rawHeaders.removeAll(keepingCapacity: true)
            if rawHeaders.capacity == 0 { rawHeaders.reserveCapacity(512) }
            if idleTimeout != 0, let loopClock { markActivity(loopClock.now) }
        } else if count <= 2 {
            if idleTimeout != 0, let loopClock { markActivity(loopClock.now) }
            if decodedLimit != nil { applyDecodedLimitIfEncoded() }
            if sentExpectContinue, let easy, easy.info(CURLINFO_RESPONSE_CODE) == 417 {
                // libcurl 7.88 would resend the request without end: it drops only an Expect header it added itself.
                expectationRejected = true
                return 0
            }
            // Only uploads and streamed responses care (a getinfo call the plain GET path does without).
            if openedBody != nil || continuation != nil && !sink.usesCollectingOptions { finalHeaderBlockEnded() }
        }
        rawHeaders.append(contentsOf: line)
        return count
    }

    /// At the end of a header block: a content-encoded body gets the smaller decoded-size bound.
    private func applyDecodedLimitIfEncoded() {
        guard let decodedLimit else { return }
        let fields = ResponseHeaderParser.fields(from: rawHeaders)
        if let encoding = fields[.contentEncoding], encoding.lowercased() != "identity" {
            bodyLimit = min(bodyLimit, decodedLimit)
        }
    }

    @inline(__always)
    func sendBody(into buffer: UnsafeMutablePointer<CChar>?, capacity: Int) -> Int {
        if idleTimeout != 0, let loopClock { markActivity(loopClock.now) }
        guard let buffer, let openedBody else { return 0 }
        let result = openedBody.read(into: buffer, capacity: capacity)
        if result == Int(CURL_READFUNC_PAUSE) { sendPaused = true }
        return result
    }

    /// Called when the idle deadline seems to have passed; returns whether it really has. The idle clock starts
    /// with the first byte a callback sees, or when a deadline check finds the request sent
    /// (`CURLINFO_PRETRANSFER_TIME_T`, checked every quarter period); until then it is held back, since waiting for
    /// a connection is not idleness. A silent server is thus detected between 1 and 1.25 idle periods after the
    /// request went out.
    func idleDeadlinePassed(now: UInt64) -> Bool {
        if receivePaused || (sendPaused && !responseStarted) {
            // Waiting for our own producer or consumer is not the server being silent.
            lastActivity = now
            return false
        }
        if !idleClockStarted {
            // Not libcurl's timestamps: they count from when the transfer left libcurl's queue for a connection.
            // The clock starts now, at the latest one idle period after the request went out.
            if let easy, easy.info(microseconds: CURLINFO_PRETRANSFER_TIME_T) > .zero {
                idleClockStarted = true
                lastActivity = now
            } else {
                // Look again in a quarter period, so the clock starts at most that late.
                lastActivity = now - min(now, idleTimeout - idleTimeout / 4)
            }
            return false
        }
        return lastActivity + idleTimeout <= now
    }

    @inline(__always)
    private func markActivity(_ now: UInt64) {
        lastActivity = now
        idleClockStarted = true
    }

    /// Rewinds the request body for a 307/308 redirect or an authentication retry.
    func seekBody(to offset: Int64, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, let openedBody, openedBody.seek(to: offset) else {
            return Int32(CURL_SEEKFUNC_CANTSEEK)
        }
        return Int32(CURL_SEEKFUNC_OK)
    }
}

// The C entry points: no captures, the transfer arrives as userdata. libcurl holds a reference for as long as the
// handle is in the multi handle (see `MultiCore.start`), so the callbacks borrow it without retaining it again: the
// header and write callbacks run several times per request, and a retain/release pair each showed in profiles.

@inline(__always)
private func withTransfer<Result>(_ userdata: UnsafeMutableRawPointer?, _ body: (Transfer) -> Result) -> Result {
    Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef(body)
}

let transferWriteCallback: curl_write_callback = { data, size, count, userdata in
    withTransfer(userdata) { $0.receiveBody(data, count: size * count) }
}

let transferHeaderCallback: curl_write_callback = { data, size, count, userdata in
    withTransfer(userdata) { $0.receiveHeaderLine(data, count: size * count) }
}

let transferReadCallback: curl_read_callback = { buffer, size, count, userdata in
    withTransfer(userdata) { $0.sendBody(into: buffer, capacity: size * count) }
}

let transferProgressCallback: curl_xferinfo_callback = { userdata, downloadTotal, downloaded, uploadTotal, uploaded in
    withTransfer(userdata) {
        $0.reportProgress(
            downloadTotal: Int64(downloadTotal), downloaded: Int64(downloaded), uploaded: Int64(uploaded))
    }
    return 0
}

let transferSeekCallback: curl_seek_callback = { userdata, offset, origin in
    withTransfer(userdata) { $0.seekBody(to: Int64(offset), origin: origin) }
}
