import CLibCurl
import Glibc
import Testing

@testable import CurlewEngine

/// The mapping from libcurl's codes to the cases callers act on. Live tests cover the cases loopback can
/// produce; this covers the rest (a DNS failure would need a resolver off this machine).
@Suite("Error mapping")
struct CurlewErrorTests {
    @Test(arguments: [
        (CURLE_COULDNT_RESOLVE_HOST, CurlewError.Code.dnsFailure),
        (CURLE_COULDNT_RESOLVE_PROXY, .dnsFailure),
        (CURLE_PEER_FAILED_VERIFICATION, .tls),
        (CURLE_SSL_CONNECT_ERROR, .tls),
        (CURLE_TOO_MANY_REDIRECTS, .tooManyRedirects),
        (CURLE_FILESIZE_EXCEEDED, .bodyTooLarge),
        (CURLE_PARTIAL_FILE, .connectionClosed),
        (CURLE_RECV_ERROR, .connectionClosed),
        (CURLE_GOT_NOTHING, .connectionClosed),
        (CURLE_WEIRD_SERVER_REPLY, .invalidResponse),
        (CURLE_HTTP2_STREAM, .http2),
        (CURLE_OUT_OF_MEMORY, .transport),
    ])
    func curlCodesMapToTheCaseACallerActsOn(result: CURLcode, expected: CurlewError.Code) {
        let error = CurlewError.fromCurl(result, message: "detail from curl", osErrno: 0, timeoutKind: .total)
        #expect(error.code == expected)
        #expect(error.curlCode == Int(result.rawValue))
        #expect(error.curlMessage == "detail from curl")
        #expect(error.osErrno == nil)
    }

    @Test func connectFailuresTellRefusalFromOtherCauses() {
        let refused = CurlewError.fromCurl(
            CURLE_COULDNT_CONNECT, message: nil, osErrno: ECONNREFUSED, timeoutKind: .total)
        #expect(refused.code == .connectionRefused)
        #expect(refused.osErrno == ECONNREFUSED)
        #expect(refused.curlMessage?.isEmpty == false)
        let unreachable = CurlewError.fromCurl(
            CURLE_COULDNT_CONNECT, message: nil, osErrno: EHOSTUNREACH, timeoutKind: .total)
        #expect(unreachable.code == .connectFailed)
    }

    @Test func unsupportedProtocolAfterARedirectIsARefusedProtocolAndWithoutOneAnUnreadableReply() {
        let redirect = CurlewError.fromCurl(
            CURLE_UNSUPPORTED_PROTOCOL, message: nil, osErrno: 0, timeoutKind: .total, lastStatus: 302)
        #expect(redirect.code == .protocolNotAllowed)
        let garbage = CurlewError.fromCurl(
            CURLE_UNSUPPORTED_PROTOCOL, message: nil, osErrno: 0, timeoutKind: .total, lastStatus: 0)
        #expect(garbage.code == .invalidResponse)
    }

    @Test func timeoutsCarryWhichTimeoutFired() {
        for kind in [CurlewError.TimeoutKind.connect, .total, .idle] {
            let error = CurlewError.fromCurl(CURLE_OPERATION_TIMEDOUT, message: nil, osErrno: 0, timeoutKind: kind)
            #expect(error.code == .timeout(kind))
            #expect(error.description.contains(kind.name))
        }
    }
}

/// `CurlewError.Code` is a struct so that kinds can be added without breaking callers; its names are the stable
/// words logs, spans and `curlew bench`'s JSON print.
@Suite("Error codes")
struct CurlewErrorCodeTests {
    @Test func everyCodeHasAStableNameAndTimeoutsNameTheirKind() {
        let expected: [(CurlewError.Code, String)] = [
            (.invalidRequest, "invalidRequest"), (.protocolNotAllowed, "protocolNotAllowed"),
            (.dnsFailure, "dnsFailure"), (.connectionRefused, "connectionRefused"), (.connectFailed, "connectFailed"),
            (.timeout(.connect), "timeout.connect"), (.timeout(.total), "timeout.total"),
            (.timeout(.idle), "timeout.idle"), (.tls, "tls"), (.tooManyRedirects, "tooManyRedirects"),
            (.bodyTooLarge, "bodyTooLarge"), (.requestBodyFailed, "requestBodyFailed"),
            (.requestBodyNotReplayable, "requestBodyNotReplayable"), (.downloadFailed, "downloadFailed"),
            (.connectionClosed, "connectionClosed"), (.invalidResponse, "invalidResponse"), (.http2, "http2"),
            (.cancelled, "cancelled"), (.clientShutdown, "clientShutdown"),
            (.unsupportedLibcurl, "unsupportedLibcurl"), (.transport, "transport"),
        ]
        for (code, name) in expected {
            #expect(code.name == name)
            #expect("\(code)" == name)
        }
        #expect(Set(expected.map(\.0)).count == expected.count, "every code is distinct")
        let error = CurlewError(code: .timeout(.idle), detail: "idle timeout: no data moved")
        #expect(error.description == "CurlewError.timeout.idle: idle timeout: no data moved")
    }

    @Test func aTimeoutCodeSaysWhichTimeoutAndMatchesInASwitch() {
        #expect(CurlewError.Code.timeout(.connect).timeoutKind == .connect)
        #expect(CurlewError.Code.tls.timeoutKind == nil)
        #expect(CurlewError.Code.timeout(.idle) != .timeout(.total))
        let code = CurlewError.Code.timeout(.connect)
        let matched =
            switch code {
            case .connectionRefused, .timeout(.connect): true
            default: false
            }
        #expect(matched)
    }

    @Test func timeoutKindsHaveStableNamesThatEndTheirCodesName() {
        let kinds: [CurlewError.TimeoutKind] = [.connect, .waitingForConnection, .total, .idle]
        let names = ["connect", "waitingForConnection", "total", "idle"]
        #expect(kinds.map(\.name) == names)
        #expect(kinds.map(\.description) == names)
        #expect(Set(kinds).count == 4)
        #expect(kinds.map { CurlewError.Code.timeout($0).name } == names.map { "timeout.\($0)" })
    }
}
