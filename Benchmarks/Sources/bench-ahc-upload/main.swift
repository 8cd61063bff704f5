// AsyncHTTPClient uploading one file (S4 only: it has neither multipart nor request compression).
// The body is HTTPClientRequest.Body.stream of an AsyncSequence that reads the file in 64 KiB ByteBuffers
// (read(2) from the page cache; never the whole file), length .known(size).
//
// seconds: from execute() to the complete response, measured here.
import AsyncHTTPClient
import BenchSupport
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The file's bytes in 64 KiB buffers, read as the consumer asks.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let path: String
    let chunkSize = 64 * 1024

    struct AsyncIterator: AsyncIteratorProtocol {
        let descriptor: Int32
        let chunkSize: Int
        let allocator = ByteBufferAllocator()

        mutating func next() async throws -> ByteBuffer? {
            var buffer = allocator.buffer(capacity: chunkSize)
            let got = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: chunkSize) { pointer in
                let count = read(descriptor, pointer.baseAddress, chunkSize)
                return Swift.max(count, 0)
            }
            if got == 0 {
                close(descriptor)
                return nil
            }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(descriptor: open(path, O_RDONLY | O_CLOEXEC), chunkSize: chunkSize)
    }
}

let options = UploadOptions.parseOrExit()
guard options.mode == .raw else {
    printError("bench-ahc-upload: AsyncHTTPClient has no multipart forms and no request compression")
    exitProcess(2)
}
guard let fileBytes = fileSize(options.file) else {
    printError("bench-ahc-upload: cannot stat \(options.file)")
    exitProcess(2)
}

var configuration = HTTPClient.Configuration()
configuration.httpVersion = .http1Only
let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)

var request = HTTPClientRequest(url: options.url)
request.method = .RAW(value: options.method)
request.headers.add(name: "Content-Type", value: "application/octet-stream")
request.body = .stream(FileChunks(path: options.file), length: .known(fileBytes))

var status = 0
var server: Int64?
var failure: String?
let start = ContinuousClock.now
do {
    let response = try await client.execute(request, timeout: .seconds(300))
    let body = try await response.body.collect(upTo: 1 << 20)
    status = Int(response.status.code)
    server = serverByteCount(body.readableBytesView)
} catch {
    failure = "\(error)"
}
let elapsed = seconds(since: start)

do {
    try await client.shutdown().get()
} catch {
    printError("bench-ahc-upload: shutdown failed: \(error)")
}
finishUpload(
    client: "async-http-client", options: options, status: status, seconds: elapsed, fileBytes: fileBytes,
    sentBytes: nil, serverBytes: server, error: failure)
