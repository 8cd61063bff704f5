import CurlewTestSupport
import Foundation
import Glibc
import Testing

@testable import CurlewS3

/// What the upload and the S3 uploader see of a listed file: its version from `stat`, and whether it is still there.
@Suite struct UploadItemTests {
    /// 2300-01-01 and 2400-01-01 in seconds since 1970: past 2262-04-11, where nanoseconds overflow 64 bits, and
    /// within what ext4 keeps.
    static let year2300: Int = 10_413_792_000
    static let year2400: Int = 13_569_465_600

    static func setModified(_ path: String, seconds: Int, nanoseconds: Int = 0) {
        // Access and modification time alike (Swift does not see UTIME_OMIT, a macro).
        let time = timespec(tv_sec: seconds, tv_nsec: nanoseconds)
        let times = [time, time]
        #expect(utimensat(AT_FDCWD, path, times, 0) == 0, "utimensat: \(String(cString: strerror(errno)))")
    }

    static func listed(_ path: String) -> UploadItem? {
        UploadItem(relativePath: "f", absolutePath: path, size: 0, modifiedNanoseconds: 0).currentState()
    }

    /// `touch -d 2300-01-01`: before, the nanoseconds overflowed and the whole run trapped while listing. A later
    /// change of such a time at the same size is still a change.
    @Test func aFileModifiedAfter2262IsStatedAndAChangeOfItsTimeStillShows() throws {
        let tree = try SourceTree(prefix: "curlew-item-far-future")
        defer { tree.remove() }
        let path = try tree.write("f", Array("same size".utf8))
        Self.setModified(path, seconds: Self.year2300, nanoseconds: 5)
        let in2300 = try #require(Self.listed(path))
        Self.setModified(path, seconds: Self.year2300 + 1, nanoseconds: 5)
        let aSecondLater = try #require(Self.listed(path))
        Self.setModified(path, seconds: Self.year2400)
        let in2400 = try #require(Self.listed(path))
        #expect(in2300.version != aSecondLater.version)
        #expect(in2300.version != in2400.version)
        #expect(aSecondLater.version != in2400.version)
        // Still later than any copy a store could hold, so it is never taken as already sent.
        #expect(!in2300.mayBeHeld(byCopyModifiedAt: Date().timeIntervalSince1970 + 86_400 * 365 * 200))
        Self.setModified(path, seconds: 1_700_000_000, nanoseconds: 123)
        #expect(Self.listed(path)?.modifiedNanoseconds == 1_700_000_000_000_000_123, "an ordinary time is exact")
    }

    /// Times no file system here keeps (ext4 stops at 1901 and 2446): each side of the 64-bit range, whole seconds
    /// stay apart and on their own side of every representable time, and nothing traps.
    @Test func timesBeyondSixtyFourBitNanosecondsStayDistinctAndOrdered() {
        let last = Int64.max / 1_000_000_000
        let beyond = [last + 1, last + 2, 10_413_792_000, 13_569_465_600, Int64.max].map {
            UploadItem.nanoseconds(seconds: $0, nanoseconds: 999_999_999)
        }
        #expect(Set(beyond).count == beyond.count)
        #expect(beyond.allSatisfy { $0 >= last * 1_000_000_000 })
        let before = [-last - 1, -last - 2, -12_000_000_000, Int64.min].map {
            UploadItem.nanoseconds(seconds: $0, nanoseconds: 999_999_999)
        }
        #expect(Set(before).count == before.count)
        #expect(before.allSatisfy { $0 < -last * 1_000_000_000 })
        #expect(UploadItem.nanoseconds(seconds: -1, nanoseconds: 500_000_000) == -500_000_000)
    }

    /// A path listed as a file that has since become a FIFO (`rm f; mkfifo f`) or a folder is no longer the file:
    /// before, it counted as there, and opening the FIFO blocked the worker until something wrote to it.
    @Test func aFileReplacedByAFIFOOrAFolderIsNoLongerThere() throws {
        let tree = try SourceTree(prefix: "curlew-item-fifo")
        defer { tree.remove() }
        let path = try tree.write("f", Array("bytes".utf8))
        #expect(Self.listed(path) != nil)
        #expect(unlink(path) == 0)
        #expect(mkfifo(path, 0o644) == 0)
        let fifo = Self.listed(path)
        let fifoReason = errno
        #expect(fifo == nil)
        #expect(fifoReason == ENOENT)
        #expect(unlink(path) == 0)
        #expect(mkdir(path, 0o755) == 0)
        let folder = Self.listed(path)
        let folderReason = errno
        #expect(folder == nil)
        #expect(folderReason == EISDIR)
    }
}
