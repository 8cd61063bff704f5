import Testing

@testable import curlew

@Suite struct UploadFilterTests {
    @Test func namePatternsMatchInAnyFolderAndPathPatternsMatchTheWholePath() {
        let filter = UploadFilter(includes: ["*.jpg", "logs/*"], excludes: ["keep/*", "*.tmp.jpg"])
        #expect(filter.admits("a.jpg"))
        #expect(filter.admits("deep/er/b.jpg"))
        #expect(filter.admits("logs/x/y.log"))
        #expect(!filter.admits("b.txt"))
        #expect(!filter.admits("keep/e.jpg"))
        #expect(!filter.admits("x.tmp.jpg"))
    }

    @Test func withoutIncludesEverythingNotExcludedIsSent() {
        let filter = UploadFilter(includes: [], excludes: ["*.bak", "/build/**"])
        #expect(filter.admits("src/main.swift"))
        #expect(!filter.admits("old.bak"))
        #expect(!filter.admits("build/x/y.o"))
        #expect(UploadFilter(includes: [], excludes: []).isEmpty)
    }

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
