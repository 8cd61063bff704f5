import CurlewUpload
import Testing

@Suite struct FolderURLTests {
    @Test(arguments: [
        ("https://dav.example/photos/", "https://dav.example/photos/", ""),
        ("https://dav.example/photos", "https://dav.example/photos/", ""),
        ("https://dav.example", "https://dav.example/", ""),
        ("https://dav.example?token=t", "https://dav.example/", "?token=t"),
        ("https://u:p@dav.example/photos?token=t&x=1", "https://u:p@dav.example/photos/", "?token=t&x=1"),
        ("https://dav.example/photos/?token=t#part", "https://dav.example/photos/", "?token=t"),
        // A `?` after the `#` belongs to the fragment, which is never sent.
        ("https://dav.example/photos#frag?x=1", "https://dav.example/photos/", ""),
        ("http://[::1]:8080/dav?token=t", "http://[::1]:8080/dav/", "?token=t"),
        ("https://u:p@dav.example/up/", "https://u:p@dav.example/up/", ""),
    ])
    func theFolderEndsWithASlashAndKeepsItsQueryApart(url: String, folder: String, query: String) {
        let folderURL = FolderURL(url)
        #expect(folderURL.folder == folder)
        #expect(folder.hasSuffix(folderURL.path) && folderURL.path.hasPrefix("/") && folderURL.path.hasSuffix("/"))
        #expect(folderURL.query == query)
        #expect(folderURL.url == folder + query)
    }

    @Test func aFilesPathGoesBeforeTheFoldersQuery() {
        let folderURL = FolderURL("https://dav.example/up?api_key=k")
        #expect(folderURL.appending("dir/a b.txt") == "https://dav.example/up/dir/a%20b.txt?api_key=k")
        #expect(folderURL.appending("dir", isFolder: true) == "https://dav.example/up/dir/?api_key=k")
        #expect(FolderURL("https://dav.example/up/").appending("a.txt") == "https://dav.example/up/a.txt")
    }

    @Test(arguments: [
        ("https://dav.example/a/b", "https://dav.example/a/?"),
        ("https://dav.example/a/b/", "https://dav.example/a/?"),
        ("https://dav.example/a/b.txt?token=t", "https://dav.example/a/?token=t"),
        ("https://dav.example/b.txt", "https://dav.example/?"),
        ("https://u:p@dav.example/a/b#frag", "https://u:p@dav.example/a/?"),
        ("https://dav.example/", nil),
        ("https://dav.example", nil),
    ])
    func theParentHoldsWhatTheURLNames(url: String, parentAndQuery: String?) {
        let parent = FolderURL(parentOf: url)
        #expect(parent.map { $0.folder + "?" + $0.query.dropFirst() } == parentAndQuery)
    }
}
