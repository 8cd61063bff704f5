// The Curlew engine uploading one file (S4-S6): CurlewClient with the default configuration, the request
// run by a task that prefers the client's loop executor (as bench-curlew --mode executor).
//
//   --mode raw        body: .file(.path(file))                              (pread, Content-Length)
//   --mode multipart  body: .multipart(form) with a=1, b=2 and the file     (lazily encoded, Content-Length)
//   --mode gzip       body: .file(.path(file)), bodyCompression .gzip(level) (zlib on the fly, chunked)
//
// seconds: from execute() to the complete response, measured here.
import ArgumentParser
import BenchSupport
import CurlewEngine
import HTTPTypes

let options = UploadOptions.parseOrExit()
let name = "curlew-engine"
guard let fileBytes = fileSize(options.file) else {
    printError("bench-curlew-upload: cannot stat \(options.file)")
    exitProcess(2)
}
guard let method = HTTPRequest.Method(options.method) else {
    printError("bench-curlew-upload: bad method \(options.method)")
    exitProcess(2)
}

var request: CurlewRequest
do {
    request = try CurlewRequest(method: method, url: options.url)
    switch options.mode {
    case .raw:
        request.body = .file(.path(options.file))
        try request.setHeader("Content-Type", "application/octet-stream")
    case .multipart:
        var form = MultipartForm()
        form.append(value: "1", forKey: "a")
        form.append(value: "2", forKey: "b")
        form.append(fileAt: options.file, forKey: "file", mimeType: "application/octet-stream")
        request.body = .multipart(form)
    case .gzip:
        request.body = .file(.path(options.file))
        request.bodyCompression = .gzip(level: options.level)
        try request.setHeader("Content-Type", "application/x-ndjson")
    }
} catch {
    printError("bench-curlew-upload: bad request: \(error)")
    exitProcess(2)
}

let client = CurlewClient()
let executors = client.executors
if executors.isEmpty {
    printError("bench-curlew-upload: client.executors is empty (the thread event loop is expected by default)")
    exitProcess(2)
}

struct Outcome: Sendable {
    var status = 0
    var seconds = 0.0
    var sent: Int64?
    var server: Int64?
    var error: String?
}

let finalRequest = request
let outcome = await Task(executorPreference: executors[0]) { () -> Outcome in
    var outcome = Outcome()
    let start = ContinuousClock.now
    do {
        let response = try await client.execute(finalRequest)
        outcome.seconds = seconds(since: start)
        outcome.status = response.status.code
        outcome.sent = response.metrics.bytesSent
        outcome.server = serverByteCount(response.body)
    } catch {
        outcome.seconds = seconds(since: start)
        outcome.error = "\(error)"
    }
    return outcome
}.value

await client.shutdown()
finishUpload(
    client: name, options: options, status: outcome.status, seconds: outcome.seconds, fileBytes: fileBytes,
    sentBytes: outcome.sent, serverBytes: outcome.server, error: outcome.error)
