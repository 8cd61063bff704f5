import ArgumentParser
import CurlewEngine
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A duration given on the command line: `10s`, `500ms`, `250us`, `2m`, `1h`, or a bare number of seconds.
struct DurationArgument: ExpressibleByArgument, Sendable, Hashable, CustomStringConvertible {
    let duration: Duration
    private let text: String

    init(_ duration: Duration, text: String) {
        self.duration = duration
        self.text = text
    }

    init?(argument: String) {
        guard let duration = ScaledNumber.duration(argument) else { return nil }
        self.duration = duration
        self.text = argument
    }

    var description: String { text }

    static var defaultCompletionKind: CompletionKind { .default }
}

/// `-H` values as names and values (``HeaderFieldLine``); one that is not `Name: value` is a usage error.
func parseHeaderOptions(_ headers: [String]) throws(ValidationError) -> [(name: String, value: String)] {
    try headers.map { header throws(ValidationError) in
        guard let field = HeaderFieldLine.parse(header) else {
            throw ValidationError("header \(header.debugDescription) is not 'Name: value'")
        }
        return field
    }
}

/// A failure the user can act on: printed as `Error: <message>`, exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { self.description = TerminalText.printable(message) }
}

/// Text shown to a person that may hold text from outside (a server's error message, a listing's paths, a file's
/// name): its control characters are shown as `\x1b`, not sent, so that no reply or name can move the cursor,
/// retitle the window, or rewrite or hide lines of the output. git shows a remote's messages the same way. Line
/// feeds and tabs stay; JSON output needs none of this (JSON escapes control characters itself).
enum TerminalText {
    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var shown = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                shown.append(contentsOf: "\\x".unicodeScalars)
                let hex = String(scalar.value, radix: 16)
                shown.append(contentsOf: ((hex.count < 2 ? "0" : "") + hex).unicodeScalars)
            } else {
                shown.append(scalar)
            }
        }
        return String(shown)
    }

    /// C0 but line feed and tab, DEL, and C1 (which terminals may read as ESC sequences: U+009B is CSI).
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }
}

/// `print` for lines a person reads: see ``TerminalText``.
func printLine(_ text: String) {
    print(TerminalText.printable(text))
}

/// Where progress goes: stderr, redrawn in place on a terminal, one plain line per period otherwise (logs, CI).
struct ProgressOutput: Sendable {
    let isTerminal: Bool
    let enabled: Bool

    init(enabled: Bool) {
        self.enabled = enabled
        self.isTerminal = isatty(STDERR_FILENO) == 1
    }

    func update(_ line: String) {
        guard enabled else { return }
        if isTerminal {
            writeStandardError(Self.clearLine + TerminalText.printable(line), asItIs: true)
        } else {
            writeStandardError("progress: " + line + "\n")
        }
    }

    /// Clears the live line so the summary starts on a clean row.
    func finish() {
        if enabled && isTerminal { writeStandardError(Self.clearLine, asItIs: true) }
    }

    /// Back to the start of the row, and the row erased.
    private static let clearLine = "\r\u{1B}[2K"
}

/// Writes `text` to standard error, made printable (``TerminalText``) unless `asItIs` (the program's own escape
/// sequences).
func writeStandardError(_ text: String, asItIs: Bool = false) {
    var bytes = Array((asItIs ? text : TerminalText.printable(text)).utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        offset += written
    }
}

/// Counts interrupts: Ctrl-C presses, and SIGTERM, which schedulers send to stop a job (Slurm on `scancel`, a time
/// limit or pre-emption; Kubernetes when it deletes a pod, before SIGKILL after the grace period). Either one is an
/// interrupt: work in flight finishes and the summary (and a shard's `--output-dir` files) are still written. The
/// handlers are Dispatch signal sources, so they run as ordinary code on a queue (not in a signal handler) and can
/// do anything.
final class InterruptMonitor: Sendable {
    private static let signals = [SIGINT, SIGTERM]
    /// A class of its own, so the signal handlers can share it before `self` is complete.
    private final class Count: Sendable {
        let value = Atomic<Int>(0)
    }
    private let presses = Count()
    // DispatchSourceSignal is not Sendable; the sources are only touched at creation and in `stop()`.
    nonisolated(unsafe) private let sources: [any DispatchSourceSignal]

    /// - Parameter onInterrupt: called with the interrupt count (1, 2, …) for each Ctrl-C or SIGTERM.
    init(onInterrupt: @escaping @Sendable (Int) -> Void) {
        let presses = self.presses
        sources = Self.signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                onInterrupt(presses.value.add(1, ordering: .relaxed).newValue)
            }
            source.resume()
            return source
        }
    }

    var wasInterrupted: Bool { presses.value.load(ordering: .relaxed) > 0 }

    /// Interrupts so far.
    var count: Int { presses.value.load(ordering: .relaxed) }

    func stop() {
        for source in sources { source.cancel() }
        for number in Self.signals { signal(number, SIG_DFL) }
    }
}

/// Formats byte counts with decimal units (MB = 10^6 bytes), as network tools do.
func formatBytes(_ bytes: Int64) -> String {
    let value = Double(bytes)
    switch value {
    case ..<1_000: return "\(bytes) B"
    case ..<1_000_000: return String(format: "%.1f kB", value / 1e3)
    case ..<1_000_000_000: return String(format: "%.1f MB", value / 1e6)
    default: return String(format: "%.2f GB", value / 1e9)
    }
}

/// Formats a latency in microseconds for people: µs below a millisecond, ms below a second, s above.
func formatLatency(microseconds: Double) -> String {
    switch microseconds {
    case ..<1_000: return String(format: "%.0f µs", microseconds)
    case ..<1_000_000: return String(format: "%.2f ms", microseconds / 1e3)
    default: return String(format: "%.2f s", microseconds / 1e6)
    }
}

func formatCount(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var grouped = ""
    for (index, character) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { grouped.append(",") }
        grouped.append(character)
    }
    return (value < 0 ? "-" : "") + grouped
}

/// Encodes a summary as one line of JSON with stable key order.
func jsonLine(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// JSON lines on standard output, each written whole with `write(2)` as it comes (no stdio buffer to flush), one
/// writer at a time: `curlew upload --json-events`, whose workers report from several threads.
final class EventLines: Sendable {
    static let standardOutput = EventLines(descriptor: STDOUT_FILENO)

    private let descriptor: Int32
    private let lock = Mutex(())

    private init(descriptor: Int32) { self.descriptor = descriptor }

    /// Writes `event` as one JSON line; an event that cannot be encoded (none can't) is dropped.
    func write(_ event: some Encodable) {
        guard let line = try? jsonLine(event) else { return }
        writeLine(line)
    }

    /// Writes `line` and a newline, retrying short writes and interrupts.
    func writeLine(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        lock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}
