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
final class Transfer: @unchecked Sendable, DeadlineHeapMember {
    let request: CurlewRequest
    let settings: ClientSettings
    /// When the caller submitted it: the total timeout counts from here.
    let submittedAt: UInt64

    /// Every decision about the transfer's course (see `TransferStateMachine`). Loop-only, and touched by every
    /// callback: no runtime exclusivity check (a callback never re-enters the transfer).
    @exclusivity(unchecked) var stateMachine = TransferStateMachine()
    var continuation: TransferContinuation?
    var easy: EasyHandle?
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// The header list without the credentials (`CredentialPolicy`), built the first time a redirect leaves the
    /// request's origin (nil when nothing else is left).
    var headerListWithoutCredentials: UnsafeMutablePointer<curl_slist>?
    var credentialsWithheld = false
    /// Whether the request carries a field `CredentialPolicy` withholds from other origins.
    var carriesCredentials = false
    /// Whether a reused connection is checked for unread bytes before a request goes out on it: HTTP/1 only (an
    /// HTTP/2 connection has frames of its own waiting, which libcurl reads), on a libcurl that does not check itself.
    var checksReusedConnections = false

    // Appended to from libcurl's callbacks, a few times per request. Only the loop touches them and no access
    // overlaps another (a callback never re-enters the transfer), so the runtime's exclusivity check is skipped.
    @exclusivity(unchecked) var responseBody: [UInt8] = []
    @exclusivity(unchecked) var rawHeaders: [UInt8] = []
    var bodyLimit = 0
    /// The bound on decoded bytes of a content-encoded body, when smaller than `bodyLimit`.
    var decodedLimit: Int?
    /// Body bytes handed to a streaming or file sink, for the size limit.
    var receivedBodyBytes: Int64 = 0
    /// The request body, opened when the transfer starts and closed when it ends.
    var openedBody: OpenedBody?
    /// Where the response body goes.
    let sink: ResponseSink
    /// The loop running the transfer, which wakers and consumers ask to resume a paused transfer.
    var loop: (any CurlEventLoop)?
    /// Which of its loop's multi handles runs it (the socket-action driver spreads HTTP/1 transfers over several,
    /// see `MultiPartPlan`); loop-only.
    var multiPartIndex = 0
    /// Whether the request carries the engine's own `Expect: 100-continue`.
    var sentExpectContinue = false
    /// Whether libcurl follows redirects for this request (a 3xx head is then not the final one).
    var followsRedirects = false
    var lastProgressReport: UInt64 = 0
    /// The last progress report, read from libcurl before the handle goes back to the pool.
    var finalProgress: TransferProgress?

    var startedAt: UInt64 = 0
    var totalDeadline: UInt64?
    /// The owning loop's clock, read by the callbacks instead of the system clock.
    /// Unowned: the loop's core owns its clock and outlives every transfer it runs; only the loop reads it while the
    /// transfer runs. Saves a retain/release pair per request.
    unowned(unsafe) var loopClock: LoopClock?
    /// The loop's sockets by connection, for the check of reused connections; unowned like the clock.
    unowned(unsafe) var connections: ConnectionRegistry?
    /// The socket libcurl opened last for this transfer.
    var openedSocket: Int32?
    /// The HTTP/1 connection of the transfer's last request, as `ConnectionRegistry` keys it.
    var connectionKey: Int?

    /// The earliest of the idle and total deadlines, as of the last activity.
    var nextDeadline: UInt64 {
        min(totalDeadline ?? .max, stateMachine.idleDeadline)
    }

    /// The transfer's place in its loop's deadline heap (`MultiCore`), -1 while it is not in the multi handle.
    var deadlineHeapIndex = -1
    /// Whether the transfer is in its loop's multi handle.
    var isLinked: Bool { deadlineHeapIndex >= 0 }

    init(request: CurlewRequest, settings: ClientSettings, submittedAt: UInt64, sink: ResponseSink = .collect) {
        self.request = request
        self.settings = settings
        self.submittedAt = submittedAt
        self.sink = sink
    }

    // MARK: libcurl callbacks (called on the loop, inside libcurl)

    @inline(__always)
    func receiveBody(_ data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        recordActivity()
        guard count > 0, let data else { return count }
        stateMachine.bodyReceived()
        if case .collect = sink {
        } else {
            return receiveStreamedBody(UnsafeRawBufferPointer(start: data, count: count))
        }
        if responseBody.count + count > bodyLimit {
            stateMachine.bodyLimitExceeded()
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
        switch HeaderLine.classify(line) {
        case .statusLine:
            // A new status line starts a new header block (100 Continue, redirects): keep only the last.
            rawHeaders.removeAll(keepingCapacity: true)
            if rawHeaders.capacity == 0 { rawHeaders.reserveCapacity(512) }
            recordActivity()
            stateMachine.statusLineReceived()
        case .endOfBlock:
            recordActivity()
            if decodedLimit != nil { applyDecodedLimitIfEncoded() }
            // Only uploads, streamed responses and the engine's 417 check care (a getinfo call the plain GET path
            // does without).
            if sentExpectContinue || openedBody != nil || (continuation != nil && !sink.usesCollectingOptions) {
                if !headerBlockEnded() { return 0 }
            }
        case .contentLength(let value):
            if stateMachine.contentLengthReceived(value) == .abort { return 0 }
        case .transferEncoding:
            if stateMachine.transferEncodingReceived() == .abort { return 0 }
        case .otherField:
            break
        }
        rawHeaders.append(contentsOf: line)
        return count
    }

    /// At the end of a header block: a streaming caller gets the final head, an upload paused for its producer is
    /// resumed (libcurl 7.88 does not report a transfer done while its send side is paused, even when the server
    /// has answered in full before reading the body: a 413, a 401). Returns false to stop the transfer.
    private func headerBlockEnded() -> Bool {
        guard let easy else { return true }
        let status = easy.info(CURLINFO_RESPONSE_CODE)
        let action = stateMachine.headerBlockEnded(
            status: status, followsRedirect: followsRedirects && (300..<400).contains(status),
            sentExpectContinue: sentExpectContinue)
        switch action {
        case .accept:
            return true
        case .abort:
            return false
        case .finalResponse(let resumeSend):
            if resumeSend, let loop { loop.unpause(self, .send) }
            if case .stream = sink, continuation != nil { deliverHead() }
            return true
        }
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
        recordActivity()
        guard let buffer, let openedBody else { return 0 }
        let result = openedBody.read(into: buffer, capacity: capacity)
        if result == Int(CURL_READFUNC_PAUSE) { stateMachine.paused(.send) }
        return result
    }

    /// The pre-request callback: libcurl is about to write a request (the first, or one after a redirect) on a
    /// connection it picked. A reused HTTP/1 connection with bytes waiting is refused before anything is written
    /// (the bytes belong to no request of ours), and a redirect that leaves the request's origin goes out without
    /// its credentials.
    func requestStarting(localPort: Int32, remotePort: Int32) -> Int32 {
        guard let easy else { return CURL_PREREQFUNC_OK }
        let redirectCount = easy.info(CURLINFO_REDIRECT_COUNT)
        var effectiveURL: String?
        if redirectCount > 0 {
            effectiveURL = easy.info(string: CURLINFO_EFFECTIVE_URL)
            if carriesCredentials, let effectiveURL { applyCredentialPolicy(to: easy, at: effectiveURL) }
        }
        var check = TransferStateMachine.ConnectionCheck.notChecked
        let checks =
            effectiveURL.map {
                settings.checksPooledConnection(
                    beforeWritingTo: $0, version: request.httpVersion ?? settings.httpVersion)
            } ?? checksReusedConnections
        if checks, let connections {
            let key = ConnectionRegistry.key(localPort: localPort, remotePort: remotePort)
            // A redirect that moves to another connection leaves the previous one idle.
            if let previous = connectionKey, previous != key { connections.requestEnded(on: previous) }
            connectionKey = key
            // CURLINFO_NUM_CONNECTS is 0 while the transfer has opened no connection: libcurl handed it a pooled one.
            if easy.info(CURLINFO_NUM_CONNECTS) == 0 {
                if let socket = connections.socketToCheck(for: key) {
                    check = curlew_socket_is_quiet(socket) == 1 ? .clean : .unreadBytesOrClosed
                }
                connections.requestStarted(on: key)
            } else if let openedSocket {
                connections.register(openedSocket, for: key)
            }
        }
        switch stateMachine.requestStarting(connection: check) {
        case .proceed: return CURL_PREREQFUNC_OK
        case .abandonConnection: return CURL_PREREQFUNC_ABORT
        }
    }

    /// Swaps in the header list without credentials when a redirect leaves the request's origin. libcurl reads
    /// the list when it writes the request, right after this callback.
    private func applyCredentialPolicy(to easy: EasyHandle, at effectiveURL: String) {
        guard !CredentialPolicy.mayCarryCredentials(from: request.url, to: effectiveURL) else { return }
        if !credentialsWithheld {
            credentialsWithheld = true
            headerListWithoutCredentials = buildHeaderList(
                hasBody: openedBody != nil, expectContinue: request.expectContinue ?? settings.expectContinue,
                withholdingCredentials: true)
        }
        _ = curlew_easy_setopt_slist(easy.raw, CURLOPT_HTTPHEADER, headerListWithoutCredentials)
    }

    @inline(__always)
    private func recordActivity() {
        if stateMachine.idleTimeout != 0, let loopClock { stateMachine.activity(at: loopClock.now) }
    }

    /// Whether libcurl has written the request (its pre-transfer phase is over), for the idle clock.
    func requestWasSent() -> Bool {
        guard let easy else { return false }
        return easy.info(microseconds: CURLINFO_PRETRANSFER_TIME_T) > .zero
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

let transferPrereqCallback: curlew_prereq_callback = { userdata, _, _, remotePort, localPort in
    withTransfer(userdata) { $0.requestStarting(localPort: localPort, remotePort: remotePort) }
}

/// Called for every socket libcurl opens for the transfer: remembered, so the connection's socket is known when
/// it is reused (libcurl 7.88's CURLINFO_ACTIVESOCKET names the handle's previous connection, not the current one).
let transferSocketOptionCallback: curl_sockopt_callback = { userdata, socket, _ in
    withTransfer(userdata) { $0.openedSocket = socket }
    return CURL_SOCKOPT_OK
}

let transferSeekCallback: curl_seek_callback = { userdata, offset, origin in
    withTransfer(userdata) { $0.seekBody(to: Int64(offset), origin: origin) }
}
