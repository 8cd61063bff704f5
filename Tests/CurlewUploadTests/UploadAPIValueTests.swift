import CurlewS3
import CurlewUpload
import Testing

/// The upload libraries' open sets are structs: written like enum cases, read back with `==`, properties and a
/// stable `name`.
@Suite struct UploadAPIValueTests {
    @Test func sourcesReadBackTheirPath() {
        let folder = UploadSource.folder("/data/photos")
        #expect(folder == .folder("/data/photos") && folder != .manifest("/data/photos"))
        #expect(folder.folder == "/data/photos" && folder.manifest == nil && folder.name == "folder")
        #expect(UploadSource.manifest("/m.txt").manifest == "/m.txt" && UploadSource.manifest("/m.txt").folder == nil)
        #expect("\(folder)" == #"folder("/data/photos")"#)
    }

    @Test func destinationsReadBackTheirSettings() {
        let put = UploadDestination.put(baseURL: "http://x/up/")
        #expect(put.baseURL == "http://x/up/" && put.multipartForm == nil && put.s3 == nil && put.name == "put")
        let form = UploadDestination.multipartForm(url: "http://x/form", fields: [("a", "1")])
        #expect(form.baseURL == nil && form.multipartForm?.url == "http://x/form" && form.name == "multipartForm")
        #expect(form.multipartForm?.fields.map(\.name) == ["a"])
        #expect(UploadDestination.multipartForm(url: "http://x/").multipartForm?.fields.isEmpty == true)
    }

    @Test func checksumHeadersAreNamed() {
        #expect(UploadChecksumHeader(name: "md5") == .md5 && UploadChecksumHeader(name: "sha256") == .sha256)
        #expect(UploadChecksumHeader(name: "crc32c") == nil)
        #expect(UploadChecksumHeader.md5.name == "md5" && "\(UploadChecksumHeader.sha256)" == "sha256")
    }

    @Test func kindsAndOutcomesAreNamed() {
        #expect(UploadError.Kind.journal.name == "journal" && UploadError.Kind.journal != .unreadableSource)
        #expect(S3FileUpload.uploaded.name == "uploaded" && S3FileUpload.alreadyThere != .uploaded)
    }
}
