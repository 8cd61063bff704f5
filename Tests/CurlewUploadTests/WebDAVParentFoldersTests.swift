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

    /// What one run of `x/y.txt` alone did, as the server saw it.
    struct OneFileRun {
        let summary: UploadSummary
        /// The run's folder on the server (`/dav-strict/run-…`), removed by now.
        let folderPath: String
        let putStatuses: [Int]
        let mkcolStatuses: [Int]
        /// Whether the server stored the file whole.
        let stored: Bool

        var failure: String { summary.failures.first?.error ?? "" }
    }

    /// `x/y.txt` alone, one worker, to a new target at `location` that `prepare` may set up first; read back once
    /// the server has logged `puts` PUTs.
    static func uploadOneFile(
        to location: DavTarget.Location, puts: Int, prepare: (DavTarget) throws -> Void = { _ in }
    ) async throws -> OneFileRun {
        let target = DavTarget(wsgidav: try await WsgiDAVServer.shared(), location: location)
        defer { target.remove() }
        try prepare(target)
        let (summary, tree) = try await upload(["x/y.txt"], to: target, concurrency: 1)
        tree.remove()
        try await waitUntil(timeout: .seconds(10), "the server to log \(puts) PUTs") {
            target.loggedRequests(method: "PUT").count >= puts
        }
        let stored = FileManager.default.contents(atPath: target.storedPath("x/y.txt")).map { Array($0) }
        return OneFileRun(
            summary: summary, folderPath: "/\(location.rawValue)/\(target.folder)",
            putStatuses: target.loggedRequests(method: "PUT").map(\.status),
            mkcolStatuses: target.loggedRequests(method: "MKCOL").map(\.status),
            stored: stored == SourceTree.content(for: "x/y.txt", size: 100 + "x/y.txt".utf8.count))
    }

    /// The run's own folder made on the server's disk, so that only the file's folder is missing.
    static func makeRunFolder(of target: DavTarget) throws {
        try FileManager.default.createDirectory(
            atPath: target.scratchDirectory + "/\(target.folder)", withIntermediateDirectories: true)
    }

    /// A folder the server will not make: the file fails with the PUT's 409 and MKCOL's answer, sent once.
    @Test func aFolderTheServerWillNotMakeFailsTheFileWithBothAnswers() async throws {
        let run = try await Self.uploadOneFile(to: .strictWithoutMKCOL, puts: 1)
        #expect(run.summary.uploaded == 0 && !run.stored)
        #expect(run.failure.hasPrefix("HTTP 409"), "\(run.failure)")
        #expect(run.failure.contains("its folder could not be made: MKCOL \(run.folderPath)/x/ answered 403"))
        #expect(run.putStatuses == [409])
        #expect(run.mkcolStatuses == [403])
    }

    /// A 409 about the file itself (here a file stands where its folder would be): MKCOL finds the path taken (405),
    /// so nothing is made; the file is sent once more (the folder might have been made meanwhile) and fails with
    /// the PUT's own answer.
    @Test func aConflictThatIsNotAboutAMissingFolderFailsAfterOneMoreTry() async throws {
        let run = try await Self.uploadOneFile(to: .strict, puts: 2) { target in
            try Self.makeRunFolder(of: target)
            try Data("a file where a folder would be".utf8).write(to: URL(fileURLWithPath: target.storedPath("x")))
        }
        #expect(run.summary.uploaded == 0)
        #expect(run.failure.hasPrefix("HTTP 409") && !run.failure.contains("could not be made"), "\(run.failure)")
        #expect(run.putStatuses == [409, 409])
        #expect(run.mkcolStatuses == [405])
        #expect(run.summary.retries == 0)
    }

    /// Another run sharing the destination (a shard) makes the folder between this run's PUT and its MKCOL: MKCOL
    /// finds it there (405), and the file is sent again and stored.
    @Test func aFolderAnotherRunMakesMeanwhileStillGetsTheFile() async throws {
        let run = try await Self.uploadOneFile(to: .strictRacing, puts: 2)
        #expect(run.summary.failures.isEmpty, "\(run.summary.failures)")
        #expect(run.summary.uploaded == 1 && run.stored)
        #expect(run.putStatuses == [409, 201])
        #expect(run.mkcolStatuses == [405])
    }

    /// An MKCOL that fails in a way worth retrying (503) is not the file's end: the next attempt sends the file,
    /// meets the 409 again, makes the folder and stores the file.
    /// The next attempt makes the folder before its PUT: the body is sent into the missing folder once, not once
    /// per attempt.
    @Test func aFolderWhoseMKCOLFailsOnceIsMadeOnTheNextAttempt() async throws {
        let run = try await Self.uploadOneFile(to: .strictWithFlakyMKCOL, puts: 2, prepare: Self.makeRunFolder)
        #expect(run.summary.failures.isEmpty, "\(run.summary.failures)")
        #expect(run.summary.uploaded == 1 && run.stored)
        #expect(run.summary.retries == 1)
        #expect(run.putStatuses == [409, 201])
        #expect(run.mkcolStatuses == [503, 201])
    }

    /// Every attempt's MKCOL fails in a way worth retrying: the body goes once (the first PUT's 409), and the
    /// file fails with the last MKCOL's answer.
    @Test func aFolderWhoseMKCOLKeepsFailingCostsTheBodyOnce() async throws {
        let run = try await Self.uploadOneFile(to: .strictWithFailingMKCOL, puts: 1, prepare: Self.makeRunFolder)
        #expect(run.summary.uploaded == 0 && !run.stored)
        #expect(run.putStatuses == [409])
        // The default two retries: three MKCOLs, one per attempt.
        #expect(run.mkcolStatuses == [503, 503, 503])
        #expect(run.summary.retries == 2)
        #expect(
            run.failure.contains("its folder could not be made: MKCOL \(run.folderPath)/x/ answered 503"),
            "\(run.failure)")
    }

    /// Two runs sharing the destination send the MKCOL of one folder at once, and WsgiDAV answers the loser 500: the
    /// MKCOL is sent once more, finds the folder (405), and the file is sent again and stored.
    @Test func anMKCOLLostToAnotherRunIsSentOnceMore() async throws {
        let run = try await Self.uploadOneFile(to: .strictMKCOLRace, puts: 2, prepare: Self.makeRunFolder)
        #expect(run.summary.failures.isEmpty, "\(run.summary.failures)")
        #expect(run.summary.uploaded == 1 && run.stored)
        #expect(run.putStatuses == [409, 201])
        #expect(run.mkcolStatuses == [500, 405])
        #expect(run.summary.statusCodes == ["201": 1, "405": 1, "409": 1, "500": 1])
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
