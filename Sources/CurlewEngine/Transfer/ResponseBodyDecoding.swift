import CLibCurl

/// A content-encoded response body on its way from libcurl's write callback to the sink: each piece libcurl hands
/// over is decoded into a bounded buffer, and the sink gets what comes out, a buffer at a time. No I/O; tested
/// synchronously with a sink of its own.
///
/// Memory stays bounded whatever the compression ratio: a piece of the body that decodes to gigabytes reaches the
/// sink in ``outputCapacity`` steps, and when the sink pauses (a streaming consumer without room) the decoder stops
/// where it was. libcurl then offers the same bytes again, perhaps with more after them (libcurl 8 may add what came
/// in meanwhile); the bytes the decoder already took are skipped, the decoded bytes the sink refused go first.
final class ResponseBodyDecoding {
    /// The most decoded bytes handed to the sink at once.
    static let outputCapacity = 32 * 1024

    private let coding: ResponseCoding
    /// Made with the first body byte: a head with no body (HEAD, 204, 304, a redirect libcurl follows) costs no
    /// decoder state and no buffer.
    private var decoder: ContentDecoder?
    private var output = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// Decoded bytes at the start of ``output`` the sink paused on.
    private var refusedCount = 0
    /// How many leading bytes of what libcurl offers next the decoder has already taken (after a pause).
    private var takenOfOfferedBytes = 0

    /// Decoding for a response whose `Content-Encoding` reads as `coding`; nil for `identity`.
    init?(_ coding: ResponseCoding) {
        if coding == .identity { return nil }
        self.coding = coding
    }

    deinit { output.deallocate() }

    /// The decoder, made on first use; throws for a coding the engine does not decode.
    private func startedDecoder() throws(ContentDecodingError) -> ContentDecoder {
        if let decoder { return decoder }
        let started: ContentDecoder
        switch coding {
        case .identity:
            preconditionFailure("no decoding is made for identity")
        case .decode(let contentCoding):
            started = try ContentDecoder(contentCoding)
        case .unsupported(let named):
            throw ContentDecodingError(
                "the response's content coding (\(named)) is not one the engine decodes; disable decompression to "
                    + "receive the body as sent")
        }
        decoder = started
        output = .allocate(byteCount: Self.outputCapacity, alignment: 16)
        return started
    }

    /// Decodes `bytes` (what libcurl offers) and hands the result to `store`, which answers as a write callback
    /// does: the count it took, `CURL_WRITEFUNC_PAUSE`, or anything else to stop. Returns the write callback's
    /// answer for `bytes`; throws when the coding is broken.
    func receive(
        _ bytes: UnsafeRawBufferPointer, store: (UnsafeRawBufferPointer) -> Int
    ) throws(ContentDecodingError) -> Int {
        let decoder = try startedDecoder()
        if refusedCount > 0 {
            let answer = store(UnsafeRawBufferPointer(rebasing: output[..<refusedCount]))
            if answer == Int(CURL_WRITEFUNC_PAUSE) { return answer }
            guard answer == refusedCount else { return 0 }
            refusedCount = 0
        }
        var taken = min(takenOfOfferedBytes, bytes.count)
        takenOfOfferedBytes -= taken
        // Offered again in smaller pieces than before (no libcurl does so): these were all decoded already.
        if takenOfOfferedBytes > 0 { return bytes.count }
        while true {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[taken...])
            let (consumed, produced) = try decoder.decode(rest, into: output)
            taken += consumed
            if produced > 0 {
                let answer = store(UnsafeRawBufferPointer(rebasing: output[..<produced]))
                if answer == Int(CURL_WRITEFUNC_PAUSE) {
                    refusedCount = produced
                    takenOfOfferedBytes = taken
                    return answer
                }
                guard answer == produced else { return 0 }
            }
            // A full buffer may leave more decoded bytes inside the decoder; otherwise stop once the input is used
            // up, or when nothing moved.
            let full = produced == output.count
            if !full && (taken == bytes.count || consumed == 0 && produced == 0) { break }
        }
        if taken < bytes.count {
            // The decoder stopped short of the input without an error (cannot happen with zlib, brotli or zstd):
            // never report bytes taken that were not.
            throw ContentDecodingError("the decoder stopped before the end of the body's bytes")
        }
        return bytes.count
    }

    /// Called when libcurl reports the body complete: why the body is not whole, or nil.
    var failureAtEndOfBody: ContentDecodingError? { decoder?.failureAtEndOfBody }
}
