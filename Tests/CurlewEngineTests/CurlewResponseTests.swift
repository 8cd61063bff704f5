import HTTPTypes
import Testing

@testable import CurlewEngine

@Suite("Response header parsing")
struct CurlewResponseTests {
    @Test func headerBlockIsParsedCaseInsensitivelyWithoutTheStatusLine() {
        let raw = Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Multi: a\r\nx-multi:  b \r\n\r\n".utf8)
        let fields = ResponseHeaderParser.fields(from: raw)
        #expect(fields[.contentType] == "text/plain")
        #expect(fields[values: HTTPField.Name("X-MULTI")!] == ["a", "b"])
        #expect(fields.count == 3)
    }

    @Test func malformedLinesAreSkippedNotFatal() {
        let raw = Array("HTTP/2 204\r\nno-colon-here\r\n: empty-name\r\nok: yes\r\n\r\n".utf8)
        let fields = ResponseHeaderParser.fields(from: raw)
        #expect(fields.count == 1)
        #expect(fields[HTTPField.Name("ok")!] == "yes")
    }

    @Test func durationsRoundUpToCurlMillisecondsAndNeverToZero() {
        #expect(curlMilliseconds(fromNanoseconds: 1) == 1)
        #expect(curlMilliseconds(fromNanoseconds: 1_000_000) == 1)
        #expect(curlMilliseconds(fromNanoseconds: 1_000_001) == 2)
        #expect(curlMilliseconds(fromNanoseconds: 1_500_000_000) == 1500)
        #expect(Duration.milliseconds(500).saturatingNanoseconds == 500_000_000)
        #expect(Duration.nanoseconds(1).saturatingNanoseconds == 1)
        #expect(Duration.seconds(-1).saturatingNanoseconds == 0)
    }
}
