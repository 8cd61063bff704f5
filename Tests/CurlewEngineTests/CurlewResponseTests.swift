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

@Suite("Responses made by hand")
struct HandMadeResponseTests {
    @Test
    func aHandMadeResponseCarriesItsFieldsForMockTransports() throws {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "1"))
        fields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "2"))
        let response = CurlewResponse(
            status: .created, headerFields: fields, body: Array("{}".utf8),
            metrics: TransferMetrics(bytesReceived: 2), url: "http://127.0.0.1/x")
        #expect(response.status == .created)
        #expect(response.headerFields == fields)
        #expect(response.body == Array("{}".utf8))
        #expect(response.metrics.bytesReceived == 2)
        #expect(TransferMetrics().total == .zero)
    }

    @Test
    func streamsAreTheOnlyBodiesThatCannotBeReplayed() {
        var form = MultipartForm()
        form.append(value: "v", forKey: "k")
        #expect(CurlewRequest.Body.bytes([]).isReplayable)
        #expect(CurlewRequest.Body.file(.path("/x")).isReplayable)
        #expect(CurlewRequest.Body.multipart(form).isReplayable)
        form.append(stream: RequestBodyStream(AsyncStream<[UInt8]> { $0.finish() }), forKey: "s")
        #expect(!CurlewRequest.Body.multipart(form).isReplayable)
        #expect(FileBody.path("/x").path == "/x")
        #expect(FileBody.descriptor(3).descriptor == 3)
    }
}
