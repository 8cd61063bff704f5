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
/// Thread confinement: once submitted, everything is touched only on the loop that owns the transfer (inside
/// libcurl callbacks or the loop's own code), hence `@unchecked Sendable`. Only a repeated transfer
/// (``TransferRepeater``) changes its request and submission time, on its loop, between two requests. The object is
/// retained for libcurl (`Unmanaged.passRetained`) while its easy handle is in the multi handle, and libcurl's
/// callbacks receive it as unretained userdata.
final class Transfer: @unchecked Sendable, DeadlineHeapMember {
    var request: CurlewRequest
    let settings: ClientSettings
    /// When the caller submitted it (a repeated transfer: when its loop started the current request): the total
    /// timeout counts from here.
    var submittedAt: UInt64
    /// Where the response body goes.
    let sink: ResponseSink
    /// Whether a reused connection is checked for unread bytes before the request goes out on it: HTTP/1 only (an
    /// HTTP/2 connection has frames of its own waiting, which libcurl reads), on a libcurl that does not check itself.
    var checksReusedConnections: Bool
    /// Sends the transfer's requests again as each ends, without a caller in between; nil for a single request.
    var repeater: TransferRepeater?
    /// Which of its repeater's requests ``request`` is, and so the one its easy handle is configured for; -1 when the
    /// handle was configured by no request of this transfer (one taken from the pool after its first request failed
    /// to start).
    var requestIndex = 0

    /// Every decision about the transfer's course (see `TransferStateMachine`). Loop-only, and touched by every
    /// callback: no runtime exclusivity check (a callback never re-enters the transfer).
    @exclusivity(unchecked) var stateMachine: TransferStateMachine
    var continuation: TransferContinuation?
    var easy: EasyHandle?
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// The header list without the credentials (`CredentialPolicy`), built the first time a redirect leaves the
    /// request's origin.
    var headerListWithoutCredentials: UnsafeMutablePointer<curl_slist>?
    /// The header fields only a proxy gets (``HTTPFields/forEachProxyHeaderLine(_:)``); nil when there are none.
    var proxyHeaderList: UnsafeMutablePointer<curl_slist>?

    // Appended to from libcurl's callbacks, a few times per request. Only the loop touches them and no access
    // overlaps another (a callback never re-enters the transfer), so the runtime's exclusivity check is skipped.
    @exclusivity(unchecked) var responseBody: [UInt8] = []
    @exclusivity(unchecked) var rawHeaders: [UInt8] = []
    /// The current header block's `Content-Encoding` values, joined with commas; read only when decompression is on.
    var contentEncodingField: String?
    /// Whether the next header line starts a header block: only such a line is a status line, as libcurl reads it.
    /// A field named `HTTP/1.1` inside a block is a field, and must not start a new block whose framing the
    /// engine would check afresh (it hid a `Transfer-Encoding` after a `Content-Length`). Set again before every
    /// request libcurl writes (a redirect's body may end in trailers, which no empty line follows) and every socket
    /// it opens (a proxy's CONNECT answer comes first), and when the request starts over.
    var headerBlockStarting = true
    /// The final response's content decoding, when its head names a coding (decompression on): the body passes
    /// through it on its way to the sink.
    var bodyDecoding: ResponseBodyDecoding?
    /// The request body, opened when the transfer starts and closed when it ends.
    var openedBody: OpenedBody?
    /// The loop running the transfer, which wakers and consumers ask to resume a paused transfer.
    var loop: (any CurlEventLoop)?
    /// The multi handle's core running the transfer: its clock, its connections, where a streamed head waits for
    /// libcurl to return. Unowned: the core outlives every transfer it runs, and only its loop reads this while
    /// the transfer runs. Saves a retain/release pair per request.
    unowned(unsafe) var core: MultiCore?
    /// Which of its loop's multi handles runs it (the socket-action driver spreads HTTP/1 transfers over several,
    /// see `MultiPartPlan`); loop-only.
    var multiPartIndex = 0
    var lastProgressReport: UInt64 = 0
    /// The last progress report, read from libcurl before the handle goes back to the pool.
    var finalProgress: TransferProgress?
    /// When the loop picked it up.
    var startedAt: UInt64 = 0
    /// Whether libcurl has had the current request: its easy handle went into the multi handle. Until then the
    /// handle's figures are the previous request's (a pooled plain GET or a repeat is not reset), and a failure
    /// carries no metrics.
    var libcurlHasTheRequest = false
    /// The sockets libcurl opened for the current request, until it has a connection.
    var openedSockets = OpenedSockets()
    /// Whether libcurl started resolving a name or opened a socket for the current request: it has left the queue
    /// of transfers waiting for a free connection, so a timeout before the connection is a connect timeout.
    var connectionAttemptStarted = false
    /// The connection (``ConnectionRegistry/key(remoteAddress:localAddress:remotePort:localPort:)``) the current
    /// request went out on, nil until libcurl picked one: a snapshot's busy connections and transfers waiting for one
    /// (``PoolStatistics``).
    var connectionKey: Int?
    /// Whether libcurl picked a connection for the current request (the pre-request callback ran for it). Unlike
    /// ``connectionKey``, forgotten when a redirect libcurl follows needs a connection again.
    var currentRequestHasConnection = false
    /// Whether the current request (or the redirect it follows) may negotiate HTTP/2 on a libcurl where the engine
    /// checks pooled connections (7.x), on a connection not yet known to speak HTTP/1: its head's HTTP version says
    /// whether the connection is checked from then on.
    var currentRequestNotesHTTP1Connection = false
    /// Whether the current request has left libcurl's queue of transfers waiting for a free connection: libcurl is
    /// resolving or connecting for it, or it has a connection. The one rule for the engine's connection deadline
    /// and for naming a libcurl timeout (design note 0028).
    var hasLeftConnectionQueue: Bool { connectionAttemptStarted || currentRequestHasConnection }

    /// The current request needs a connection again (a new attempt or request, a retry, a redirect libcurl follows):
    /// until libcurl resolves, connects or picks one for it, it waits in libcurl's queue.
    func waitsForConnectionAgain() {
        connectionAttemptStarted = false
        currentRequestHasConnection = false
        currentRequestNotesHTTP1Connection = false
    }

    /// The current request's origin, `scheme://host:port` (``PoolStatistics``): parsed when asked, which is once per
    /// connection opened and per snapshot, never per request.
    var originKey: String { CredentialPolicy.Origin(request.transferURL)?.key ?? "(unparsed)" }

    /// The transfer's place in its loop's deadline heap (`MultiCore`), -1 while it is not in the multi handle.
    var deadlineHeapIndex = -1
    /// Whether the transfer is in its loop's multi handle.
    var isLinked: Bool { deadlineHeapIndex >= 0 }

    init(request: CurlewRequest, settings: ClientSettings, submittedAt: UInt64, sink: ResponseSink = .collect) {
        self.request = request
        self.settings = settings
        self.submittedAt = submittedAt
        self.sink = sink
        checksReusedConnections = settings.checksPooledConnection(
            beforeWritingTo: request.transferURL, version: request.httpVersion ?? settings.httpVersion)
        stateMachine = TransferStateMachine(
            setup: Self.setup(for: request, settings: settings, sink: sink, submittedAt: submittedAt))
    }

    // MARK: libcurl callbacks (called on the loop, inside libcurl)

    @inline(__always)
    func receiveBody(_ data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        recordActivity()
        guard count > 0, let data else { return count }
        let bytes = UnsafeRawBufferPointer(start: data, count: count)
        if let bodyDecoding { return receiveEncodedBody(bytes, through: bodyDecoding) }
        return storeBody(bytes)
    }

    /// Hands body bytes (as sent, or decoded) to the sink; returns the write callback's answer.
    @inline(__always)
    private func storeBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard case .collect = sink else { return receiveStreamedBody(bytes) }
        // CURLE_WRITE_ERROR when the machine says no: libcurl stops the transfer.
        guard case .accept = stateMachine.bodyReceived(count: bytes.count, keptInMemory: true) else { return 0 }
        if responseBody.isEmpty { reserveBodyCapacity() }
        responseBody.append(contentsOf: bytes)
        return bytes.count
    }

    private func receiveEncodedBody(_ bytes: UnsafeRawBufferPointer, through decoding: ResponseBodyDecoding) -> Int {
        do {
            return try decoding.receive(bytes) { storeBody($0) }
        } catch {
            _ = stateMachine.bodyUndecodable(error.detail)
            return 0
        }
    }

    /// Called when libcurl reports the transfer done without an error: whether the body is not whole after all
    /// (its content coding ended before it did), the cause then recorded as the transfer's stop cause. Releases the
    /// decoder either way.
    func bodyIncompleteAtEnd() -> Bool {
        guard let bodyDecoding else { return false }
        self.bodyDecoding = nil
        guard let failure = bodyDecoding.failureAtEndOfBody else { return false }
        _ = stateMachine.bodyUndecodable(failure.detail)
        return true
    }

    private func reserveBodyCapacity() {
        guard let easy else { return }
        // Trust an announced length only so far: a server's word must not make us allocate the whole limit up front.
        let announced = easy.info(offset: CURLINFO_CONTENT_LENGTH_DOWNLOAD_T)
        let bound = min(stateMachine.setup.inMemoryBodyLimit, 1 << 20)
        if announced > 0 { responseBody.reserveCapacity(Int(min(announced, bound))) }
    }

    @inline(__always)
    func receiveHeaderLine(_ data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        guard count > 0, let data else { return count }
        let line = UnsafeRawBufferPointer(start: data, count: count)
        var kind = HeaderLine.classify(line)
        switch kind {
        case .statusLine where !headerBlockStarting:
            kind = .otherField
        case .endOfBlock:
            headerBlockStarting = true
        default:
            headerBlockStarting = false
        }
        switch kind {
        case .statusLine:
            // A new status line starts a new header block (100 Continue, redirects): keep only the last.
            contentEncodingField = nil
            bodyDecoding = nil
            if keepsHeaderLines {
                rawHeaders.removeAll(keepingCapacity: true)
                if rawHeaders.capacity == 0 { rawHeaders.reserveCapacity(512) }
            }
            if currentRequestNotesHTTP1Connection, let easy { noteHTTP1Connection(easy) }
            recordActivity()
        case .endOfBlock:
            recordActivity()
        case .contentEncoding:
            if stateMachine.setup.decodesContent {
                let value = HeaderLine.contentEncodingValue(line)
                contentEncodingField = contentEncodingField.map { $0 + "," + value } ?? value
            }
        case .contentLength, .transferEncoding, .location, .otherField:
            break
        }
        switch stateMachine.headerLineReceived(kind) {
        case .accept:
            break
        case .abort:
            return 0
        case .readHead(let contentEncoding):
            if !headEnded(readingContentEncoding: contentEncoding) { return 0 }
        }
        if keepsHeaderLines { rawHeaders.append(contentsOf: line) }
        return count
    }

    /// Whether header lines are kept in ``rawHeaders``: for the response or streamed head a caller gets. A repeated
    /// transfer's outcomes carry no head.
    @inline(__always)
    private var keepsHeaderLines: Bool { repeater == nil }

    /// At the end of a header block the machine asked about: it reads the status (and the content coding) and
    /// says whether to go on, resume an upload paused for its producer (libcurl 7.88 does not report a transfer
    /// done while its send side is paused, even when the server has answered in full before reading the body: a
    /// 413, a 401), or hand a streaming caller its head. Returns false to stop the transfer.
    private func headEnded(readingContentEncoding: Bool) -> Bool {
        guard let easy else { return true }
        let status = easy.info(CURLINFO_RESPONSE_CODE)
        let coding =
            readingContentEncoding
            ? contentEncodingField.map { ResponseCoding(fieldValue: $0) } ?? .identity : .identity
        let action = stateMachine.headEnded(
            status: status, isContentEncoded: coding != .identity, now: core?.clock.now ?? monotonicNanoseconds())
        // Any head that is not interim may be followed by a body libcurl delivers: a 3xx it does not follow (no
        // Location, or redirects not followed), a 417 not ours. For a redirect libcurl follows, the decoding never
        // sees a byte.
        if status >= 200, action != .abort { bodyDecoding = ResponseBodyDecoding(coding) }
        switch action {
        case .accept:
            return true
        case .abort:
            return false
        case .finalResponse(let resumeSend, let deliverHead):
            if resumeSend, let loop { loop.unpause(self, .send) }
            if deliverHead { core?.deliverHeadAfterLibcurlReturns(self) }
            return true
        case .resumeSend:
            loop?.unpause(self, .send)
            return true
        case .redirectFollowed(let resumeSend):
            waitsForConnectionAgain()
            // The machine's connection deadline may now come before the one the loop's heap holds.
            core?.deadlineMayBeEarlier(for: self)
            if resumeSend, let loop { loop.unpause(self, .send) }
            return true
        }
    }

    @inline(__always)
    func sendBody(into buffer: UnsafeMutablePointer<CChar>?, capacity: Int) -> Int {
        recordActivity()
        guard let buffer, let openedBody, capacity > 0 else { return 0 }
        return stateMachine.requestBodyRead(openedBody.read(into: buffer, capacity: capacity))
    }

    /// The pre-request callback: libcurl is about to write a request (the first, or one after a redirect) on a
    /// connection it picked. The shell peeks a reused HTTP/1 connection for bytes waiting; the machine decides
    /// whether the connection is refused before anything is written (the bytes belong to no request of ours) and
    /// whether a redirect that left the request's origin goes out without its credentials.
    func requestStarting(connection key: Int, localPort: Int32) -> Int32 {
        headerBlockStarting = true
        connectionKey = key
        currentRequestHasConnection = true
        guard let easy else { return CURL_PREREQFUNC_OK }
        let redirectTarget = easy.info(CURLINFO_REDIRECT_COUNT) > 0 ? easy.info(string: CURLINFO_EFFECTIVE_URL) : nil
        let registry = settings.usesConnectionRegistry ? core?.connections : nil
        // Every new connection is registered, whether or not this request is checked or counted: a later request
        // forced to HTTP/1 may reuse it, and must not be checked on the socket of an earlier connection with the
        // same key.
        let newSocket = registry != nil ? ownNewSocket(easy, localPort: localPort) : nil
        openedSockets.forget()
        if let registry, let newSocket { registry.register(newSocket, for: key) }
        var check = TransferStateMachine.ConnectionCheck.notChecked
        if let registry, settings.checksPooledConnectionsBeforeWriting {
            let checksAsHTTP1 = checksConnectionAsHTTP1(redirectTarget: redirectTarget)
            // A new connection is never known to speak HTTP/1 (its registration forgot the key's note).
            let knownHTTP1 = !checksAsHTTP1 && registry.carriesHTTP1(key)
            currentRequestNotesHTTP1Connection = !checksAsHTTP1 && !knownHTTP1
            if newSocket == nil, checksAsHTTP1 || knownHTTP1 { check = checkPooledConnection(key, in: registry) }
        }
        if let registry, let limit = settings.maximumUsesPerConnection, localPort > 0 {
            // A redirect followed on the transfer's own connection is found as pooled (its sockets were forgotten
            // when the first request started): that connection's next use.
            let isNew = newSocket != nil
            retireConnectionAfterItsLastUse(
                easy, uses: registry.countUse(of: key, isNewConnection: isNew), limit: limit)
        }
        switch stateMachine.requestStarting(
            connection: check, redirectTarget: redirectTarget, requestURL: request.transferURL)
        {
        case .proceed:
            return CURL_PREREQFUNC_OK
        case .proceedWithoutCredentials:
            withholdCredentials(easy)
            return CURL_PREREQFUNC_OK
        case .abandonConnection:
            return CURL_PREREQFUNC_ABORT
        }
    }

    /// Whether the request (or the redirect it follows) can be nothing but HTTP/1, so its pooled connection is
    /// checked whatever the registry knows of it.
    private func checksConnectionAsHTTP1(redirectTarget: String?) -> Bool {
        redirectTarget.map {
            settings.checksPooledConnection(beforeWritingTo: $0, version: request.httpVersion ?? settings.httpVersion)
        } ?? checksReusedConnections
    }

    /// A request that allowed HTTP/2 (https with ALPN) got a head in HTTP/1 (the server does not speak HTTP/2): its
    /// connection is checked before every later request on it, as any HTTP/1 connection is. Noted at the status
    /// line (libcurl sets the version as it parses it), not at the transfer's end: libcurl may hand the connection to
    /// a waiting transfer, or follow a redirect on it, before the loop reads the transfer's completion. A proxy's
    /// CONNECT answer comes before the pre-request callback, while this request's flag is still clear.
    private func noteHTTP1Connection(_ easy: EasyHandle) {
        guard let connectionKey, let registry = core?.connections else { return }
        let version = easy.info(CURLINFO_HTTP_VERSION)
        if version == Int(CURL_HTTP_VERSION_1_0) || version == Int(CURL_HTTP_VERSION_1_1) {
            registry.noteSpeaksHTTP1(connectionKey)
        }
    }

    /// Peeks the pooled HTTP/1 connection `key` for bytes waiting, when its socket is known. It is HTTP/1 when the
    /// request (or the redirect it follows) can be nothing else, or when a request that may negotiate HTTP/2 met a
    /// server without it there.
    private func checkPooledConnection(
        _ key: Int, in registry: ConnectionRegistry
    ) -> TransferStateMachine.ConnectionCheck {
        guard let socket = registry.socketToCheck(for: key) else { return .notChecked }
        return curlew_socket_is_quiet(socket) == 1 ? .clean : .unreadBytesOrClosed
    }

    /// The socket of the connection the request is about to go out on, when that is a new connection this transfer
    /// opened: the transfer opened one (CURLINFO_NUM_CONNECTS is 0 until it does) and it is one of the sockets it
    /// opened for this request (happy eyeballs may open several), bound to the connection's local port. After an
    /// attempt on a new connection, libcurl's own retry of a request that got nothing back can take a pooled
    /// connection (`make soak` saw fake responses answer such retries): every other connection is a pooled one.
    private func ownNewSocket(_ easy: EasyHandle, localPort: Int32) -> Int32? {
        guard localPort > 0, easy.info(CURLINFO_NUM_CONNECTS) > 0 else { return nil }
        return openedSockets.newest(boundTo: localPort)
    }

    /// When this request is its connection's last allowed one (`uses` of `limit`), has libcurl close the connection
    /// once the transfer is done (`CURLOPT_FORBID_REUSE`, read when the transfer ends). Unix-socket connections
    /// report no ports, so they cannot be told apart and are not counted.
    private func retireConnectionAfterItsLastUse(_ easy: EasyHandle, uses: Int, limit: Int) {
        guard uses >= limit else { return }
        _ = easy.set(CURLOPT_FORBID_REUSE, true)
        // The option stays on the handle: its next transfer must start from a reset handle.
        self.easy?.isConfiguredForPlainGET = false
    }

    /// A socket opens for a request with proxy fields: a redirect hop to another origin goes without them from
    /// here, before a proxy's CONNECT is written on it (``TransferStateMachine/connectionOpening(redirectTarget:requestURL:)``).
    fileprivate func connectionOpening() {
        guard let easy, easy.info(CURLINFO_REDIRECT_COUNT) > 0,
            stateMachine.connectionOpening(
                redirectTarget: easy.info(string: CURLINFO_EFFECTIVE_URL), requestURL: request.transferURL)
        else { return }
        _ = curlew_easy_setopt_slist(easy.raw, CURLOPT_PROXYHEADER, nil)
    }

    /// Swaps in the header list without credentials, and takes the proxy's list off. libcurl reads the lists when
    /// it writes the request, right after the pre-request callback; it keeps them for the later requests of the
    /// transfer.
    private func withholdCredentials(_ easy: EasyHandle) {
        if proxyHeaderList != nil { _ = curlew_easy_setopt_slist(easy.raw, CURLOPT_PROXYHEADER, nil) }
        if headerListWithoutCredentials == nil {
            headerListWithoutCredentials = buildHeaderList(
                hasBody: Self.sendsBody(request), expectContinue: request.expectContinue ?? settings.expectContinue,
                withholdingCredentials: true)
        }
        _ = curlew_easy_setopt_slist(easy.raw, CURLOPT_HTTPHEADER, headerListWithoutCredentials)
    }

    @inline(__always)
    private func recordActivity() {
        if stateMachine.setup.idleTimeout != 0, let core { stateMachine.activity(at: core.clock.now) }
    }

    /// Whether libcurl has written the request (its pre-transfer phase is over), for the idle clock.
    func requestWasSent() -> Bool {
        guard let easy else { return false }
        return easy.info(microseconds: CURLINFO_PRETRANSFER_TIME_T) > .zero
    }

    /// Rewinds the request body for a 307/308 redirect or an authentication retry.
    func seekBody(to offset: Int64, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, let openedBody else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
        return stateMachine.requestBodyRewound(failure: openedBody.rewind(to: offset))
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

let transferPrereqCallback: curlew_prereq_callback = { userdata, remoteAddress, localAddress, remotePort, localPort in
    let key = ConnectionRegistry.key(
        remoteAddress: remoteAddress, localAddress: localAddress, remotePort: remotePort, localPort: localPort)
    return withTransfer(userdata) { $0.requestStarting(connection: key, localPort: localPort) }
}

/// Called for every socket libcurl opens for the transfer: remembered, so the connection's socket is known when
/// it is reused (libcurl 7.88's CURLINFO_ACTIVESOCKET names the handle's previous connection, not the current one),
/// and recorded in the loop's connection book for ``PoolStatistics``.
let transferSocketOptionCallback: curl_sockopt_callback = { userdata, socket, _ in
    withTransfer(userdata) { transfer in
        transfer.openedSockets.opened(socket)
        transfer.headerBlockStarting = true
        transfer.connectionAttemptStarted = true
        transfer.core?.connectionBook.opened(socket, origin: transfer.originKey)
        if transfer.proxyHeaderList != nil { transfer.connectionOpening() }
    }
    return CURL_SOCKOPT_OK
}

/// Called when libcurl starts resolving a name for the transfer (not for one its DNS cache holds): the transfer is
/// no longer waiting for a free connection. Resolving goes on (0).
let transferResolverStartCallback: curlew_resolver_start_callback = { _, _, userdata in
    withTransfer(userdata) { $0.connectionAttemptStarted = true }
    return 0
}

let transferSeekCallback: curl_seek_callback = { userdata, offset, origin in
    withTransfer(userdata) { $0.seekBody(to: Int64(offset), origin: origin) }
}
