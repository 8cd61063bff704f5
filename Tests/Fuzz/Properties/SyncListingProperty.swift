import CurlewEngine
import CurlewSharding
import Foundation

@testable import CurlewS3
@testable import CurlewUpload

/// What `curlew sync` reads from a destination (a WebDAV Multi-Status, an S3 ListObjectsV2 page) and what it then
/// decides (`SyncPlan`): the one place where a server's listing turns into deletions.
///
/// A Multi-Status written from random entries (names of any bytes, percent-encoded per segment) reads back as those
/// entries; any bytes at all parse without a crash into paths under the base. From random source and destination
/// sets, the plan sends or leaves every selected file exactly once, and deletes only addressable destination paths
/// that the source never listed, that the patterns admit and that the shard owns: never a path with an empty, `.`
/// or `..` segment, whatever the listing said.
enum SyncListingProperty {
    @Sendable static func check(_ bytes: [UInt8]) -> String? {
        var input = FuzzInput(bytes)
        if let failure = roundTrip(&input) { return failure }
        if let failure = plan(&input) { return failure }
        // Whatever is left, as a server's body: no crash, and every path relative to the base.
        let raw = String(decoding: input.rest(), as: UTF8.self)
        for entry in WebDAVFolder.parse(raw, basePath: "/dav/t/")
        where entry.relativePath.utf8.first == UInt8(ascii: "/") {
            return "a listed path escaped the base: \(entry.relativePath.debugDescription)"
        }
        _ = S3XML.parseObjectListing(raw)
        return nil
    }

    private static func name(_ input: inout FuzzInput) -> String {
        let segments = 1 + input.number(below: 3)
        return (0..<segments).map { _ in
            // Every `/` scalar, also one fused with a combining mark after it into one Character (which
            // `replacingOccurrences` leaves alone): a segment never holds a slash.
            let scalars = input.text().unicodeScalars.map { $0 == "/" ? "_" : $0 }
            let text = String(String.UnicodeScalarView(scalars))
            return text.isEmpty || text == "." || text == ".." ? "n\(input.byte())" : text
        }.joined(separator: "/")
    }

    private static func roundTrip(_ input: inout FuzzInput) -> String? {
        var expected: [String: Int64] = [:]
        var xml =
            "<D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>/dav/t/</D:href><D:propstat><D:prop>"
            + "<D:resourcetype><D:collection/></D:resourcetype></D:prop></D:propstat></D:response>"
        for _ in 0..<input.number(below: 5) {
            let path = name(&input)
            // XML cannot carry every control character: such names are left to the raw-bytes part.
            guard !path.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "\u{FFFD}" }) else { continue }
            let size = Int64(input.number(below: 1 << 16))
            expected[path] = size
            xml +=
                "<D:response><D:href>/dav/t/\(PercentEncoding.encodeEachSegment(of: path))</D:href><D:propstat>"
                + "<D:prop><D:resourcetype></D:resourcetype><D:getcontentlength>\(size)</D:getcontentlength>"
                + "</D:prop></D:propstat></D:response>"
        }
        xml += "</D:multistatus>"
        let files = WebDAVFolder.parse(xml, basePath: "/dav/t/").filter { !$0.isFolder }
        var read: [String: Int64] = [:]
        for file in files { read[file.relativePath] = file.size }
        return read == expected ? nil : "wrote \(expected), read \(read)"
    }

    private static func plan(_ input: inout FuzzInput) -> String? {
        // Hostile names too: a `..` behind a prepended mark fused with its `/` into one Character (U+0600), and a
        // `/` fused with the combining mark after it.
        let hostile = ["../escape", "a//b", "x\u{600}/../escape", "/\u{301}x"]
        let pool = (0..<8).map { index in index >= 4 ? hostile[index - 4] : "f\(index)" }
        var source: [UploadItem] = []
        var listed = Set<String>()
        var destination: [SyncPlan.DestinationFile] = []
        for path in pool {
            let bits = input.byte()
            if bits & 1 == 1 && SyncPlan.isAddressable(path) {
                listed.insert(path)
                if bits & 2 == 0 {
                    source.append(
                        UploadItem(
                            relativePath: path, absolutePath: "/src/" + path, size: Int64(bits >> 4),
                            modifiedNanoseconds: Int64(input.byte()) * 1_000_000_000))
                }
            }
            if bits & 4 == 4 {
                destination.append(.init(relativePath: path, size: Int64(bits >> 5), modified: Double(input.byte())))
            }
        }
        var listing = UploadListing()
        listing.items = source
        var selection = UploadSelection(
            listing: listing, listedBeforeSharding: source.count, ownedByShard: source.count, excluded: 0,
            journalPath: nil)
        selection.listedPaths = Set(listed.map(ExactPath.init))
        let excludes = input.byte() & 1 == 1 ? ["f1"] : []
        let count = 1 + input.number(below: 3)
        let shard = ShardAssignment(index: input.number(below: count), count: count)
        let plan = SyncPlan.make(
            selection: selection, destination: destination, comparesChecksums: input.byte() & 1 == 1,
            filter: UploadFilter(includes: [], excludes: excludes), shard: shard, deletes: true)
        let decided = plan.uploads.map(\.item.relativePath) + plan.unchanged.map(\.item.relativePath)
        if decided.sorted() != source.map(\.relativePath).sorted() {
            return "source \(source.map(\.relativePath)) decided as \(decided)"
        }
        for path in plan.deletions {
            // Byte by byte, independently of `isAddressable`, which splits the same way as the plan.
            let segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            if path.isEmpty
                || segments.contains(where: { $0.isEmpty || $0.elementsEqual(".".utf8) || $0.elementsEqual("..".utf8) })
            {
                return "deletes the unaddressable \(path.debugDescription)"
            }
            if listed.contains(path) { return "deletes \(path), which the source lists" }
            if excludes.contains(path) { return "deletes the excluded \(path)" }
            if !shard.owns(relativePath: path) { return "shard \(shard) deletes \(path), another's" }
            if !destination.contains(where: { $0.relativePath == path }) {
                return "deletes \(path), not on the destination"
            }
        }
        return nil
    }
}
