import CurlewTestSupport
import Foundation
import Testing

@testable import CurlewUpload

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite struct UploadSourceTests {
    /// `path` as the bytes the kernel takes, so a name that is not UTF-8 can be made.
    static func withRawPath<T>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        (path + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    static func writeRawFile(_ path: [UInt8], _ text: String) throws {
        let descriptor = withRawPath(path) { open($0, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        #expect(write(descriptor, bytes, bytes.count) == bytes.count)
    }

    /// Decoded with U+FFFD, `a<0xFF>.txt` read as `a\u{FFFD}.txt`: the file of that name was listed twice and the
    /// other never sent, and a folder so named failed as unreadable. Such names are now problems of their own.
    @Test func aNameThatIsNotUTF8IsAProblemAndNeverStandsForAnotherFile() throws {
        let tree = try SourceTree(prefix: "curlew-not-utf8")
        let root = Array(tree.root.utf8)
        let rawFile = root + Array("/a".utf8) + [0xFF] + Array(".txt".utf8)
        let rawFolder = root + Array("/d".utf8) + [0xFE]
        let rawInner = rawFolder + Array("/inner.txt".utf8)
        defer {
            _ = Self.withRawPath(rawFile) { unlink($0) }
            _ = Self.withRawPath(rawInner) { unlink($0) }
            _ = Self.withRawPath(rawFolder) { rmdir($0) }
            tree.remove()
        }
        try tree.write("a\u{FFFD}.txt", Array("named with U+FFFD".utf8))
        try tree.write("ok.txt", [1, 2, 3])
        try Self.writeRawFile(rawFile, "named with 0xFF")
        #expect(Self.withRawPath(rawFolder) { mkdir($0, 0o755) } == 0)
        try Self.writeRawFile(rawInner, "inside a folder named with 0xFE")

        let listing = try UploadSource.folder(tree.root).list()
        #expect(listing.items.map(\.relativePath) == ["a\u{FFFD}.txt", "ok.txt"])
        #expect(listing.items.first?.size == Int64("named with U+FFFD".utf8.count))
        #expect(listing.problems.map(\.relativePath).sorted() == ["a\u{FFFD}.txt", "d\u{FFFD}"])
        #expect(listing.problems.allSatisfy { $0.reason == UploadSource.notUTF8 }, "\(listing.problems)")
    }

    @Test func aManifestLineThatIsNotUTF8IsAProblem() throws {
        let tree = try SourceTree(prefix: "curlew-not-utf8-manifest")
        defer { tree.remove() }
        try tree.write("ok.txt", [1, 2, 3])
        try tree.write("b\u{FFFD}.txt", [4])
        let manifest = tree.root + "/files.txt"
        try Data(Array("ok.txt\nb".utf8) + [0xFF] + Array(".txt\n".utf8)).write(to: URL(fileURLWithPath: manifest))
        let listing = try UploadSource.manifest(manifest).list()
        #expect(listing.items.map(\.relativePath) == ["ok.txt"])
        #expect(listing.problems.map(\.relativePath) == ["b\u{FFFD}.txt"])
        #expect(listing.problems.first?.reason == UploadSource.notUTF8)
    }

    /// `/\u{301}x` is an absolute path whose first segment starts with a combining accent. `hasPrefix("/")` compares
    /// Characters, and `/\u{301}` is one Character that is not `/`: the line was read as relative, from the
    /// manifest's folder, and sent that folder's `\u{301}x` (another file) in its place.
    @Test func aManifestLineStartingWithASlashIsAbsoluteWhateverFollowsTheSlash() throws {
        let tree = try SourceTree(prefix: "curlew-manifest-combining")
        defer { tree.remove() }
        let name = "\u{301}curlew-\(UUID().uuidString)"
        try tree.write(name, Array("the manifest's folder, not the file the line names".utf8))
        let manifest = tree.root + "/files.txt"
        try Data(("/" + name + "\n").utf8).write(to: URL(fileURLWithPath: manifest))
        let listing = try UploadSource.manifest(manifest).list()
        #expect(listing.items.isEmpty, "read from the manifest's folder: \(listing.items.map(\.absolutePath))")
        #expect(listing.problems.map(\.relativePath) == [name], "/\(name) does not exist")
    }

    /// Two manifest lines naming `café` in NFC and in NFD name two files on Linux and two objects on the server;
    /// compared as `String`s, the second was taken for the first's name given to another file, and not sent.
    @Test func manifestNamesThatDifferOnlyInUnicodeNormalizationAreTwoFiles() throws {
        let tree = try SourceTree(prefix: "curlew-manifest-twins")
        defer { tree.remove() }
        let composed = "caf\u{E9}.txt"
        let decomposed = "cafe\u{301}.txt"
        try tree.write(composed, [1])
        try tree.write(decomposed, [2])
        try #require(UploadSource.folder(tree.root).list().items.count == 2, "two files on disk")
        let manifest = tree.root + "/files.txt"
        try Data((composed + "\n" + decomposed + "\n").utf8).write(to: URL(fileURLWithPath: manifest))
        let listing = try UploadSource.manifest(manifest).list()
        #expect(listing.problems.isEmpty, "\(listing.problems)")
        #expect(listing.items.map { Array($0.relativePath.utf8) } == [Array(composed.utf8), Array(decomposed.utf8)])
        #expect(listing.items.map(\.size) == [1, 1])
    }
}
