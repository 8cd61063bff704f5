import Testing

@testable import CurlewEngine

/// The engine's own content decoding, byte for byte and without a server: whole bodies in any pieces, and the
/// bodies libcurl's decoders pass as whole though they are not (cut inside their coding, or with bytes after it).
@Suite struct ContentDecoderTests {
    static let body = ContentEncoding.sampleBody(size: 300_000)

    /// Every coding the tests can make, with its encoded sample body.
    static var encodedSamples: [(coding: ContentCoding, name: String, encoded: [UInt8])] {
        var samples: [(ContentCoding, String, [UInt8])] = [
            (.gzip, "gzip", ContentEncoding.gzip(body)),
            (.deflate, "deflate (zlib)", ContentEncoding.deflate(body, windowBits: 15)),
            (.deflate, "deflate (raw)", ContentEncoding.deflate(body, windowBits: -15)),
        ]
        if ContentCoding.zstd.isAvailable, let zstd = ContentEncoding.zstd(body) {
            samples.append((.zstd, "zstd", zstd))
        }
        return samples
    }

    @Test(arguments: [1, 7, 16_384, 1 << 30])
    func everyCodingDecodesAWholeBodyInPiecesOfAnySize(pieceSize: Int) throws {
        for sample in Self.encodedSamples {
            let decoded = try ContentEncoding.decode(
                .decode(sample.coding), pieces: ContentEncoding.pieces(sample.encoded, size: pieceSize))
            #expect(decoded.body == Self.body, "\(sample.name), pieces of \(pieceSize)")
            #expect(decoded.failureAtEnd == nil, "\(sample.name)")
        }
    }

    @Test func aBodyCutInsideItsCodingIsReportedWhenTheBodyEnds() throws {
        for sample in Self.encodedSamples {
            for cut in [sample.encoded.count - 4, sample.encoded.count / 2, 1] {
                let decoded = try ContentEncoding.decode(
                    .decode(sample.coding), pieces: ContentEncoding.pieces(Array(sample.encoded[..<cut]), size: 4096))
                #expect(decoded.body.count < Self.body.count || cut == sample.encoded.count - 4, "\(sample.name)")
                #expect(Self.body.starts(with: decoded.body), "\(sample.name): what came out is the body's start")
                let failure = try #require(decoded.failureAtEnd, "\(sample.name) cut to \(cut) bytes")
                #expect(failure.contains("cut short"), "\(failure)")
            }
        }
    }

    @Test func bytesAfterTheEndOfACodingFail() throws {
        var broken: [(String, ResponseCoding, [UInt8])] = [
            ("gzip", .decode(.gzip), ContentEncoding.gzip(Self.body) + Array("NOT-A-MEMBER".utf8)),
            ("deflate", .decode(.deflate), ContentEncoding.deflate(Self.body, windowBits: 15) + [0]),
            ("raw deflate", .decode(.deflate), ContentEncoding.deflate(Self.body, windowBits: -15) + [1, 2, 3, 4, 5]),
        ]
        if ContentCoding.brotli.isAvailable {
            broken.append(("br", .decode(.brotli), ContentEncoding.brotliHello + [0x2A]))
        }
        if ContentCoding.zstd.isAvailable, let zstd = ContentEncoding.zstd(Self.body) {
            broken.append(("zstd", .decode(.zstd), zstd + Array("trailing".utf8)))
        }
        for (name, coding, bytes) in broken {
            #expect(throws: ContentDecodingError.self, "\(name)") {
                _ = try ContentEncoding.decode(coding, pieces: [bytes])
            }
            // The same bytes, the stray ones in a piece of their own.
            #expect(throws: ContentDecodingError.self, "\(name), stray bytes apart") {
                _ = try ContentEncoding.decode(coding, pieces: ContentEncoding.pieces(bytes, size: bytes.count - 1))
            }
        }
    }

    @Test func rawDeflateMayEndWithFourBytesAsLibcurlAndBrowsersAllow() throws {
        // Servers that write zlib's Adler-32 after raw deflate: libcurl takes up to 4 bytes after a raw stream.
        let raw = ContentEncoding.deflate(Self.body, windowBits: -15)
        for pieceSize in [1, 3, raw.count + 4] {
            let decoded = try ContentEncoding.decode(
                .decode(.deflate), pieces: ContentEncoding.pieces(raw + [9, 8, 7, 6], size: pieceSize))
            #expect(decoded.body == Self.body && decoded.failureAtEnd == nil, "pieces of \(pieceSize)")
        }
        #expect(throws: ContentDecodingError.self) {
            _ = try ContentEncoding.decode(
                .decode(.deflate), pieces: ContentEncoding.pieces(raw + [9, 8, 7, 6, 5], size: 2))
        }
    }

    @Test func concatenatedGzipMembersAndZstdFramesAreOneBody() throws {
        let half = Self.body.count / 2
        let first = Array(Self.body[..<half])
        let second = Array(Self.body[half...])
        let members = ContentEncoding.gzip(first) + ContentEncoding.gzip(second)
        for pieceSize in [1, 1000, members.count] {
            let decoded = try ContentEncoding.decode(
                .decode(.gzip), pieces: ContentEncoding.pieces(members, size: pieceSize))
            #expect(decoded.body == Self.body && decoded.failureAtEnd == nil, "pieces of \(pieceSize)")
        }
        // A second member cut short is a body cut short.
        let cut = try ContentEncoding.decode(.decode(.gzip), pieces: [Array(members.dropLast(3))])
        #expect(cut.failureAtEnd != nil)
        if ContentCoding.zstd.isAvailable, let one = ContentEncoding.zstd(first), let two = ContentEncoding.zstd(second)
        {
            let decoded = try ContentEncoding.decode(
                .decode(.zstd), pieces: ContentEncoding.pieces(one + two, size: 999))
            #expect(decoded.body == Self.body && decoded.failureAtEnd == nil)
        }
    }

    @Test func brotliDecodesAndACutOneIsReported() throws {
        try #require(ContentCoding.brotli.isAvailable, "libcurl links brotli on Debian")
        let hello = Array("hello hello hello hello".utf8)
        for pieceSize in [1, 3, 100] {
            let decoded = try ContentEncoding.decode(
                .decode(.brotli), pieces: ContentEncoding.pieces(ContentEncoding.brotliHello, size: pieceSize))
            #expect(decoded.body == hello && decoded.failureAtEnd == nil, "pieces of \(pieceSize)")
        }
        let cut = try ContentEncoding.decode(.decode(.brotli), pieces: [Array(ContentEncoding.brotliHello.dropLast(2))])
        #expect(cut.failureAtEnd != nil)
    }

    @Test func aCorruptBodyFailsWithTheDecodersReason() throws {
        var gzip = ContentEncoding.gzip(Self.body)
        for index in stride(from: 100, to: 200, by: 1) { gzip[index] ^= 0x5A }
        let error = try #require(throws: ContentDecodingError.self) {
            _ = try ContentEncoding.decode(.decode(.gzip), pieces: [gzip])
        }
        #expect(error.detail.contains("gzip-encoded body could not be decoded"), "\(error.detail)")
    }

    @Test func aBodyThatNeverCameIsNotCutShort() throws {
        // A HEAD response, a 204 or a 304 names a coding and has no body.
        for coding in ContentCoding.available {
            #expect(try ContentEncoding.decode(.decode(coding), pieces: []).failureAtEnd == nil, "\(coding)")
        }
    }

    @Test(arguments: [
        ("gzip", ResponseCoding.decode(.gzip)),
        (" X-GZIP ", .decode(.gzip)),
        ("identity, deflate", .decode(.deflate)),
        ("identity", .identity),
        ("", .identity),
        ("gzip, br", .unsupported("gzip, br")),
        ("gzip,gzip", .unsupported("gzip, gzip")),
        ("compress", .unsupported("compress")),
    ])
    func theContentEncodingFieldNamesOneCodingOrNone(field: String, expected: ResponseCoding) {
        #expect(ResponseCoding(fieldValue: field) == expected)
    }

    @Test func theAcceptEncodingListNamesOnlyCodingsTheEngineDecodes() {
        let listed = ContentCoding.acceptEncoding.split(separator: ", ").map(String.init)
        #expect(listed.starts(with: ["deflate", "gzip"]), "libcurl's order, which `curl --compressed` sends")
        for name in listed { #expect(ContentCoding(rawValue: name)?.isAvailable == true, "\(name)") }
    }
}
