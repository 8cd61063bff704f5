@testable import CurlewEngine

/// The transfer state machine (`TransferStateMachine`, no I/O: events in, actions out) under any sequence of the
/// events libcurl's callbacks and the loop feed it: header lines (classified by `HeaderLine.classify`, as the header
/// callback does), ends of header blocks with any status, body chunks (to memory or a consumer, taken or not),
/// pauses and resumes, connection checks, deadline checks, cancellation, and completions with any facts.
///
/// - Every event gets a defined action and nothing traps; the transfer ends once, on its completion (after at most
///   one retry on a fresh connection), and absorbs every later event.
/// - Framing: within a header block, a `Content-Length` that is not a number, one that differs from an earlier one,
///   or `Content-Length` together with `Transfer-Encoding` is refused (the header callback aborts) whenever it
///   arrives, and the transfer ends with the first cause the machine recorded.
/// - The body bytes accepted never exceed the limit in force (the body limit, the in-memory limit for bytes kept in
///   memory, the decoded-size limit once a head says the body is content-encoded); past it the chunk is refused.
///   Whether the bytes match the `Content-Length` is libcurl's to check: it reads the body by that framing.
/// - A transfer whose framing was refused, whose body passed its limit, or that handed over any body byte is never
///   sent again.
enum TransferFramingProperty {
    private struct Model {
        var contentLength: Int64?
        var isChunked = false
        var limit: Int64
        var bodyBytes: Int64 = 0
        var bodySeen = false
        var refusedResponse = false
        var lastAccepted: Int?
    }

    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        let limits: [Int64] = [.max, 0, 1, 100, 1 << 20]
        let setupFlags = input.byte()
        let setup = TransferStateMachine.Setup(
            bodyLimit: limits[input.number(below: limits.count)],
            inMemoryBodyLimit: limits[input.number(below: limits.count)],
            decodedBodyLimit: setupFlags & 1 == 0 ? nil : limits[input.number(below: limits.count)],
            connectTimeout: setupFlags & 32 == 0 ? .max : UInt64(input.number(below: 1 << 16)),
            sentExpectContinue: setupFlags & 2 != 0, followsRedirects: setupFlags & 4 != 0,
            hasRequestBody: setupFlags & 8 != 0, streamsResponse: setupFlags & 16 != 0)
        var machine = TransferStateMachine(setup: setup)
        guard machine.submitted(now: 1, loopIsShuttingDown: false) == .start else { return "submission refused" }
        var model = Model(limit: setup.bodyLimit)
        var now: UInt64 = 1
        var retries = 0

        for step in 0..<input.number(below: 64) {
            let running = machine.attempt != nil
            switch input.byte() % 12 {
            case 0, 1, 2:
                let line = headerLine(&input)
                let kind = line.withUnsafeBytes { HeaderLine.classify($0) }
                let action = machine.headerLineReceived(kind)
                var refused = false
                switch kind {
                case .statusLine:
                    model.contentLength = nil
                    model.isChunked = false
                case .contentLength(let value):
                    refused = value == nil || (model.contentLength.map { $0 != value } ?? false) || model.isChunked
                    if model.contentLength == nil { model.contentLength = value }
                case .transferEncoding:
                    model.isChunked = true
                    refused = model.contentLength != nil
                default: break
                }
                if running && refused {
                    model.refusedResponse = true
                    if action != .abort {
                        return "step \(step): \(String(decoding: line, as: UTF8.self).debugDescription) is \(action)"
                    }
                    if machine.stopCause == nil { return "step \(step): refused framing leaves no cause" }
                } else if action == .abort {
                    return "step \(step): \(String(decoding: line, as: UTF8.self).debugDescription) aborts the transfer"
                }
                if case .readHead(let asksEncoding) = action {
                    let statuses = [100, 200, 204, 301, 302, 307, 404, 417, 500]
                    let encoded = asksEncoding && input.byte() & 1 == 1
                    let headAction = machine.headEnded(
                        status: statuses[input.number(below: statuses.count)], isContentEncoded: encoded, now: now)
                    // The redirect's request must have a connection within the connect timeout from its head.
                    if case .redirectFollowed = headAction, now <= .max - setup.connectTimeout,
                        machine.nextDeadline > now + setup.connectTimeout
                    {
                        return "step \(step): a redirect followed at \(now) waits past its connect timeout"
                    }
                    if encoded, let decoded = setup.decodedBodyLimit { model.limit = min(model.limit, decoded) }
                }
            case 3, 4:
                let count = input.number(below: 1 << 15)
                let keptInMemory = input.byte() & 1 == 1
                let action = machine.bodyReceived(count: count, keptInMemory: keptInMemory)
                guard running else {
                    if action != .abort { return "step \(step): bytes after the end are \(action)" }
                    break
                }
                model.bodySeen = true
                let limit = keptInMemory ? min(model.limit, setup.inMemoryBodyLimit) : model.limit
                let fits = model.bodyBytes + Int64(count) <= limit
                switch action {
                case .accept:
                    if !fits { return "step \(step): \(count) bytes accepted past the limit \(limit)" }
                    model.bodyBytes += Int64(count)
                    model.lastAccepted = count
                case .abort:
                    if fits { return "step \(step): \(count) bytes refused within the limit \(limit)" }
                    model.bodyBytes += Int64(count)
                    model.refusedResponse = true
                    model.lastAccepted = nil
                case .pause: return "step \(step): bytes received are paused"
                }
            case 5:
                // The consumer had no room for the last chunk accepted: libcurl offers it again later.
                guard let count = model.lastAccepted, running else { break }
                if machine.bodyNotTaken(count: count) != .pause { return "step \(step): a chunk not taken is lost" }
                model.bodyBytes -= Int64(count)
                model.lastAccepted = nil
            case 6: _ = machine.resume(input.byte() & 1 == 0 ? .send : .receive)
            case 7: _ = machine.requestBodyRead(input.byte() & 1 == 0 ? .pause : .bytes(1))
            case 8:
                let checks: [TransferStateMachine.ConnectionCheck] = [.notChecked, .clean, .unreadBytesOrClosed]
                // A refused connection is the attempt's end: libcurl reports the transfer done next.
                guard
                    machine.requestStarting(connection: checks[input.number(below: checks.count)])
                        == .abandonConnection, running
                else { break }
                let action = machine.curlCompleted(failure: facts(&input), now: now)
                if let failure = completionFailure(action, running: running, model: model, retries: retries) {
                    return "step \(step), a refused connection: \(failure)"
                }
                if action == .retryOnFreshConnection {
                    retries += 1
                    model = Model(limit: setup.bodyLimit)
                }
            case 9:
                now += UInt64(input.number(below: 1 << 16))
                _ = machine.deadlineCheck(now: now, requestSent: input.byte() & 1 == 1)
            case 10:
                let action = machine.curlCompleted(failure: facts(&input), now: now)
                if let failure = completionFailure(action, running: running, model: model, retries: retries) {
                    return "step \(step): \(failure)"
                }
                if action == .retryOnFreshConnection {
                    retries += 1
                    model = Model(limit: setup.bodyLimit)
                }
            default:
                if input.byte() & 1 == 0 { _ = machine.cancelRequested() } else { _ = machine.shutdown() }
            }
        }
        // libcurl always reports the transfer done in the end.
        for _ in 0..<2 where !machine.isFinished {
            let running = machine.attempt != nil
            let action = machine.curlCompleted(failure: facts(&input), now: now)
            if let failure = completionFailure(action, running: running, model: model, retries: retries) {
                return "at the end: \(failure)"
            }
            if action == .retryOnFreshConnection {
                retries += 1
                model = Model(limit: setup.bodyLimit)
            }
        }
        guard machine.isFinished else { return "the transfer never ends" }
        guard machine.curlCompleted(now: 0) == .ignore, machine.cancelRequested() == .none,
            machine.bodyReceived(count: 1, keptInMemory: true) == .abort,
            machine.submitted(now: now, loopIsShuttingDown: false) == .ignore
        else { return "a finished transfer acts on a later event" }
        return nil
    }

    private static func completionFailure(
        _ action: TransferStateMachine.CompletionAction, running: Bool, model: Model, retries: Int
    ) -> String? {
        switch action {
        case .ignore: return running ? "the completion of a running transfer is ignored" : nil
        case .finish: return running ? nil : "a finished transfer finishes again"
        case .retryOnFreshConnection:
            if !running { return "a finished transfer is retried" }
            if retries > 0 { return "a transfer is retried twice" }
            if model.refusedResponse { return "a transfer whose response was refused is retried" }
            if model.bodySeen { return "a transfer that received body bytes is retried" }
            return nil
        }
    }

    /// nil (success) or a failure's facts.
    private static func facts(_ input: inout FuzzInput) -> TransferStateMachine.CompletionFacts? {
        let flags = input.byte()
        guard flags & 1 == 1 else { return nil }
        return TransferStateMachine.CompletionFacts(
            connectionFailed: flags & 2 != 0, usedPooledConnection: flags & 4 != 0,
            requestBytesWritten: flags & 8 != 0 ? 0 : 100, isIdempotent: flags & 16 != 0,
            bodyIsReplayable: flags & 32 != 0)
    }

    /// A header line as libcurl hands it over (CRLF included, no LF before its end).
    private static func headerLine(_ input: inout FuzzInput) -> [UInt8] {
        let lengths = ["0", "5", "7", "5, 5", "5,7", " 5 ", "", "x", "99999999999999999999", "-1"]
        let text: String
        switch input.byte() % 8 {
        case 0: text = "HTTP/1.1 200 OK"
        case 1: text = "Content-Length: " + lengths[input.number(below: lengths.count)]
        case 2: text = "content-length:" + input.text()
        case 3: text = "Transfer-Encoding: chunked"
        case 4: text = ""
        case 5: text = input.byte() & 1 == 0 ? "X-Field: value" : "Location: /next"
        default: return input.field().filter { $0 != 0x0A } + [0x0D, 0x0A]
        }
        return Array(text.utf8).filter { $0 != 0x0A } + [0x0D, 0x0A]
    }
}
