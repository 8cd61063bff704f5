import Testing

@testable import curlew

/// `--part-size` and `--bwlimit` values: the command's option type, not the library's.
@Suite struct ByteSizeArgumentTests {
    @Test(arguments: [
        ("16MiB", Int64(16 << 20)), ("8M", Int64(8 << 20)), ("5MB", Int64(5_000_000)), ("1048576", Int64(1 << 20)),
        ("1.5GiB", Int64(3 << 29)), ("20kB", Int64(20_000)),
    ])
    func sizesReadBinaryAndDecimalUnits(text: String, bytes: Int64) {
        #expect(ByteSizeArgument(argument: text)?.bytes == bytes)
    }

    @Test func nonsenseSizesAreRefused() {
        #expect(ByteSizeArgument(argument: "lots") == nil)
        #expect(ByteSizeArgument(argument: "-5MiB") == nil)
    }
}
