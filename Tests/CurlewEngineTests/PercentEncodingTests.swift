import Foundation
import Testing

@testable import CurlewEngine

@Suite struct PercentEncodingTests {
    @Test func aComponentKeepsOnlyTheUnreservedCharacters() {
        #expect(PercentEncoding.encodeComponent("x-y_z.~AZaz09") == "x-y_z.~AZaz09")
        #expect(PercentEncoding.encodeComponent("c=d+e/f?g#h i&j") == "c%3Dd%2Be%2Ff%3Fg%23h%20i%26j")
        #expect(PercentEncoding.encodeComponent("100%") == "100%25")
        #expect(PercentEncoding.encodeComponent("%20") == "%2520", "an escape in a value is a value")
        #expect(PercentEncoding.encodeComponent("Zoë 🐦") == "Zo%C3%AB%20%F0%9F%90%A6")
        #expect(PercentEncoding.encodeComponent("") == "")
        #expect(PercentEncoding.encodeComponent("a/b"[...]) == "a%2Fb")
    }

    @Test func aComponentMatchesFoundationWithTheUnreservedSetOnly() {
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let samples = [
            "plain", "with space", "a&b=c", "q?x#y", "slash/and\\back", "quote'\"", "ünïcödé", "日本語", "tab\tnew\nline",
            "%41", "+plus+", "emoji 🐦‍⬛", "!$&'()*,;=:@[]{}|^`<>",
        ]
        for sample in samples {
            #expect(
                PercentEncoding.encodeComponent(sample)
                    == sample.addingPercentEncoding(withAllowedCharacters: unreserved),
                "\(sample)")
        }
    }

    @Test func theUnreservedCharactersAreRFC3986s66() {
        let unreserved = (0...255).map(UInt8.init).filter(PercentEncoding.isUnreserved)
        #expect(unreserved.count == 66)
        #expect(unreserved.allSatisfy { $0 < 0x80 })
        #expect(!PercentEncoding.isUnreserved(UInt8(ascii: "%")))
        #expect(!PercentEncoding.isUnreserved(UInt8(ascii: "+")))
    }

    @Test func aPathKeepsItsDelimitersAndEscapes() {
        #expect(PercentEncoding.encodePath("/user/Zoë Ä/C#?") == "/user/Zo%C3%AB%20%C3%84/C%23%3F")
        #expect(PercentEncoding.encodePath("/already%20encoded/a:b@c") == "/already%20encoded/a:b@c")
        #expect(PercentEncoding.encodePath("/!$&'()*+,;=") == "/!$&'()*+,;=")
        #expect(PercentEncoding.encodePath("/100%") == "/100%25")
        #expect(PercentEncoding.encodePath("/%zz/%4") == "/%25zz/%254")
    }

    @Test func aQueryKeepsItsSeparatorsAndEscapes() {
        #expect(PercentEncoding.encodeQuery("a=1&b=c d?e/f") == "a=1&b=c%20d?e/f")
        #expect(PercentEncoding.encodeQuery("x=%41&y=#") == "x=%41&y=%23")
    }

    @Test func aRelativePathIsEncodedSegmentBySegmentWithoutEmptyOnes() {
        #expect(
            PercentEncoding.encodeEachSegment(of: "dir/sub dir/naïve #1.txt") == "dir/sub%20dir/na%C3%AFve%20%231.txt")
        #expect(PercentEncoding.encodeEachSegment(of: "/a//b/") == "a/b")
        #expect(PercentEncoding.encodeEachSegment(of: "a+b%c?d") == "a%2Bb%25c%3Fd")
        #expect(PercentEncoding.encodeEachSegment(of: "") == "")
    }

    /// `String.split(separator: "/")` splits Characters: a `/` fused with a mark (`/\u{301}`, `\u{600}/`) is no
    /// separator there. Segments are split at the byte.
    @Test func segmentsSplitAtEverySlashByteEvenInsideAGrapheme() {
        #expect(PercentEncoding.segments(of: "x\u{600}/../y") == ["x\u{600}", "..", "y"])
        #expect(PercentEncoding.segments(of: "/\u{301}a//b") == ["", "\u{301}a", "", "b"])
        #expect(PercentEncoding.segments(of: "/\u{301}a//b", omittingEmpty: true) == ["\u{301}a", "b"])
        #expect(PercentEncoding.encodeEachSegment(of: "a/\u{301}b") == "a/%CC%81b")
        #expect(PercentEncoding.startsWithSlash("/\u{301}"))
        #expect(!PercentEncoding.startsWithSlash("a/"))
    }

    @Test func decodingUndoesEveryEncodingAndRefusesBrokenEscapes() {
        #expect(PercentEncoding.decode("na%C3%AFve%20%231.txt") == "naïve #1.txt")
        #expect(PercentEncoding.decode("%c3%a9") == "é", "lower-case hex")
        #expect(PercentEncoding.decode("%6Bey") == "key")
        #expect(PercentEncoding.decode("a+b") == "a+b", "a plus is not a space outside forms")
        #expect(PercentEncoding.decode("plain") == "plain")
        #expect(PercentEncoding.decode("%2") == nil)
        #expect(PercentEncoding.decode("%zz") == nil)
        #expect(PercentEncoding.decode("100%") == nil)
        #expect(PercentEncoding.decode("%FF") == nil, "not UTF-8")
        for name in ["dir/sub dir/naïve #1.txt", "a%b+c", "日本/語", "'quoted' \"name\""] {
            #expect(PercentEncoding.decode(PercentEncoding.encodeComponent(name)) == name)
            #expect(PercentEncoding.decode(PercentEncoding.encodeEachSegment(of: name)) == name)
        }
    }
}
