import Testing

@testable import CurlewEngine

@Suite struct HeaderFieldLineTests {
    private static func parse(_ line: String) -> [String]? {
        HeaderFieldLine.parse(line).map { [$0.name, $0.value] }
    }

    @Test func aLineIsSplitAtItsFirstColonAndTrimmed() {
        #expect(Self.parse("X-Trace: abc") == ["X-Trace", "abc"])
        #expect(Self.parse("X-Trace:abc") == ["X-Trace", "abc"])
        #expect(Self.parse("  X-Trace \t:  two words \t") == ["X-Trace", "two words"])
    }

    @Test func aColonInTheValueStaysInTheValue() {
        #expect(Self.parse("Host: example.com:8080") == ["Host", "example.com:8080"])
        #expect(Self.parse("X-Time: 12:30:00") == ["X-Time", "12:30:00"])
        #expect(Self.parse("X-Empty-Name::") == ["X-Empty-Name", ":"])
    }

    @Test func anEmptyValueIsEmpty() {
        #expect(Self.parse("X-Empty:") == ["X-Empty", ""])
        #expect(Self.parse("X-Empty:   ") == ["X-Empty", ""])
    }

    @Test func aLineWithoutAColonOrWithOneFirstIsNoField() {
        #expect(Self.parse("X-Trace abc") == nil)
        #expect(Self.parse("") == nil)
        #expect(Self.parse(": abc") == nil)
        #expect(Self.parse(":") == nil)
    }

    @Test func aNameOfSpacesIsLeftForTheRequestToRefuse() {
        // As the command always read it: the colon is not first, so the line splits; the request then refuses "".
        #expect(Self.parse(" : abc") == ["", "abc"])
    }

    @Test func aSubstringParsesAsAString() {
        let line = "GET http://x/\nAccept: text/plain"
        let second = line.split(separator: "\n")[1]
        #expect(HeaderFieldLine.parse(second).map { [$0.name, $0.value] } == ["Accept", "text/plain"])
    }
}
