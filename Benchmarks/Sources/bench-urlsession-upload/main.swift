// FoundationNetworking URLSession uploading one file (S4 only): upload(for:fromFile:), the file streamed by
// swift-corelibs-foundation (no multipart, no request compression on Linux).
//
// seconds: from upload() to the complete response, measured here.
import BenchSupport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let options = UploadOptions.parseOrExit()
guard options.mode == .raw else {
    printError("bench-urlsession-upload: URLSession has no multipart forms and no request compression")
    exitProcess(2)
}
guard let fileBytes = fileSize(options.file), let url = URL(string: options.url) else {
    printError("bench-urlsession-upload: cannot stat \(options.file) or bad URL")
    exitProcess(2)
}

let configuration = URLSessionConfiguration.ephemeral
configuration.timeoutIntervalForRequest = 300
let session = URLSession(configuration: configuration)
var request = URLRequest(url: url)
request.httpMethod = options.method
request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")

var status = 0
var server: Int64?
var failure: String?
let start = ContinuousClock.now
do {
    let (data, response) = try await session.upload(for: request, fromFile: URL(fileURLWithPath: options.file))
    status = (response as? HTTPURLResponse)?.statusCode ?? 0
    server = serverByteCount(data)
} catch {
    failure = "\(error)"
}
let elapsed = seconds(since: start)

session.invalidateAndCancel()
finishUpload(
    client: "urlsession", options: options, status: status, seconds: elapsed, fileBytes: fileBytes,
    sentBytes: nil, serverBytes: server, error: failure)
