import CLibCurl

/// A content coding the engine decodes (RFC 9110 §8.4.1).
///
/// The engine decodes response bodies itself rather than letting libcurl: libcurl's decoders (7.88 and 8.14 alike)
/// never report a body whose coding ended early, so a gzip, deflate, brotli or zstd body cut short by a server that
/// framed it correctly arrived as a shorter body and a success. See docs/design/0031-the-engine-decodes-response-bodies.md.
enum ContentCoding: String, Sendable, Equatable, CaseIterable {
    // In libcurl's order, which `Accept-Encoding` follows.
    case deflate
    case gzip
    case brotli = "br"
    case zstd

    /// The codings this process can decode, in the order `Accept-Encoding` lists them (libcurl's own order, so
    /// `curl --compressed` sends the same field): deflate and gzip always (zlib), br and zstd when the libraries
    /// libcurl links are in the process.
    static let available: [ContentCoding] = allCases.filter(\.isAvailable)

    /// The `Accept-Encoding` value that asks for every available coding.
    static let acceptEncoding = available.map(\.rawValue).joined(separator: ", ")

    var isAvailable: Bool {
        switch self {
        case .gzip, .deflate: true
        case .brotli: StreamDecoders.brotli != nil
        case .zstd: StreamDecoders.zstd != nil
        }
    }
}

/// What a response's `Content-Encoding` asks of the engine.
enum ResponseCoding: Equatable {
    /// No coding, or only `identity`: the body is as sent.
    case identity
    case decode(ContentCoding)
    /// A coding the engine does not decode (`compress`, a coding this process lacks) or more than one stacked: the
    /// body cannot be handed over as the caller asked, so a body byte fails the request.
    case unsupported(String)

    /// Reads the value of the response's `Content-Encoding` fields, joined in order with commas.
    init(fieldValue: String) {
        let codings = fieldValue.split(separator: ",").map { token in
            String(token.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()).lowercased()
        }.filter { !$0.isEmpty && $0 != "identity" }
        guard let only = codings.first else {
            self = .identity
            return
        }
        let named = codings.count == 1 ? ContentCoding(rawValue: only == "x-gzip" ? "gzip" : only) : nil
        if let named, named.isAvailable {
            self = .decode(named)
        } else {
            self = .unsupported(codings.joined(separator: ", "))
        }
    }
}

/// The brotli and zstd entry points libcurl brought into the process, each set only when all its functions are there.
enum StreamDecoders {
    struct Brotli {
        let create:
            @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) ->
                UnsafeMutableRawPointer?
        let decompress:
            @convention(c) (
                UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?,
                UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<Int>?,
                UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?, UnsafeMutablePointer<Int>?
            ) -> Int32
        let destroy: @convention(c) (UnsafeMutableRawPointer?) -> Void
        let errorCode: @convention(c) (UnsafeRawPointer?) -> Int32
        let errorString: @convention(c) (Int32) -> UnsafePointer<CChar>?
    }

    struct Zstd {
        let create: @convention(c) () -> UnsafeMutableRawPointer?
        let free: @convention(c) (UnsafeMutableRawPointer?) -> Int
        let initialize: @convention(c) (UnsafeMutableRawPointer?) -> Int
        let decompress:
            @convention(c) (
                UnsafeMutableRawPointer?, UnsafeMutablePointer<curlew_zstd_out_buffer>?,
                UnsafeMutablePointer<curlew_zstd_in_buffer>?
            ) -> Int
        let isError: @convention(c) (Int) -> UInt32
        let errorName: @convention(c) (Int) -> UnsafePointer<CChar>?
    }

    private static let found = curlew_find_stream_decoders()

    static let brotli: Brotli? = {
        guard let create = found.brotli_create, let decompress = found.brotli_decompress,
            let destroy = found.brotli_destroy, let errorCode = found.brotli_error_code,
            let errorString = found.brotli_error_string
        else { return nil }
        return Brotli(
            create: create, decompress: decompress, destroy: destroy, errorCode: errorCode, errorString: errorString)
    }()

    static let zstd: Zstd? = {
        guard let create = found.zstd_create, let free = found.zstd_free, let initialize = found.zstd_init,
            let decompress = found.zstd_decompress, let isError = found.zstd_is_error,
            let errorName = found.zstd_error_name
        else { return nil }
        return Zstd(
            create: create, free: free, initialize: initialize, decompress: decompress, isError: isError,
            errorName: errorName)
    }()
}

/// Decodes one response body's content coding a piece at a time, and knows whether the coding ended where the body
/// did. No I/O: bytes in, bytes out, tested synchronously.
///
/// Stricter than libcurl on purpose, as Go's and Python's readers are: a body that ends inside its coding, bytes
/// after a deflate, brotli or zstd stream's end, and anything but another gzip member after a gzip member are
/// errors. Concatenated gzip members and zstd frames decode as one body (RFC 1952 §2.2; what gunzip and zstd do).
final class ContentDecoder {
    let coding: ContentCoding
    private var state: State
    /// Whether any byte of the body has come in.
    private(set) var sawInput = false
    /// Whether the coding's end has been read with nothing after it (so far).
    private var atEnd = false
    /// Deflate only: the stream's first byte while the choice between zlib's wrapper and raw deflate is open (some
    /// servers send raw deflate as `deflate`; libcurl and browsers accept it).
    private var deflateFirstByte: UInt8?
    private var deflateFormatChosen = false
    /// Deflate only: the stream is raw deflate. libcurl and browsers take up to 4 bytes after a raw stream's end (a
    /// server that writes zlib's Adler-32 after raw deflate), so the engine does too.
    private var deflateIsRaw = false
    private var bytesAfterRawDeflate = 0
    private static let rawDeflateTrailerAllowance = 4

    private enum State {
        case zlib(UnsafeMutablePointer<z_stream>)
        case brotli(StreamDecoders.Brotli, UnsafeMutableRawPointer)
        case zstd(StreamDecoders.Zstd, UnsafeMutableRawPointer)
    }

    /// A decoder for `coding`; throws when its library cannot start one.
    init(_ coding: ContentCoding) throws(ContentDecodingError) {
        self.coding = coding
        switch coding {
        case .gzip, .deflate:
            let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            stream.initialize(to: z_stream())
            // gzip: 15 + 32 reads a gzip or a zlib wrapper; deflate: zlib's wrapper first (raw deflate is the
            // fallback, chosen on the first bytes).
            let windowBits: Int32 = coding == .gzip ? 15 + 32 : 15
            let status = inflateInit2_(stream, windowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
            guard status == Z_OK else {
                stream.deallocate()
                throw ContentDecodingError("zlib could not start decoding (\(status))")
            }
            state = .zlib(stream)
        case .brotli:
            guard let brotli = StreamDecoders.brotli, let decoder = brotli.create(nil, nil, nil) else {
                throw ContentDecodingError("the brotli decoder could not start")
            }
            state = .brotli(brotli, decoder)
        case .zstd:
            guard let zstd = StreamDecoders.zstd, let stream = zstd.create() else {
                throw ContentDecodingError("the zstd decoder could not start")
            }
            let status = zstd.initialize(stream)
            if zstd.isError(status) != 0 {
                _ = zstd.free(stream)
                throw ContentDecodingError("the zstd decoder could not start")
            }
            state = .zstd(zstd, stream)
        }
    }

    deinit {
        switch state {
        case .zlib(let stream):
            inflateEnd(stream)
            stream.deinitialize(count: 1)
            stream.deallocate()
        case .brotli(let brotli, let decoder):
            brotli.destroy(decoder)
        case .zstd(let zstd, let stream):
            _ = zstd.free(stream)
        }
    }

    /// Decodes from `input` into `output`: how many input bytes it took and how many it wrote. Call again with the
    /// rest of the input, or with none, while `produced == output.count`: the decoder may hold more output.
    func decode(
        _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(ContentDecodingError) -> (consumed: Int, produced: Int) {
        if !input.isEmpty { sawInput = true }
        switch state {
        case .zlib(let stream):
            return try inflate(stream, input, output)
        case .brotli(let brotli, let decoder):
            return try decodeBrotli(brotli, decoder, input, output)
        case .zstd(let zstd, let stream):
            return try decodeZstd(zstd, stream, input, output)
        }
    }

    /// Called when the body has ended: nil when the coding ended with it (or no body came), otherwise why not.
    var failureAtEndOfBody: ContentDecodingError? {
        guard sawInput, !atEnd else { return nil }
        return ContentDecodingError(
            "the \(coding.rawValue)-encoded body ended before its coding did: the response was cut short")
    }

    // MARK: zlib

    private func inflate(
        _ stream: UnsafeMutablePointer<z_stream>, _ input: UnsafeRawBufferPointer,
        _ output: UnsafeMutableRawBufferPointer
    ) throws(ContentDecodingError) -> (consumed: Int, produced: Int) {
        var consumed = 0
        var produced = 0
        if coding == .deflate, !deflateFormatChosen {
            guard !input.isEmpty else { return (0, 0) }
            consumed = try chooseDeflateFormat(stream, input)
            guard deflateFormatChosen else { return (consumed, 0) }
        }
        while produced < output.count {
            if atEnd && deflateIsRaw {
                bytesAfterRawDeflate += input.count - consumed
                guard bytesAfterRawDeflate <= Self.rawDeflateTrailerAllowance else { throw Self.trailingBytes(coding) }
                return (input.count, produced)
            }
            if atEnd {
                guard consumed < input.count else { break }
                // Only another gzip member may follow a gzip member (its first byte is 0x1F).
                guard coding == .gzip, input[consumed] == 0x1F else { throw Self.trailingBytes(coding) }
                inflateReset(stream)
                atEnd = false
            }
            let step = try inflateStep(
                stream, input.baseAddress.map { $0 + consumed }, input.count - consumed,
                UnsafeMutableRawBufferPointer(rebasing: output[produced...]))
            consumed += step.consumed
            produced += step.produced
            // zlib stops only when the input is used up, the output is full, or the stream has ended: without an
            // end, stop and let the caller bring more input or room.
            if !atEnd && (consumed == input.count || step.consumed == 0 && step.produced == 0) { break }
        }
        return (consumed, produced)
    }

    /// One run of `inflate` over the input and output given: what it took and wrote; sets `atEnd` at the stream's
    /// end.
    private func inflateStep(
        _ stream: UnsafeMutablePointer<z_stream>, _ input: UnsafeRawPointer?, _ count: Int,
        _ output: UnsafeMutableRawBufferPointer
    ) throws(ContentDecodingError) -> (consumed: Int, produced: Int) {
        guard let outputBase = output.baseAddress, !output.isEmpty else { return (0, 0) }
        let offered = min(count, Int(UInt32.max))
        let room = min(output.count, Int(UInt32.max))
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input?.assumingMemoryBound(to: UInt8.self))
        stream.pointee.avail_in = UInt32(offered)
        stream.pointee.next_out = outputBase.assumingMemoryBound(to: UInt8.self)
        stream.pointee.avail_out = UInt32(room)
        let status = CLibCurl.inflate(stream, Z_NO_FLUSH)
        let step = (consumed: offered - Int(stream.pointee.avail_in), produced: room - Int(stream.pointee.avail_out))
        switch status {
        case Z_OK, Z_BUF_ERROR:
            // Z_BUF_ERROR: no progress possible without more input or room; not an error of the data.
            break
        case Z_STREAM_END:
            atEnd = true
        default:
            let message = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(status)"
            throw ContentDecodingError("the \(coding.rawValue)-encoded body could not be decoded: \(message)")
        }
        return step
    }

    /// Reads the deflate stream's first two bytes: a zlib header keeps zlib's wrapper, anything else is decoded as
    /// raw deflate. Returns the input bytes it took (the first byte, when only one has come).
    private func chooseDeflateFormat(
        _ stream: UnsafeMutablePointer<z_stream>, _ input: UnsafeRawBufferPointer
    ) throws(ContentDecodingError) -> Int {
        if deflateFirstByte == nil && input.count == 1 {
            deflateFirstByte = input[0]
            return 1
        }
        let first = deflateFirstByte ?? input[0]
        let second = deflateFirstByte == nil ? input[1] : input[0]
        deflateFormatChosen = true
        let isZlib = first & 0x0F == 8 && first >> 4 <= 7 && (UInt16(first) << 8 | UInt16(second)) % 31 == 0
        if !isZlib {
            inflateReset2(stream, -15)
            deflateIsRaw = true
        }
        if let held = deflateFirstByte {
            // The first byte came alone: the decoder gets it now (one byte decodes to nothing in either format).
            deflateFirstByte = nil
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: 2, alignment: 1)
            defer { bytes.deallocate() }
            bytes[0] = held
            _ = try inflateStep(stream, bytes.baseAddress, 1, UnsafeMutableRawBufferPointer(rebasing: bytes[1...]))
        }
        return 0
    }

    // MARK: brotli and zstd

    private func decodeBrotli(
        _ brotli: StreamDecoders.Brotli, _ decoder: UnsafeMutableRawPointer, _ input: UnsafeRawBufferPointer,
        _ output: UnsafeMutableRawBufferPointer
    ) throws(ContentDecodingError) -> (consumed: Int, produced: Int) {
        if atEnd {
            if input.isEmpty { return (0, 0) }
            throw Self.trailingBytes(coding)
        }
        var availableIn = input.count
        var nextIn = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var availableOut = output.count
        var nextOut = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let result = brotli.decompress(decoder, &availableIn, &nextIn, &availableOut, &nextOut, nil)
        let consumed = input.count - availableIn
        let produced = output.count - availableOut
        switch result {
        case 1:  // success: the stream ended
            atEnd = true
            if consumed < input.count { throw Self.trailingBytes(coding) }
        case 2, 3:  // needs more input, needs more output
            break
        default:
            let code = brotli.errorCode(decoder)
            let message = brotli.errorString(code).map { String(cString: $0) } ?? "error \(code)"
            throw ContentDecodingError("the br-encoded body could not be decoded: \(message)")
        }
        return (consumed, produced)
    }

    private func decodeZstd(
        _ zstd: StreamDecoders.Zstd, _ stream: UnsafeMutableRawPointer, _ input: UnsafeRawBufferPointer,
        _ output: UnsafeMutableRawBufferPointer
    ) throws(ContentDecodingError) -> (consumed: Int, produced: Int) {
        if input.isEmpty && atEnd { return (0, 0) }
        var inBuffer = curlew_zstd_in_buffer(src: input.baseAddress, size: input.count, pos: 0)
        var outBuffer = curlew_zstd_out_buffer(dst: output.baseAddress, size: output.count, pos: 0)
        repeat {
            let hint = zstd.decompress(stream, &outBuffer, &inBuffer)
            if zstd.isError(hint) != 0 {
                let message = zstd.errorName(hint).map { String(cString: $0) } ?? "error \(hint)"
                throw ContentDecodingError("the zstd-encoded body could not be decoded: \(message)")
            }
            // 0: a frame has ended and is flushed; another frame may follow.
            atEnd = hint == 0
        } while inBuffer.pos < inBuffer.size && outBuffer.pos < outBuffer.size
        return (inBuffer.pos, outBuffer.pos)
    }

    private static func trailingBytes(_ coding: ContentCoding) -> ContentDecodingError {
        ContentDecodingError("the \(coding.rawValue)-encoded body has bytes after the end of its coding")
    }
}

/// Why a response body's content coding could not be decoded; the caller sees it as
/// ``CurlewError/Code/invalidResponse``.
struct ContentDecodingError: Error, Equatable {
    let detail: String
    init(_ detail: String) { self.detail = detail }
}
