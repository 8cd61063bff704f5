import Testing

@testable import CurlewUpload

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
}
