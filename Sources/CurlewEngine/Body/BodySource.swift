import Glibc

/// What a body source answers when libcurl asks for the next bytes.
enum BodyReadResult {
    /// This many bytes were copied into libcurl's buffer (at least one).
    case bytes(Int)
    /// Every byte has been sent.
    case end
    /// Nothing to send yet; the source calls its waker when there is (`CURL_READFUNC_PAUSE`).
    case pause
    /// The body cannot be sent as announced; the transfer fails with this error.
    case abort(CurlewError)
}

/// A request body as the read callback sees it: a source it pulls bytes from on the loop, never blocking.
///
/// Sources compose: a multipart form is a sequence of sources, gzip wraps one. Every method runs on the
/// transfer's loop, except that a source may call its waker from any thread.
protocol BodySource: AnyObject {
    /// The exact number of bytes the source sends, if known before the first byte goes out
    /// (`Content-Length`); `nil` sends the body chunked on HTTP/1.1 and as plain DATA frames on HTTP/2.
    var length: Int64? { get }
    /// Copies the next bytes into `buffer` (which is never empty).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyReadResult
    /// Goes back to the first byte, for a 307/308 redirect or an authentication retry; an error if it cannot.
    func rewind() -> CurlewError?
    /// Tells the source whom to wake when it answered ``BodyReadResult/pause`` and has bytes again.
    func setWaker(_ waker: BodyWaker?)
    /// Releases descriptors and stops producers. Safe to call more than once.
    func close()
}

extension BodySource {
    func setWaker(_ waker: BodyWaker?) {}
}

/// Wakes a paused transfer when its body has bytes again; callable from any thread, more than once.
struct BodyWaker: Sendable {
    let wake: @Sendable () -> Void
}

/// Bytes in memory: copied only into libcurl's buffer, replayable.
final class MemoryBodySource: BodySource {
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var length: Int64? { Int64(bytes.count) }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyReadResult {
        let count = min(buffer.count, bytes.count - position)
        guard count > 0 else { return .end }
        bytes.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + position, byteCount: count)
        }
        position += count
        return .bytes(count)
    }

    func rewind() -> CurlewError? {
        position = 0
        return nil
    }

    func close() {}
}

extension CurlewError {
    static func requestBody(_ detail: String, errno code: Int32? = nil) -> CurlewError {
        CurlewError(
            code: .requestBodyFailed,
            detail: detail + (code.map { ": \(String(cString: strerror($0)))" } ?? ""), osErrno: code)
    }
}
