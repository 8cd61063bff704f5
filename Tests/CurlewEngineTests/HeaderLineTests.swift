import Testing

@testable import CurlewEngine

@Suite("Header line classification")
struct HeaderLineTests {
    static func classify(_ text: String) -> HeaderLine {
        Array(text.utf8).withUnsafeBytes { HeaderLine.classify($0) }
    }

    @Test func statusLinesAndBlockEnds() {
        #expect(Self.classify("HTTP/1.1 200 OK\r\n") == .statusLine)
        #expect(Self.classify("HTTP/2 200 \r\n") == .statusLine)
        #expect(Self.classify("\r\n") == .endOfBlock)
        #expect(Self.classify("\n") == .endOfBlock)
        #expect(Self.classify("X\n") == .otherField, "a short field ends no block")
        #expect(Self.classify("\rX\n") == .endOfBlock, "libcurl ends a head at any line led by CR or LF")
        #expect(Self.classify("\r\r\n") == .endOfBlock)
        #expect(Self.classify("Host: x\r\n") == .otherField)
    }

    @Test func contentLengthInAnyCaseWithItsValue() {
        #expect(Self.classify("Content-Length: 42\r\n") == .contentLength(42))
        #expect(Self.classify("content-length:7\r\n") == .contentLength(7))
        #expect(Self.classify("CONTENT-LENGTH: \t 0 \r\n") == .contentLength(0))
        #expect(Self.classify("Content-Length: 5, 5\r\n") == .contentLength(5))
    }

    /// Found by `make fuzz` (the header-line target): the case fold also matched control bytes to `:` and `-`.
    @Test func onlyLettersFoldInFieldNames() {
        #expect(Self.classify("Content-Length\u{1A} 5\r\n") == .otherField)
        #expect(Self.classify("Content\rLength: 5\r\n") == .otherField)
        #expect(Self.classify("Transfer\rEncoding: chunked\r\n") == .otherField)
        #expect(Self.classify("cOnTeNt-LeNgTh: 5\r\n") == .contentLength(5))
    }

    @Test func contentLengthThatIsNotOneNumberHasNoValue() {
        #expect(Self.classify("Content-Length: 5, 7\r\n") == .contentLength(nil))
        #expect(Self.classify("Content-Length: -1\r\n") == .contentLength(nil))
        #expect(Self.classify("Content-Length: 1 2\r\n") == .contentLength(nil))
        #expect(Self.classify("Content-Length: \r\n") == .contentLength(nil))
        #expect(Self.classify("Content-Length: 99999999999999999999999\r\n") == .contentLength(nil))
        #expect(Self.classify("Content-Length: 0x10\r\n") == .contentLength(nil))
    }

    @Test func contentEncodingAndLookalikes() {
        #expect(Self.classify("Content-Encoding: gzip\r\n") == .contentEncoding)
        #expect(Self.classify("content-encoding:br\r\n") == .contentEncoding)
        #expect(Self.classify("Content-Encodings: gzip\r\n") == .otherField)
        #expect(Self.classify("Content-Encoding\u{1A} gzip\r\n") == .otherField)
        #expect(Self.classify("Content-Language: en\r\n") == .otherField)
    }

    @Test func transferEncodingAndLookalikes() {
        #expect(Self.classify("Transfer-Encoding: chunked\r\n") == .transferEncoding)
        #expect(Self.classify("transfer-encoding: gzip, chunked\r\n") == .transferEncoding)
        #expect(Self.classify("Content-Type: text/plain\r\n") == .otherField)
        #expect(Self.classify("Content-Length-Extra: 5\r\n") == .otherField)
        #expect(Self.classify("Trailer: x\r\n") == .otherField)
    }

    /// libcurl follows a 3xx head's `Location` only when it has a value; one either libcurl could read as empty
    /// does not count.
    @Test func aLocationCountsOnlyWithAValue() {
        #expect(Self.classify("Location: http://127.0.0.1:8080/next\r\n") == .location)
        #expect(Self.classify("location:/next\r\n") == .location)
        #expect(Self.classify("Location: \t \r\n") == .otherField)
        #expect(Self.classify("Location:\r\n") == .otherField)
        // libcurl 8 cuts the value at a stray CR; 7.88 skips vertical tabs and form feeds.
        #expect(Self.classify("Location: \rhttp://elsewhere/\r\n") == .otherField)
        #expect(Self.classify("Location: \u{0B}\u{0C}\r\n") == .otherField)
        #expect(Self.classify("Locations: /next\r\n") == .otherField)
        #expect(Self.classify("Last-Modified: Sat, 28 Nov 2026 08:00:00 GMT\r\n") == .otherField)
        #expect(Self.classify("Content-Location: /next\r\n") == .otherField)
    }
}
