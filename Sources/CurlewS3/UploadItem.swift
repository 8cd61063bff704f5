import Foundation

#if canImport(Glibc)
package import Glibc
#elseif canImport(Musl)
package import Musl
#endif

/// One file to send: where it is, the name it gets on the server, and its size and modification time as listed.
///
/// Shared by the S3 uploader and the upload pipeline: both check that the file is still the one they listed, and
/// journal it by its relative path and version.
package struct UploadItem: Sendable, Hashable {
    /// `/`-separated, relative to the source directory (or as written in the manifest).
    package let relativePath: String
    package let absolutePath: String
    package let size: Int64
    package let modifiedNanoseconds: Int64

    package init(relativePath: String, absolutePath: String, size: Int64, modifiedNanoseconds: Int64) {
        self.relativePath = relativePath
        self.absolutePath = absolutePath
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
    }

    package init(relativePath: String, absolutePath: String, status: stat) {
        self.init(
            relativePath: relativePath, absolutePath: absolutePath, size: Int64(status.st_size),
            modifiedNanoseconds: Self.nanoseconds(
                seconds: Int64(status.st_mtim.tv_sec), nanoseconds: Int64(status.st_mtim.tv_nsec)))
    }

    /// A modification time in nanoseconds since 1970, exact from 1677-09-21 to 2262-04-11, where it fits in 64 bits.
    ///
    /// Outside that range (a file system such as ext4 or btrfs keeps such times, `touch -d 2300-01-01` sets one) it
    /// cannot be exact, and it must not trap: the listing of a whole run would stop at one odd file. It is not
    /// clamped to one value either, or a file changed from one such time to another at the same size would look
    /// unchanged to the journal. Instead the seconds, without their fraction, fall into the representable range's
    /// last (or first) second, whose 854,775,808 nanosecond values keep any two such whole seconds less than 27 years
    /// apart distinct. The value stays the latest (or earliest) representable, so it still reads as newer (or older) than any
    /// server copy and the age filters see the file as they would the true time; it is the same as a true time only
    /// within that one second of 2262 (or 1677).
    package static func nanoseconds(seconds: Int64, nanoseconds: Int64) -> Int64 {
        let (scaled, scaleOverflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (exact, addOverflow) = scaled.addingReportingOverflow(nanoseconds)
        if !scaleOverflow && !addOverflow { return exact }
        // Whole seconds either side of zero that fit, and the nanosecond values beyond them (854,775,808 each side).
        let lastWholeSecond = Int64.max / 1_000_000_000
        let band = UInt64(Int64.max - lastWholeSecond * 1_000_000_000) + 1
        if seconds > 0 {
            let beyond = UInt64(bitPattern: seconds &- lastWholeSecond) % band
            return lastWholeSecond * 1_000_000_000 + Int64(beyond)
        }
        let beyond = UInt64(bitPattern: -lastWholeSecond &- seconds) % band
        return -lastWholeSecond * 1_000_000_000 - Int64(beyond)
    }

    /// The size and modification time a journal records for it.
    package var version: FileVersion { FileVersion(size: size, modifiedNanoseconds: modifiedNanoseconds) }

    /// Whether a server's copy last modified at `serverModifiedSeconds` (an HTTP date: whole seconds since 1970) may
    /// hold the file as it is now: it was stored no earlier than the file's last change, to the second. A copy older
    /// than the file's content is an earlier version whatever its length. Within the file's own second the two
    /// cannot be told apart, as for rclone's one-second modify window on WebDAV.
    package func mayBeHeld(byCopyModifiedAt serverModifiedSeconds: Double) -> Bool {
        serverModifiedSeconds >= Double(modifiedNanoseconds / 1_000_000_000)
    }

    /// The file as it is now, to record exactly what was sent; nil if it is gone or no longer a regular file
    /// (`errno` says why: `EISDIR` for a directory, `ENOENT` for anything else that is not a regular file).
    ///
    /// A path listed as a regular file may since have become a FIFO or a device (`rm f; mkfifo f`): opening one
    /// may block for ever and reading it never gives the listed bytes, so it counts as the file having gone.
    package func currentState() -> UploadItem? {
        var status = stat()
        guard stat(absolutePath, &status) == 0 else { return nil }
        guard status.st_mode & S_IFMT == S_IFREG else {
            errno = status.st_mode & S_IFMT == S_IFDIR ? EISDIR : ENOENT
            return nil
        }
        return UploadItem(relativePath: relativePath, absolutePath: absolutePath, status: status)
    }
}

/// A file's size and modification time: what tells a journal that the file is still the one it recorded.
package struct FileVersion: Sendable, Hashable {
    package let size: Int64
    package let modifiedNanoseconds: Int64

    package init(size: Int64, modifiedNanoseconds: Int64) {
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
    }
}

/// A multipart upload an earlier run started and did not finish or abort.
package struct S3MultipartProgress: Sendable, Equatable {
    package let file: FileVersion
    package let partSize: Int64
    package let uploadID: String
    package var parts: [Int: CompletedPart] = [:]

    package init(file: FileVersion, partSize: Int64, uploadID: String, parts: [Int: CompletedPart] = [:]) {
        self.file = file
        self.partSize = partSize
        self.uploadID = uploadID
        self.parts = parts
    }
}

/// Where the S3 uploader records what the store accepted, so a run killed at any moment resumes a file from its
/// next missing part. The upload pipeline's journal is one; nil journals nothing (nothing resumes).
package protocol S3UploadJournal: Sendable {
    /// Records a file the store holds whole.
    func record(_ item: UploadItem)
    /// Records that a single PUT of the file starts.
    func recordSending(_ item: UploadItem)
    /// Whether an earlier run was sending this file, as it is now, in a single PUT when it stopped.
    func wasInFlight(_ item: UploadItem) -> Bool
    /// The multipart upload an earlier run left for this file as it is now, if any.
    func multipartUpload(of item: UploadItem) -> S3MultipartProgress?
    /// The multipart upload an earlier run left for an earlier version of this file (it changed since), if any: its
    /// parts hold other bytes, so it is aborted rather than forgotten (an unfinished upload is billed for ever).
    func staleMultipartUpload(of item: UploadItem) -> S3MultipartProgress?
    /// Records that a multipart upload of the file was created.
    func recordMultipartStart(_ item: UploadItem, uploadID: String, partSize: Int64)
    /// Records a part the store accepted, as soon as it did.
    func recordPart(_ item: UploadItem, uploadID: String, part: CompletedPart)
    /// Records that a multipart upload was aborted: its parts are gone.
    func recordAbort(_ item: UploadItem, uploadID: String)
}
