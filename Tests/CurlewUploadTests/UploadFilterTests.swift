import Testing

@testable import CurlewS3
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

    /// A pattern's `/` is read by bytes: `hasPrefix("/")` and `contains("/")` compare Characters, and `/\u{301}x`
    /// holds the grapheme `/\u{301}`, not `/`, so that pattern kept its `/` and matched nothing, and `d/\u{301}*` was
    /// matched against the name alone.
    @Test func aSlashFusedWithACombiningMarkIsStillASlashInAPattern() {
        #expect(UploadFilter.matches("/\u{301}x", "\u{301}x"))
        #expect(UploadFilter.matches("d/\u{301}*", "d/\u{301}x"))
        #expect(!UploadFilter.matches("d/\u{301}*", "e/d/\u{301}x"))
    }

    @Test func withoutIncludesEverythingNotExcludedIsSent() {
        let filter = UploadFilter(includes: [], excludes: ["*.bak", "/build/**"])
        #expect(filter.admits("src/main.swift"))
        #expect(!filter.admits("old.bak"))
        #expect(!filter.admits("build/x/y.o"))
        #expect(UploadFilter(includes: [], excludes: []).isEmpty)
    }
}

@Suite struct UploadFilterSizeAndAgeTests {
    static let now: Int64 = 1_800_000_000 * 1_000_000_000
    static func item(_ path: String, size: Int64, ageSeconds: Int64) -> UploadItem {
        UploadItem(
            relativePath: path, absolutePath: "/x/" + path, size: size,
            modifiedNanoseconds: now - ageSeconds * 1_000_000_000)
    }

    @Test func sizeBoundsAreInclusive() {
        let filter = UploadFilter(includes: [], excludes: [], minSize: 10, maxSize: 20)
        #expect(!filter.admits(Self.item("a", size: 9, ageSeconds: 0), nowNanoseconds: Self.now))
        #expect(filter.admits(Self.item("a", size: 10, ageSeconds: 0), nowNanoseconds: Self.now))
        #expect(filter.admits(Self.item("a", size: 20, ageSeconds: 0), nowNanoseconds: Self.now))
        #expect(!filter.admits(Self.item("a", size: 21, ageSeconds: 0), nowNanoseconds: Self.now))
    }

    @Test func maxAgeKeepsRecentFilesAndMinAgeKeepsSettledOnes() {
        let lastDay = UploadFilter(includes: [], excludes: [], maxAge: .seconds(86_400))
        #expect(lastDay.admits(Self.item("new", size: 1, ageSeconds: 3_600), nowNanoseconds: Self.now))
        #expect(!lastDay.admits(Self.item("old", size: 1, ageSeconds: 90_000), nowNanoseconds: Self.now))
        let settled = UploadFilter(includes: [], excludes: [], minAge: .seconds(600))
        #expect(!settled.admits(Self.item("writing", size: 1, ageSeconds: 5), nowNanoseconds: Self.now))
        #expect(settled.admits(Self.item("done", size: 1, ageSeconds: 700), nowNanoseconds: Self.now))
    }

    @Test func patternsStillApplyBesideTheBounds() {
        let filter = UploadFilter(includes: ["*.log"], excludes: [], minSize: 1)
        #expect(filter.admits(Self.item("a.log", size: 5, ageSeconds: 0), nowNanoseconds: Self.now))
        #expect(!filter.admits(Self.item("a.txt", size: 5, ageSeconds: 0), nowNanoseconds: Self.now))
        #expect(!filter.admits(Self.item("b.log", size: 0, ageSeconds: 0), nowNanoseconds: Self.now))
    }

    @Test func contradictoryBoundsAreNamed() {
        #expect(
            UploadFilter(includes: [], excludes: [], minSize: 5, maxSize: 4).contradiction?.contains("--min-size")
                == true)
        #expect(
            UploadFilter(includes: [], excludes: [], minAge: .seconds(10), maxAge: .seconds(5)).contradiction?.contains(
                "--min-age") == true)
        #expect(UploadFilter(includes: [], excludes: [], minSize: 4, maxSize: 4).contradiction == nil)
        #expect(!UploadFilter(includes: [], excludes: [], maxAge: .seconds(1)).isEmpty)
    }
}
