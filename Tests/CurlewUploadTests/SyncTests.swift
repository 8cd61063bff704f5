import CurlewSharding
import Testing

@testable import CurlewS3
@testable import CurlewUpload

/// `SyncPlan`: which files `curlew sync` sends, leaves and deletes, decided without I/O.
@Suite struct SyncPlanTests {
    static func item(_ path: String, size: Int64, modified: Int64 = 1_000) -> UploadItem {
        UploadItem(
            relativePath: path, absolutePath: "/src/" + path, size: size, modifiedNanoseconds: modified * 1_000_000_000)
    }

    static func selection(_ items: [UploadItem], listed: Set<String>? = nil) -> UploadSelection {
        var listing = UploadListing()
        listing.items = items
        var selection = UploadSelection(
            listing: listing, listedBeforeSharding: items.count, ownedByShard: items.count, excluded: 0,
            journalPath: nil)
        selection.listedPaths = Set((listed.map(Array.init) ?? items.map(\.relativePath)).map(ExactPath.init))
        return selection
    }

    @Test func missingAndResizedFilesAreSentAndSameSizeOnesGoToTheChecksumOnS3() {
        let plan = SyncPlan.make(
            selection: Self.selection([
                Self.item("new", size: 1), Self.item("grown", size: 9), Self.item("same", size: 5),
            ]),
            destination: [
                .init(relativePath: "grown", size: 8, modified: nil),
                .init(relativePath: "same", size: 5, modified: nil),
            ], comparesChecksums: true, filter: UploadFilter(includes: [], excludes: []), shard: .whole, deletes: false)
        #expect(
            plan.uploads.map { "\($0.item.relativePath) \($0.reason)" } == [
                "new missing", "grown size", "same checksum",
            ])
        #expect(plan.unchanged.isEmpty && plan.deletions.isEmpty)
    }

    @Test func onWebDAVSameSizeFilesAreUnchangedUnlessTheSourceIsNewer() {
        let plan = SyncPlan.make(
            selection: Self.selection([
                Self.item("old", size: 5, modified: 100), Self.item("touched", size: 5, modified: 300),
            ]),
            destination: [
                .init(relativePath: "old", size: 5, modified: 200),
                .init(relativePath: "touched", size: 5, modified: 200),
            ], comparesChecksums: false, filter: UploadFilter(includes: [], excludes: []), shard: .whole, deletes: false
        )
        #expect(plan.unchanged.map(\.item.relativePath) == ["old"])
        #expect(plan.unchanged.map(\.rule) == ["size-and-time"])
        #expect(plan.uploads.map { "\($0.item.relativePath) \($0.reason)" } == ["touched newer"])
    }

    /// `café` in NFC and in NFD are two names on Linux and on every store, though Swift's `String` calls them equal:
    /// a destination holding one does not hold the other, and the source's listing of one does not spare the other.
    @Test func aNameThatDiffersOnlyInUnicodeNormalizationIsAnotherFile() {
        let composed = "caf\u{E9}.txt", decomposed = "cafe\u{301}.txt"
        let plan = SyncPlan.make(
            selection: Self.selection([Self.item(decomposed, size: 5, modified: 100)]),
            destination: [.init(relativePath: composed, size: 5, modified: 200)], comparesChecksums: false,
            filter: UploadFilter(includes: [], excludes: []), shard: .whole, deletes: true)
        #expect(plan.uploads.map { Array($0.item.relativePath.utf8) } == [Array(decomposed.utf8)])
        #expect(plan.uploads.map(\.reason) == ["missing"])
        #expect(plan.unchanged.isEmpty)
        #expect(plan.deletions.map { Array($0.utf8) } == [Array(composed.utf8)])
    }

    @Test func deletionsSpareListedFilteredAndExcludedPaths() {
        // "filtered.log" is listed but left out by a size filter; "unreadable" could not be read; "keep.tmp" is
        // excluded by a pattern: none of them may go.
        let selection = Self.selection(
            [Self.item("a", size: 1)], listed: ["a", "filtered.log", "unreadable"])
        let destination: [SyncPlan.DestinationFile] = [
            "a", "filtered.log", "unreadable", "keep.tmp", "gone", "dir/gone2",
        ]
        .map { .init(relativePath: $0, size: 1, modified: nil) }
        let filter = UploadFilter(includes: [], excludes: ["*.tmp"], minSize: 10)
        let plan = SyncPlan.make(
            selection: selection, destination: destination, comparesChecksums: true, filter: filter, shard: .whole,
            deletes: true)
        #expect(plan.deletions == ["dir/gone2", "gone"])
        let withoutDelete = SyncPlan.make(
            selection: selection, destination: destination, comparesChecksums: true, filter: filter, shard: .whole,
            deletes: false)
        #expect(withoutDelete.deletions.isEmpty)
    }

    /// A folder the source could not list (or read to its end) may still hold every file under it: none of its
    /// destination copies is deleted, by any shard, whichever shard owns the folder's own path.
    @Test func nothingUnderAFolderTheSourceCouldNotListIsDeleted() {
        var selection = Self.selection([Self.item("a", size: 1)], listed: ["a", "private"])
        selection.unlistedPaths = ["private"]
        let destination: [SyncPlan.DestinationFile] = ["a", "private/b.txt", "private/deep/d.txt", "privateer", "gone"]
            .map { .init(relativePath: $0, size: 1, modified: nil) }
        var deleted: [String] = []
        for shard in [ShardAssignment.whole, ShardAssignment(index: 0, count: 2), ShardAssignment(index: 1, count: 2)] {
            let plan = SyncPlan.make(
                selection: selection, destination: destination, comparesChecksums: true,
                filter: UploadFilter(includes: [], excludes: []), shard: shard, deletes: true)
            deleted += plan.deletions
        }
        #expect(Set(deleted) == ["gone", "privateer"])
        // The source's own folder unreadable: nothing at all.
        selection.unlistedPaths = [""]
        let plan = SyncPlan.make(
            selection: selection, destination: destination, comparesChecksums: true,
            filter: UploadFilter(includes: [], excludes: []), shard: .whole, deletes: true)
        #expect(plan.deletions.isEmpty)
    }

    /// A `/` fused into one Character with a mark before it (U+0600 is a prepended mark) hid a `..` segment from a
    /// split by Characters; paths are split by bytes.
    @Test func aListingCannotHideADotDotSegmentInsideAGrapheme() {
        for path in ["x\u{600}/../escape", "x\u{600}/./y", "\u{301}/..", "a/\u{600}/", "/\u{301}x"] {
            #expect(!SyncPlan.isAddressable(path), "\(path.debugDescription)")
        }
        #expect(SyncPlan.isAddressable("x\u{600}/y\u{301}"))
        let destination: [SyncPlan.DestinationFile] = ["x\u{600}/../escape", "gone"]
            .map { .init(relativePath: $0, size: 1, modified: nil) }
        let plan = SyncPlan.make(
            selection: Self.selection([], listed: []), destination: destination, comparesChecksums: true,
            filter: UploadFilter(includes: [], excludes: []), shard: .whole, deletes: true)
        #expect(plan.deletions == ["gone"])
        #expect(plan.unaddressable == ["x\u{600}/../escape"])
    }

    /// An S3 listing's keys lose the destination's prefix by bytes. Cut by Characters, `p/\u{301}x` lost the grapheme
    /// `/\u{301}` with `p/` and became `x`, another file: `--delete` removed `p/x`, and the source's `\u{301}x` was
    /// sent again every run. A key that does not start with the prefix's bytes is neither compared nor deleted.
    @Test func anS3KeyLosesThePrefixByItsBytes() {
        #expect(SyncPlan.relativePath(ofKey: "p/\u{301}x", under: "p/") == "\u{301}x")
        #expect(SyncPlan.relativePath(ofKey: "p/a/b.txt", under: "p/") == "a/b.txt")
        #expect(SyncPlan.relativePath(ofKey: "x.txt", under: "") == "x.txt")
        #expect(SyncPlan.relativePath(ofKey: "q/x", under: "p/") == nil)
        let item = Self.item("\u{301}x", size: 1)
        let destination: [SyncPlan.DestinationFile] = ["p/\u{301}x", "p/x"].compactMap { key in
            SyncPlan.relativePath(ofKey: key, under: "p/").map { .init(relativePath: $0, size: 1, modified: nil) }
        }
        let plan = SyncPlan.make(
            selection: Self.selection([item]), destination: destination, comparesChecksums: true,
            filter: UploadFilter(includes: [], excludes: []), shard: .whole, deletes: true)
        #expect(plan.deletions == ["x"])
        #expect(plan.uploads.map { "\($0.item.relativePath) \($0.reason)" } == ["\u{301}x checksum"])
    }

    @Test func aShardDeletesOnlyWhatItOwns() {
        let gone = (0..<40).map { "gone\($0)" }
        let destination = gone.map { SyncPlan.DestinationFile(relativePath: $0, size: 1, modified: nil) }
        var deleted: [String] = []
        for index in 0..<3 {
            let shard = ShardAssignment(index: index, count: 3)
            let plan = SyncPlan.make(
                selection: Self.selection([]), destination: destination, comparesChecksums: true,
                filter: UploadFilter(includes: [], excludes: []), shard: shard, deletes: true)
            #expect(plan.deletions.allSatisfy { shard.owns(relativePath: $0) })
            deleted += plan.deletions
        }
        #expect(deleted.sorted() == gone.sorted(), "every path deleted by exactly one shard")
    }
}

/// PROPFIND's Multi-Status as nginx's dav-ext module writes it, and with other namespace prefixes.
@Suite struct WebDAVListingTests {
    @Test func nginxMultiStatusGivesFilesAndFoldersRelativeToTheBase() {
        let xml = """
            <?xml version="1.0" encoding="utf-8" ?>
            <D:multistatus xmlns:D="DAV:">
            <D:response><D:href>/dav/t/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype>\
            <D:getlastmodified>Fri, 27 Nov 2026 01:02:03 GMT</D:getlastmodified></D:prop>\
            <D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
            <D:response><D:href>/dav/t/with%20space.txt</D:href><D:propstat><D:prop><D:resourcetype></D:resourcetype>\
            <D:getcontentlength>12</D:getcontentlength>\
            <D:getlastmodified>Fri, 27 Nov 2026 01:02:03 GMT</D:getlastmodified></D:prop></D:propstat></D:response>
            <D:response><D:href>/dav/t/sub/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/>\
            </D:resourcetype></D:prop></D:propstat></D:response>
            </D:multistatus>
            """
        let entries = WebDAVFolder.parse(xml, basePath: "/dav/t/")
        #expect(entries.map(\.relativePath) == ["", "with space.txt", "sub"])
        #expect(entries.map(\.isFolder) == [true, false, true])
        #expect(entries[1].size == 12)
        #expect(entries[1].modified == 1_795_741_323)
    }

    @Test func otherPrefixesAndAbsoluteHrefsAreRead() {
        let xml = """
            <d:multistatus xmlns:d="DAV:"><d:response><d:href>http://example.com/dav/t/a/b.txt</d:href><d:propstat>\
            <d:prop><d:getcontentlength>3</d:getcontentlength></d:prop></d:propstat></d:response>\
            <d:response><d:href>/elsewhere/x</d:href></d:response></d:multistatus>
            """
        let entries = WebDAVFolder.parse(xml, basePath: "/dav/t/")
        #expect(entries == [.init(relativePath: "a/b.txt", isFolder: false, size: 3, modified: nil)])
    }

    /// sabre (behind Nextcloud and ownCloud) writes lower-case hex and escapes `+`, `'` and `,`; the folder was typed
    /// with upper-case hex, or with none. Before, hrefs were compared as encoded: every entry was dropped, the listing
    /// came back empty, and `curlew sync` sent everything again on every run.
    @Test(arguments: ["/dav/B%C3%BCcher/", "/dav/Bücher/", "/dav/B%c3%bccher"])
    func hrefsEncodedOtherwiseThanTheFolderAreStillUnderIt(basePath: String) {
        let entries = ["/dav/B%c3%bccher/", "/dav/B%c3%bccher/it%27s%2b1%2c2.txt", "/dav/B%c3%bccher/sub/"].map {
            href in
            "<d:response><d:href>\(href)</d:href><d:propstat><d:prop><d:getcontentlength>6</d:getcontentlength>"
                + "</d:prop></d:propstat></d:response>"
        }
        let xml = "<d:multistatus xmlns:d=\"DAV:\">" + entries.joined() + "</d:multistatus>"
        let parsed = WebDAVFolder.parse(xml, basePath: basePath)
        #expect(parsed.map(\.relativePath) == ["", "it's+1,2.txt", "sub"])
        #expect(parsed.map(\.isFolder) == [true, false, true])
    }

    /// The walk goes into the folders under the one it listed, compared by bytes: `hasPrefix` compares Characters,
    /// and `a/\u{301}b` starts with the grapheme `/\u{301}`, not `/`, so a subfolder named `\u{301}b` was never
    /// walked and its files never compared (sent again every run).
    @Test func aSubfolderWhoseNameStartsWithACombiningMarkIsWalked() {
        #expect(WebDAVFolder.isSubfolder("a/\u{301}b", of: "a"))
        #expect(WebDAVFolder.isSubfolder("\u{301}b", of: ""))
        #expect(WebDAVFolder.isSubfolder("a/b", of: "a"))
        #expect(!WebDAVFolder.isSubfolder("a", of: "a"))
        #expect(!WebDAVFolder.isSubfolder("", of: ""))
        #expect(!WebDAVFolder.isSubfolder("ab/c", of: "a"))
        #expect(!WebDAVFolder.isSubfolder("a\u{301}/c", of: "a"))
    }

    /// An href that starts again at a root after the base, by a second slash or an encoded one, is no path under the
    /// base: it is left out rather than read as `/…` (the fuzzer's `/dav/t//..../etc/passwd`).
    @Test func hrefsThatStartAgainAtARootAreLeftOut() {
        let entries = ["/dav/t//..../etc/passwd", "/dav/t/%2Fetc/passwd", "/dav/t/kept.txt"].map { href in
            "<D:response><D:href>\(href)</D:href><D:propstat><D:prop><D:getcontentlength>6</D:getcontentlength>"
                + "</D:prop></D:propstat></D:response>"
        }
        let xml = "<D:multistatus xmlns:D=\"DAV:\">" + entries.joined() + "</D:multistatus>"
        #expect(WebDAVFolder.parse(xml, basePath: "/dav/t/").map(\.relativePath) == ["kept.txt"])
    }
}
