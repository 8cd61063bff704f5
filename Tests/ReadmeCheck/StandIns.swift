// Stand-ins for the names README snippets use without declaring them. check_readme.py copies the header and
// the sections of the names a block uses into a second file beside the block; nothing here runs.
import Curlew
import CurlewEngine
import Logging

// MARK: baseURL
let baseURL = "http://127.0.0.1:8080"
// MARK: url
let url = "http://127.0.0.1:8080/upload"
// MARK: client
let client = CurlewClient()
// MARK: request
let request = try! CurlewRequest(url: "http://127.0.0.1:8080/small")
// MARK: producer
let producer = AsyncStream<[UInt8]> { $0.finish() }
// MARK: sink
struct ChunkSink: Sendable { func write(_ chunk: [UInt8]) throws {} }
let sink = ChunkSink()
// MARK: logger
let logger = Logger(label: "readme")
// MARK: Issue
struct Issue: Decodable, Sendable { let title: String }
// MARK: User
struct User: Decodable, Sendable { let name: String }
// MARK: jpeg
let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF]
// MARK: DeezerError
struct DeezerError: Error {
    let description: String
    let code: Int
}
// MARK: Session
struct Session: Decodable, Sendable { let token: String }
// MARK: Post
struct Post: Decodable, Sendable { let id: Int }
// MARK: NetworkLogger
struct NetworkLogger: Plugin {}
// MARK: requests
let requests = [
    try! CurlewRequest(url: "http://127.0.0.1:8080/small"), try! CurlewRequest(url: "http://127.0.0.1:8080/json"),
]
