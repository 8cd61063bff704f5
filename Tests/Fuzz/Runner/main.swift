import CFuzzerDriverFallback
import CurlewFuzzProperties

#if canImport(Glibc)
import Glibc
#endif

// `curlew-fuzz NAME [libFuzzer options] [corpus directories]`: runs one target's property under libFuzzer
// (`make fuzz` builds this with `-sanitize=fuzzer,address`); a property that fails stops the run with its
// description, and libFuzzer writes the input as a crash file.

nonisolated(unsafe) var selected: FuzzTarget?

func printError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
}

var arguments = CommandLine.arguments
guard arguments.count >= 2, let target = FuzzTarget.named(arguments[1]) else {
    let names = FuzzTarget.all.map(\.name).joined(separator: ", ")
    printError("usage: curlew-fuzz NAME [libFuzzer options] [corpus…]; NAME is one of \(names)\n")
    exit(64)
}
selected = target

/// libFuzzer's own `main`, which `-sanitize=fuzzer` links too, needs this symbol; the run below goes through
/// `LLVMFuzzerRunDriver` with the selected target instead.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let selected else { return 0 }
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    if let failure = selected.check(bytes) {
        printError("curlew-fuzz \(selected.name): property failed: \(failure)\n")
        abort()
    }
    return 0
}

// libFuzzer reads its options from argv; the target's name is not one of them.
var driverArguments = [arguments[0]] + arguments.dropFirst(2)
var argc = CInt(driverArguments.count)
var cStrings = driverArguments.map { strdup($0) } + [nil]
let status = cStrings.withUnsafeMutableBufferPointer { buffer -> CInt in
    var argv = buffer.baseAddress
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzerTestOneInput(data, size) }
}
exit(status)
