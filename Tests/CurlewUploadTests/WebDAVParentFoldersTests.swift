import CurlewEngine
import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewUpload

/// PUTs to servers that do not make the folders a path names (RFC 4918 §9.7.1: 409 Conflict; WsgiDAV here), and to
/// one that does (nginx), checked on the server's side: its access log and its disk.
@Suite struct WebDAVParentFoldersTests {
    static let files = ["a/b/one.txt", "a/two.txt", "c d/ü.txt", "three.txt"]

    static func upload(
        _ names: [String], to target: DavTarget, concurrency: Int
    ) async throws -> (summary: UploadSummary, tree: SourceTree) {
        let tree = try SourceTree(prefix: "curlew-parent-folders")
        for name in names { try tree.write(name, SourceTree.content(for: name, size: 100 + name.utf8.count)) }
        var configuration = UploadConfiguration(source: .folder(tree.root), destination: .put(baseURL: target.url))
        configuration.concurrency = concurrency
        let client = CurlewClient()
        let summary = try await Upload(configuration, client: client).run()
        await client.shutdown()
        return (summary, tree)
    }

    static func expectStored(_ names: [String], in target: DavTarget) {
        for name in names {
            let stored = FileManager.default.contents(atPath: target.storedPath(name)).map { Array($0) }
            #expect(stored == SourceTree.content(for: name, size: 100 + name.utf8.count), "\(name) on the server")
        }
    }

    /// The first file meets the 409; its folders are made from the first one there inwards, and every later file
    /// whose folder is new has it made before it is sent, so only that first file is sent twice.
    @Test func aServerThatDoesNotMakeFoldersGetsThemByMKCOLAndEachFileOnce() async throws {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: .strict)
        let (summary, tree) = try await Self.upload(Self.files, to: target, concurrency: 1)
        defer {
            tree.remove()
            target.remove()
        }
        #expect(summary.failures.isEmpty, "\(summary.failures)")
        #expect(summary.uploaded == Self.files.count)
        Self.expectStored(Self.files, in: target)
        try await waitUntil(timeout: .seconds(10), "the server to log every PUT") {
            target.loggedRequests(method: "PUT").count >= Self.files.count + 1
        }
        let puts = target.loggedRequests(method: "PUT")
        #expect(puts.map(\.status) == [409, 201, 201, 201, 201])
        #expect(puts.map(\.path) == ["a/b/one.txt"] + Self.files)
        let folders = target.loggedRequests(method: "MKCOL")
        #expect(folders.map(\.status) == [409, 409, 201, 201, 201, 201])
        #expect(folders.map(\.path) == ["a/b/", "a/", "", "a/", "a/b/", "c d/"])
        #expect(summary.statusCodes == ["201": 8, "409": 3])
    }

    /// Many files at once into new folders: each lands once, whole, whichever worker makes their folders.
    @Test func concurrentFilesIntoNewFoldersEachLandOnce() async throws {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: .strict)
        let names = (0..<48).map { "f\($0 % 4)/g\($0 % 3)/file \($0).txt" }
        let (summary, tree) = try await Self.upload(names, to: target, concurrency: 8)
        defer {
            tree.remove()
            target.remove()
        }
        #expect(summary.failures.isEmpty, "\(summary.failures.prefix(3))")
        Self.expectStored(names, in: target)
        try await waitUntil(timeout: .seconds(10), "the server to log every PUT") {
            target.loggedRequests(method: "PUT").filter { $0.status == 201 }.count >= names.count
        }
        let stored = target.loggedRequests(method: "PUT").filter { $0.status == 201 }.map(\.path)
        #expect(stored.sorted() == names.sorted(), "each file stored once")
    }

    /// A folder the server will not make: the file fails with the PUT's 409 and MKCOL's answer, sent once.
    @Test func aFolderTheServerWillNotMakeFailsTheFileWithBothAnswers() async throws {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: .strictWithoutMKCOL)
        let (summary, tree) = try await Self.upload(["x/y.txt"], to: target, concurrency: 1)
        defer {
            tree.remove()
            target.remove()
        }
        #expect(summary.uploaded == 0)
        let reason = summary.failures.first?.error ?? ""
        #expect(reason.hasPrefix("HTTP 409"), "\(reason)")
        #expect(reason.contains("its folder could not be made: MKCOL /dav-no-mkcol/\(target.folder)/x/ answered 403"))
        try await waitUntil(timeout: .seconds(10), "the server to log the MKCOL") {
            !target.loggedRequests(method: "MKCOL").isEmpty
        }
        #expect(target.loggedRequests(method: "PUT").map(\.status) == [409])
        #expect(target.loggedRequests(method: "MKCOL").map(\.status) == [403])
    }

    /// A 409 about the file itself (here a file stands where its folder would be): MKCOL finds the path taken (405),
    /// so nothing is made and the file is not sent again.
    @Test func aConflictThatIsNotAboutAMissingFolderSendsTheFileOnce() async throws {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: .strict)
        try FileManager.default.createDirectory(
            atPath: target.scratchDirectory + "/\(target.folder)", withIntermediateDirectories: true)
        try Data("a file where a folder would be".utf8).write(to: URL(fileURLWithPath: target.storedPath("x")))
        let (summary, tree) = try await Self.upload(["x/y.txt"], to: target, concurrency: 1)
        defer {
            tree.remove()
            target.remove()
        }
        #expect(summary.uploaded == 0)
        let reason = summary.failures.first?.error ?? ""
        #expect(reason.hasPrefix("HTTP 409") && !reason.contains("folder could not be made"), "\(reason)")
        try await waitUntil(timeout: .seconds(10), "the server to log the MKCOL") {
            !target.loggedRequests(method: "MKCOL").isEmpty
        }
        #expect(target.loggedRequests(method: "PUT").map(\.status) == [409])
        #expect(target.loggedRequests(method: "MKCOL").map(\.status) == [405])
    }

    /// A server that makes folders itself is never sent an MKCOL.
    @Test func aServerThatMakesFoldersIsSentNoMKCOL() async throws {
        let target = DavTarget(nginx: try await NginxServer.shared())
        let (summary, tree) = try await Self.upload(Self.files, to: target, concurrency: 2)
        defer {
            tree.remove()
            target.remove()
        }
        #expect(summary.failures.isEmpty, "\(summary.failures)")
        Self.expectStored(Self.files, in: target)
        try await waitUntil(timeout: .seconds(10), "the server to log every PUT") {
            target.loggedRequests(method: "PUT").count >= Self.files.count
        }
        #expect(target.loggedRequests(method: "PUT").map(\.status) == Array(repeating: 201, count: Self.files.count))
        #expect(target.loggedRequests(method: "MKCOL").isEmpty)
    }

    @Test func theFoldersAboveAFileRunFromTheServersRootToTheFilesOwn() async {
        let client = CurlewClient()
        let folders = WebDAVParentFolders(
            folder: WebDAVFolder(baseURL: "http://h:1/base%20dir/sub?token=t", client: client, headers: []))
        #expect(
            folders.folderPaths(above: "a b/c/d.txt")
                == ["/base%20dir/", "/base%20dir/sub/", "/base%20dir/sub/a%20b/", "/base%20dir/sub/a%20b/c/"])
        #expect(folders.folderPaths(above: "top.txt") == ["/base%20dir/", "/base%20dir/sub/"])
        await client.shutdown()
    }
}
