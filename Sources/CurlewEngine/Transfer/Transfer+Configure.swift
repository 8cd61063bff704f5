import CLibCurl
import Foundation
import HTTPTypes

extension Transfer {
    /// Sets every option of this transfer on a freshly reset easy handle.
    ///
    /// - Parameters:
    ///   - userdata: the retained pointer to `self` that libcurl hands back to the callbacks.
    ///   - now: the loop's current monotonic time.
    /// - Returns: why the request cannot start, if it cannot.
    func configure(
        _ easy: EasyHandle, userdata: UnsafeMutableRawPointer, now: UInt64
    )
        -> TransferStateMachine.Failure?
    {
        startedAt = now
        libcurlHasTheRequest = false
        connectionKey = nil
        waitsForConnectionAgain()
        let settings = settings
        var isPlainGET = request.usesClientDefaultsForPlainGET
        if !sink.usesCollectingOptions { isPlainGET = false }
        if isPlainGET && easy.isConfiguredForPlainGET {
            return configureRepeatedPlainGET(easy, userdata: userdata)
        }
        if easy.isConfiguredForPlainGET { easy.reset() }
        // Marked for the fast path only once every option took: a handle configured part-way (a malformed pin, an
        // option libcurl refused) is reset before its next transfer, which would otherwise go out without the options
        // after the failure.
        self.easy?.isConfiguredForPlainGET = false
        let httpVersion = request.httpVersion ?? settings.httpVersion
        let redirects = request.redirects ?? settings.redirects
        let timeouts = Self.timeouts(of: request, settings: settings)

        var status = CURLE_OK
        @inline(__always) func apply(_ code: CURLcode) {
            if code != CURLE_OK, status == CURLE_OK { status = code }
        }

        apply(easy.set(CURLOPT_PRIVATE, pointer: userdata))
        apply(easy.set(CURLOPT_ERRORBUFFER, pointer: easy.errorBuffer))
        apply(curlew_easy_setopt_write_callback(easy.raw, CURLOPT_WRITEFUNCTION, transferWriteCallback))
        apply(easy.set(CURLOPT_WRITEDATA, pointer: userdata))
        apply(curlew_easy_setopt_write_callback(easy.raw, CURLOPT_HEADERFUNCTION, transferHeaderCallback))
        apply(easy.set(CURLOPT_HEADERDATA, pointer: userdata))
        apply(curlew_easy_setopt_prereq_callback(easy.raw, transferPrereqCallback))
        apply(easy.set(CURLOPT_PREREQDATA, pointer: userdata))
        apply(curlew_easy_setopt_sockopt_callback(easy.raw, transferSocketOptionCallback))
        apply(easy.set(CURLOPT_SOCKOPTDATA, pointer: userdata))
        apply(curlew_easy_setopt_resolver_start_callback(easy.raw, transferResolverStartCallback))
        apply(easy.set(CURLOPT_RESOLVER_START_DATA, pointer: userdata))
        apply(easy.set(CURLOPT_NOSIGNAL, true))
        apply(curlew_easy_allow_only_http(easy.raw))
        apply(easy.set(CURLOPT_URL, request.transferURL))
        if settings.libcurlVerbose { apply(easy.set(CURLOPT_VERBOSE, true)) }

        // Method and body. POST, PUT and PATCH always carry a body, empty if none was given (Content-Length: 0);
        // libcurl's defaults would otherwise read the body from the process's stdin. Other methods carry one only
        // when given.
        let method = request.method
        let sendsBody = Self.sendsBody(request)
        if method == .head {
            apply(easy.set(CURLOPT_NOBODY, true))
        } else if sendsBody {
            if let body = request.body {
                switch OpenedBody.open(body, compression: request.bodyCompression) {
                case .success(let opened): openedBody = opened
                case .failure(let error): return .invalidRequest(error)
                }
                if OpenedBody.benefitsFromLargeBuffer(body) || request.bodyCompression != nil {
                    apply(easy.set(CURLOPT_UPLOAD_BUFFERSIZE, 256 * 1024))
                }
                if let loop, !body.isReplayable {
                    // Only streams pause. Any thread may wake a paused upload; the loop resumes it, never a libcurl
                    // callback.
                    openedBody?.setWaker(BodyWaker { [loop, self] in loop.unpause(self, .send) })
                }
            }
            apply(easy.set(CURLOPT_POST, true))
            // -1: the size is not known; libcurl sends the body chunked on HTTP/1.1, as DATA frames on HTTP/2.
            let bodyLength = openedBody.map { $0.length ?? -1 } ?? 0
            apply(easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: bodyLength))
            apply(curlew_easy_setopt_read_callback(easy.raw, transferReadCallback))
            apply(easy.set(CURLOPT_READDATA, pointer: userdata))
            apply(curlew_easy_setopt_seek_callback(easy.raw, transferSeekCallback))
            apply(easy.set(CURLOPT_SEEKDATA, pointer: userdata))
            if let rate = request.maxSendBytesPerSecond, rate > 0 {
                apply(easy.set(CURLOPT_MAX_SEND_SPEED_LARGE, offset: rate))
            }
        }
        if method != .get && method != .head && method != .post {
            apply(easy.set(CURLOPT_CUSTOMREQUEST, method.rawValue))
        }

        // Header fields.
        if let conflict = multipartBoundaryConflict() { return .invalidRequest(conflict) }
        let expectContinue = request.expectContinue ?? settings.expectContinue
        if let list = buildHeaderList(hasBody: sendsBody, expectContinue: expectContinue, withholdingCredentials: false)
        {
            headerList = list
            apply(curlew_easy_setopt_slist(easy.raw, CURLOPT_HTTPHEADER, list))
        }
        if stateMachine.setup.hasProxyHeaderLines {
            var list: UnsafeMutablePointer<curl_slist>?
            request.headerFields.forEachProxyHeaderLine { list = Self.appending($0, to: list) }
            if let list {
                proxyHeaderList = list
                apply(curlew_easy_setopt_slist(easy.raw, CURLOPT_PROXYHEADER, list))
            }
        }
        if case .enabled(let timeout) = expectContinue.storage, sendsBody {
            apply(
                easy.set(
                    CURLOPT_EXPECT_100_TIMEOUT_MS, curlMilliseconds(fromNanoseconds: timeout.saturatingNanoseconds)))
        }
        if request.onProgress != nil {
            apply(easy.set(CURLOPT_NOPROGRESS, false))
            apply(curlew_easy_setopt_xferinfo_callback(easy.raw, transferProgressCallback))
            apply(easy.set(CURLOPT_XFERINFODATA, pointer: userdata))
        }
        if !sink.usesCollectingOptions {
            // Streamed and downloaded bodies are usually large: fewer, bigger callbacks. The engine decodes a
            // content-encoded body itself, a bounded buffer at a time, so a paused consumer leaves libcurl holding
            // only the 256 KiB as sent (libcurl's own decoding expanded the rest of its buffer into its pause
            // buffer: tens of MiB for a highly compressed body).
            // Only an optimisation: libcurl 7.88 refuses a new size (CURLE_BAD_FUNCTION_ARGUMENT) on a handle whose
            // last transfer ended on a still-shared HTTP/2 connection, which keeps its receive buffer across
            // curl_easy_reset.
            _ = easy.set(CURLOPT_BUFFERSIZE, 256 * 1024)
        }
        if settings.storesCookies {
            // "": no file to read; turns on libcurl's cookie engine over the client's shared store.
            apply(easy.set(CURLOPT_COOKIEFILE, ""))
        }
        if let userAgent = settings.userAgent, request.headerFields[.userAgent] == nil {
            apply(easy.set(CURLOPT_USERAGENT, userAgent))
        }

        // Protocol version and connection reuse.
        apply(easy.set(CURLOPT_MAXAGE_CONN, settings.maxConnectionIdleAgeSeconds))
        if settings.maxConnectionLifetimeSeconds > 0 {
            apply(easy.set(CURLOPT_MAXLIFETIME_CONN, settings.maxConnectionLifetimeSeconds))
        }
        switch httpVersion.storage {
        case .http1_1:
            apply(easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)))
        case .http2:
            apply(easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
            apply(easy.set(CURLOPT_PIPEWAIT, true))
        case .http2PriorKnowledge:
            apply(easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)))
            if settings.capabilities.libcurl.reusesPriorKnowledgeHTTP2Connections {
                // PIPEWAIT: from 8.13 a new h2c connection is shared only after its first response; without it a burst
                // of requests would open a connection each.
                apply(easy.set(CURLOPT_PIPEWAIT, true))
            } else {
                // See docs/design/0003-h2c.md: a connection of its own, never shared, never reused.
                apply(easy.set(CURLOPT_FRESH_CONNECT, true))
                apply(easy.set(CURLOPT_FORBID_REUSE, true))
            }
        }

        if !settings.reusesConnections {
            apply(easy.set(CURLOPT_FRESH_CONNECT, true))
            apply(easy.set(CURLOPT_FORBID_REUSE, true))
        }
        if let socketPath = request.effectiveUnixSocketPath(clientDefault: settings.unixSocketPath) {
            // libcurl reuses a socket's connection only for the same socket path, and never a TCP one for it.
            apply(easy.set(CURLOPT_UNIX_SOCKET_PATH, socketPath))
            if settings.checksPooledConnectionsBeforeWriting {
                // Where the engine checks a pooled connection for stray bytes itself (libcurl 7.x), it finds the
                // connection's socket by the addresses and ports the pre-request callback names, and every connection
                // to one Unix socket has the same (a path, no ports): such a connection cannot be checked, so it is
                // never reused. A server's stray bytes would otherwise answer the next request, and every later one
                // the request before it. Whatever the scheme and version: an https request that allowed HTTP/2 may
                // have got HTTP/1.1.
                apply(easy.set(CURLOPT_FRESH_CONNECT, true))
                apply(easy.set(CURLOPT_FORBID_REUSE, true))
            }
        }
        if let localAddress = request.localAddress ?? settings.localAddress {
            apply(easy.set(CURLOPT_INTERFACE, localAddress))
            if request.localAddress != nil && request.localAddress != settings.localAddress {
                // libcurl 8.x hands a pooled connection from another local address to a request that names its own
                // (7.88 does not): a request that differs from its client gets a connection of its own.
                apply(easy.set(CURLOPT_FRESH_CONNECT, true))
                apply(easy.set(CURLOPT_FORBID_REUSE, true))
            }
        }
        if let dns = settings.dns {
            if let seconds = dns.cacheTimeoutSeconds { apply(easy.set(CURLOPT_DNS_CACHE_TIMEOUT, seconds)) }
            if dns.shufflesAddresses { apply(easy.set(CURLOPT_DNS_SHUFFLE_ADDRESSES, true)) }
            if let milliseconds = dns.happyEyeballsMilliseconds {
                apply(easy.set(CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, milliseconds))
            }
        }
        if let connectTo = settings.connectToList {
            apply(curlew_easy_setopt_slist(easy.raw, CURLOPT_CONNECT_TO, connectTo))
        }

        // Timeouts. libcurl enforces only the connect timeout: the total and idle deadlines are the engine's own
        // (MultiCore.checkDeadlines), so a libcurl timeout always means getting a connection (connecting, or on
        // libcurl 8 waiting for a free one), and the engine knows which of its deadlines fired.
        if let connect = timeouts.connect {
            apply(easy.set(CURLOPT_CONNECTTIMEOUT_MS, curlMilliseconds(fromNanoseconds: connect.saturatingNanoseconds)))
        }

        // Redirects.
        if redirects.follow {
            apply(easy.set(CURLOPT_FOLLOWLOCATION, true))
            apply(easy.set(CURLOPT_MAXREDIRS, max(redirects.maximum, 0)))
            var postRedirect = 0
            if redirects.keepPost.contains(.after301) { postRedirect |= Int(CURL_REDIR_POST_301) }
            if redirects.keepPost.contains(.after302) { postRedirect |= Int(CURL_REDIR_POST_302) }
            if redirects.keepPost.contains(.after303) { postRedirect |= Int(CURL_REDIR_POST_303) }
            if sendsBody && method != .post {
                // PUT and PATCH travel as libcurl POSTs with a custom method. libcurl would turn them into GETs on
                // 301-303 internally yet still send the custom method, now without its body: keep method and body.
                postRedirect = Int(CURL_REDIR_POST_301 | CURL_REDIR_POST_302 | CURL_REDIR_POST_303)
            }
            if postRedirect != 0 { apply(easy.set(CURLOPT_POSTREDIR, postRedirect)) }
        }

        // Body limits and decompression.
        if method != .head {
            // A HEAD response announces the length of a body it does not send; only real bodies are refused early.
            apply(easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: stateMachine.setup.bodyLimit))
        }
        switch (request.decompression ?? settings.decompression).storage {
        case .disabled:
            break
        case .enabled, .enabledWithLimit:
            // libcurl asks for the codings; the engine decodes them (ContentDecoder), so libcurl passes the body on
            // as sent.
            apply(easy.set(CURLOPT_ACCEPT_ENCODING, settings.acceptEncoding))
            apply(easy.set(CURLOPT_HTTP_CONTENT_DECODING, false))
        }

        // TLS.
        if let tls = settings.tls {
            if let caFile = tls.caFile { apply(easy.set(CURLOPT_CAINFO, caFile)) }
            if let caDirectory = tls.caDirectory { apply(easy.set(CURLOPT_CAPATH, caDirectory)) }
            if let certificate = tls.clientCertificateFile { apply(easy.set(CURLOPT_SSLCERT, certificate)) }
            if let key = tls.clientKeyFile { apply(easy.set(CURLOPT_SSLKEY, key)) }
            if let password = tls.clientKeyPassword { apply(easy.set(CURLOPT_KEYPASSWD, password)) }
            if !tls.verifyPeer { apply(easy.set(CURLOPT_SSL_VERIFYPEER, false)) }
            if !tls.verifyHost { apply(easy.set(CURLOPT_SSL_VERIFYHOST, 0)) }
            if tls.minimumVersion != nil || tls.maximumVersion != nil {
                switch Self.sslVersion(minimum: tls.minimumVersion, maximum: tls.maximumVersion) {
                case .success(let value): apply(easy.set(CURLOPT_SSLVERSION, value))
                case .failure(let error): return .invalidRequest(error)
                }
            }
            if !tls.pinnedPublicKeys.isEmpty {
                switch Self.pinnedPublicKeyOption(tls.pinnedPublicKeys) {
                case .success(let value): apply(easy.set(CURLOPT_PINNEDPUBLICKEY, value))
                case .failure(let error): return .invalidRequest(error)
                }
            }
            if let pem = tls.caCertificatesPEM { apply(easy.set(CURLOPT_CAINFO_BLOB, blob: pem)) }
            if let pem = tls.clientCertificatePEM {
                apply(easy.set(CURLOPT_SSLCERT_BLOB, blob: pem))
                apply(easy.set(CURLOPT_SSLCERTTYPE, "PEM"))
            }
            if let pem = tls.clientKeyPEM {
                apply(easy.set(CURLOPT_SSLKEY_BLOB, blob: pem))
                apply(easy.set(CURLOPT_SSLKEYTYPE, "PEM"))
            }
        }

        // Proxy.
        switch settings.proxy.storage {
        case .environment:
            break
        case .none:
            apply(easy.set(CURLOPT_PROXY, ""))
        case .url(let proxy, let noProxy, let credentials):
            if let error = Self.unsupportedProxyScheme(proxy) { return .invalidRequest(error) }
            apply(easy.set(CURLOPT_PROXY, proxy))
            // Unset, libcurl would read `no_proxy` / `NO_PROXY`: an explicit proxy is not steered by the environment.
            apply(easy.set(CURLOPT_NOPROXY, noProxy ?? ""))
            if let credentials {
                apply(easy.set(CURLOPT_PROXYUSERNAME, credentials.username))
                apply(easy.set(CURLOPT_PROXYPASSWORD, credentials.password))
            }
        }

        guard let failure = Self.optionError(status) else {
            self.easy?.isConfiguredForPlainGET = isPlainGET
            return nil
        }
        return failure
    }

    /// The proxy schemes libcurl takes (`http` when the URL names none).
    static let proxySchemes: Set<String> = ["http", "https", "socks", "socks4", "socks4a", "socks5", "socks5h"]

    /// The error for a proxy URL whose scheme libcurl does not take, before libcurl sees it: libcurl's own message
    /// would quote the whole URL, credentials included, and name a connection failure.
    static func unsupportedProxyScheme(_ proxy: String) -> CurlewError? {
        guard let separator = proxy.range(of: "://") else { return nil }
        let scheme = proxy[..<separator.lowerBound].lowercased()
        guard !proxySchemes.contains(scheme) else { return nil }
        let shown = scheme.utf8.count <= 16 && URLParts.isSchemeName(scheme) ? "\"\(scheme)\"" : "that is not a scheme"
        return .invalidRequest(
            "the proxy URL's scheme \(shown) is not one of \(proxySchemes.sorted().joined(separator: ", "))")
    }

    /// `CURLOPT_SSLVERSION` for a version range: the minimum, or'd with the maximum shifted left by 16.
    static func sslVersion(
        minimum: CurlewClient.TLSVersion?, maximum: CurlewClient.TLSVersion?
    ) -> Result<Int, CurlewError> {
        if let minimum, let maximum, maximum < minimum {
            return .failure(
                .invalidRequest("the maximum TLS version \(maximum) is below the minimum \(minimum)"))
        }
        let floor = minimum?.curlValue ?? Int(CURL_SSLVERSION_DEFAULT)
        return .success(floor | ((maximum?.curlValue ?? 0) << 16))
    }

    /// `CURLOPT_PINNEDPUBLICKEY` for a list of `sha256//BASE64` pins: joined with `;`, after checking each, so a
    /// typo fails as a bad request rather than as a key mismatch (or as a file libcurl tries to open).
    static func pinnedPublicKeyOption(_ pins: [String]) -> Result<String, CurlewError> {
        for pin in pins {
            let hash = pin.dropFirst("sha256//".count)
            guard pin.hasPrefix("sha256//"), hash.count == 44, Data(base64Encoded: String(hash)) != nil else {
                return .failure(
                    .invalidRequest(
                        "pinned public key \(pin.debugDescription) is not sha256// followed by a base64 SHA-256 hash"))
            }
        }
        return .success(pins.joined(separator: ";"))
    }

    /// libcurl's connect timeout when none is set (`DEFAULT_CONNECT_TIMEOUT`).
    static let libcurlDefaultConnectTimeout = Duration.seconds(300)

    /// The request's timeouts: its own fields over the client's.
    static func timeouts(of request: CurlewRequest, settings: ClientSettings) -> CurlewClient.Timeouts {
        request.timeouts.isEmpty ? settings.timeouts : request.timeouts.applied(to: settings.timeouts)
    }

    /// What the state machine decides with: the transfer's deadlines and limits, the same whichever way libcurl is
    /// configured, and the facts of the request its decisions depend on. Computed by the caller's thread.
    static func setup(
        for request: CurlewRequest, settings: ClientSettings, sink: ResponseSink, submittedAt: UInt64
    ) -> TransferStateMachine.Setup {
        var setup = TransferStateMachine.Setup()
        let timeouts = timeouts(of: request, settings: settings)
        // A deadline too far to represent (`.seconds(.max)` meaning "no limit") is no deadline.
        if let total = timeouts.total,
            case (let deadline, false) = submittedAt.addingReportingOverflow(total.saturatingNanoseconds)
        {
            setup.totalDeadline = deadline
        }
        // No connect timeout is libcurl's default, which libcurl 8 counts from submission too.
        let connect = timeouts.connect ?? Self.libcurlDefaultConnectTimeout
        setup.connectTimeout = connect.saturatingNanoseconds
        setup.connectionDeadline = setup.connectionDeadline(forWaitFrom: submittedAt)
        // Idle timeouts beyond a century are no idle timeout, so deadline arithmetic cannot overflow.
        setup.idleTimeout =
            timeouts.idle.map { $0.saturatingNanoseconds }.flatMap { $0 > 3_155_760_000_000_000_000 ? nil : max($0, 1) }
            ?? 0
        // The client's limit bounds memory, so it applies to collected bodies only; a streamed or downloaded body
        // is bounded only by the request's own limit, and a failed download's explanation by the client's.
        switch sink {
        case .collect:
            setup.bodyLimit = Int64(request.maxResponseBodySize ?? settings.maxResponseBodySize)
            setup.inMemoryBodyLimit = setup.bodyLimit
        case .file:
            setup.bodyLimit = Int64(request.maxResponseBodySize ?? Int.max)
            setup.inMemoryBodyLimit = Int64(settings.maxResponseBodySize)
        case .stream, .discard:
            setup.bodyLimit = Int64(request.maxResponseBodySize ?? Int.max)
        }
        let decompression = request.decompression ?? settings.decompression
        setup.decodesContent = decompression.isEnabled
        if case .enabledWithLimit(let limit) = decompression.storage, Int64(limit) < setup.bodyLimit {
            setup.decodedBodyLimit = Int64(limit)
        }
        let method = request.method
        let sendsBody = Self.sendsBody(request)
        if case .enabled = (request.expectContinue ?? settings.expectContinue).storage, sendsBody {
            setup.sentExpectContinue = true
        }
        setup.hasRequestBody = request.body != nil && method != .head
        setup.followsRedirects = (request.redirects ?? settings.redirects).follow
        setup.carriesCredentials = request.headerFields.contains(where: CredentialPolicy.isCredential)
        setup.hasProxyHeaderLines = request.headerFields.hasProxyHeaderLines
        if case .stream = sink { setup.streamsResponse = true }
        return setup
    }
}

extension TransferStateMachine.Setup {
    /// The same setup for the same request submitted again at `now` instead of at `earlier`: each deadline counts
    /// the same time from the new submission, as ``Transfer/setup(for:settings:sink:submittedAt:)`` would make it,
    /// without reading the request's timeouts again (a repeated transfer does this once per request).
    func resubmitted(from earlier: UInt64, at now: UInt64) -> Self {
        var setup = self
        setup.totalDeadline = Self.deadline(totalDeadline, resubmittedFrom: earlier, at: now)
        setup.connectionDeadline = Self.deadline(connectionDeadline, resubmittedFrom: earlier, at: now)
        return setup
    }

    /// `.max` (none) stays none; one past the clock's range becomes none, as it does when first computed.
    private static func deadline(_ deadline: UInt64, resubmittedFrom earlier: UInt64, at now: UInt64) -> UInt64 {
        guard deadline != .max, deadline >= earlier else { return deadline }
        let (moved, overflow) = now.addingReportingOverflow(deadline - earlier)
        return overflow ? .max : moved
    }
}

extension Transfer {
    /// A plain GET on a handle whose previous transfer was one too: every option but the per-transfer ones is
    /// already what it must be (the pool belongs to one client, so the defaults are the same), so the handle is
    /// neither reset nor configured again. That is libcurl's own reuse pattern, and it saves about half a
    /// microsecond per request.
    private func configureRepeatedPlainGET(
        _ easy: EasyHandle, userdata: UnsafeMutableRawPointer
    ) -> TransferStateMachine.Failure? {
        easy.errorBuffer[0] = 0
        var status = CURLE_OK
        @inline(__always) func apply(_ code: CURLcode) {
            if code != CURLE_OK, status == CURLE_OK { status = code }
        }
        apply(easy.set(CURLOPT_PRIVATE, pointer: userdata))
        apply(easy.set(CURLOPT_WRITEDATA, pointer: userdata))
        apply(easy.set(CURLOPT_HEADERDATA, pointer: userdata))
        apply(easy.set(CURLOPT_PREREQDATA, pointer: userdata))
        apply(easy.set(CURLOPT_SOCKOPTDATA, pointer: userdata))
        apply(easy.set(CURLOPT_RESOLVER_START_DATA, pointer: userdata))
        apply(easy.set(CURLOPT_URL, request.transferURL))
        // The one plain-GET option that depends on the sink: a collected body is bounded by the client's limit, a
        // discarded one is not (`Transfer.setup`), and both take this path on the same pooled handle.
        apply(easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: stateMachine.setup.bodyLimit))
        return Self.optionError(status)
    }

    /// The failure for a libcurl option that did not take, or nil if all did.
    private static func optionError(_ status: CURLcode) -> TransferStateMachine.Failure? {
        status == CURLE_OK ? nil : .optionRejected(Int(status.rawValue))
    }

    /// A caller's own multipart `Content-Type` must name the boundary the form goes out with (one copied from
    /// `form.contentType` before a part replaced the generated boundary would not): a server could not read the form.
    private func multipartBoundaryConflict() -> CurlewError? {
        guard let implied = openedBody?.impliedContentType, implied.hasPrefix("multipart/"),
            let given = request.headerFields[.contentType], given.lowercased().hasPrefix("multipart/")
        else { return nil }
        let sent = Self.boundaryParameter(of: implied)
        guard Self.boundaryParameter(of: given) != sent else { return nil }
        return CurlewError.invalidRequest(
            "the Content-Type header \(given.debugDescription) does not name the boundary the form is sent with "
                + "(\(sent ?? "")); read form.contentType after adding the last part, or leave Content-Type to Curlew")
    }

    static func boundaryParameter(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let trimmed = parameter.trimmingCharacters(in: .whitespaces)
            guard trimmed.lowercased().hasPrefix("boundary=") else { continue }
            var value = trimmed.dropFirst("boundary=".count)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = value.dropFirst().dropLast() }
            return String(value)
        }
        return nil
    }

    /// Whether the request goes out with a body: POST, PUT and PATCH always (empty if none was given), other methods
    /// when given one. The one rule for the body's options and header lines, with or without credentials.
    static func sendsBody(_ request: CurlewRequest) -> Bool {
        let method = request.method
        return request.body != nil || method == .post || method == .put || method == .patch
    }

    /// Builds the header list libcurl sends; libcurl keeps the pointer, so it lives until the transfer ends.
    ///
    /// - Parameter withholdingCredentials: leave out the fields `CredentialPolicy` withholds from other origins.
    func buildHeaderList(
        hasBody: Bool, expectContinue: CurlewClient.ExpectContinue, withholdingCredentials: Bool
    ) -> UnsafeMutablePointer<curl_slist>? {
        var list: UnsafeMutablePointer<curl_slist>?
        func append(_ line: String) { list = Self.appending(line, to: list) }
        request.headerFields.forEachRequestHeaderLine(withholdingCredentials: withholdingCredentials, append)
        if hasBody {
            switch expectContinue.storage {
            case .disabled: append("Expect:")
            case .enabled: append("Expect: 100-continue")
            }
            // libcurl labels POST bodies as forms; a body without a declared type goes out without one.
            if request.headerFields[.contentType] == nil {
                append(openedBody?.impliedContentType.map { "Content-Type: \($0)" } ?? "Content-Type:")
            }
            if let encoding = openedBody?.contentEncoding, request.headerFields[.contentEncoding] == nil {
                append("Content-Encoding: \(encoding)")
            }
        }
        return list
    }

    /// `list` with `line` appended (libcurl copies it); as it was when libcurl cannot allocate.
    static func appending(
        _ line: String, to list: UnsafeMutablePointer<curl_slist>?
    ) -> UnsafeMutablePointer<curl_slist>? {
        line.withCString { curl_slist_append(list, $0) } ?? list
    }

    /// Frees what only the transfer's time in libcurl needed: the header list and the body's descriptor.
    func releaseTransferResources() {
        releaseRequestResources()
        loop = nil
    }

    /// Frees what only the current request needed: the header lists and the body's descriptor.
    func releaseRequestResources() {
        if let headerList {
            curl_slist_free_all(headerList)
            self.headerList = nil
        }
        if let headerListWithoutCredentials {
            curl_slist_free_all(headerListWithoutCredentials)
            self.headerListWithoutCredentials = nil
        }
        if let proxyHeaderList {
            curl_slist_free_all(proxyHeaderList)
            self.proxyHeaderList = nil
        }
        openedBody?.close()
    }
}
