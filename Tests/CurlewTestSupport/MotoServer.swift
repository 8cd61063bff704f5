import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// moto's S3 server (`pip install 'moto[server]'`) on 127.0.0.1, one per flavour per test process.
///
/// `checked` verifies every SigV4 signature (after `Tests/servers/moto_s3.py` spent moto's three unsigned calls on an
/// IAM user and access key); `unchecked` accepts anything, for what moto's checker gets wrong (non-ASCII keys).
/// Every request lands in ``requestLogPath``, so tests count requests server-side.
public final class MotoServer: Sendable {
    public enum Flavour: Sendable { case checked, unchecked }

    public let port: Int
    public let accessKeyID: String
    public let secretAccessKey: String
    /// werkzeug's access log: `127.0.0.1 - - [date] "METHOD /path?query HTTP/1.1" STATUS -`.
    public let requestLogPath: String
    private let process: SupervisedProcess

    public var endpoint: String { "http://127.0.0.1:\(port)" }

    private init(
        port: Int, accessKeyID: String, secretAccessKey: String, requestLogPath: String, process: SupervisedProcess
    ) {
        self.port = port
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.requestLogPath = requestLogPath
        self.process = process
    }

    private static let checkedStartup = StartOnce { try await MotoServer.start(.checked) }
    private static let uncheckedStartup = StartOnce { try await MotoServer.start(.unchecked) }

    public static func shared(_ flavour: Flavour = .checked) async throws -> MotoServer {
        switch flavour {
        case .checked: try await checkedStartup.value
        case .unchecked: try await uncheckedStartup.value
        }
    }

    private static func start(_ flavour: Flavour) async throws -> MotoServer {
        let directory = try TemporaryDirectory.make(prefix: "curlew-moto")
        do {
            var program = [
                "{python}", ServerScripts.directory + "/moto_s3.py", "--fd", "{fd0}", "--port", "{port0}", "--dir",
                directory,
            ]
            if flavour == .checked { program.append("--check-signatures") }
            let process = try await SupervisedProcess.launch(
                name: "moto S3 server", program: program, listen: 1, stderrPath: directory + "/stderr.log",
                cleanupDirectory: directory)
            do {
                try await process.waitUntilReady(timeout: .seconds(60)) {
                    FileManager.default.fileExists(atPath: directory + "/ready")
                }
            } catch let exited as ServerExited {
                throw TestSupportError(
                    "\(exited)\nhint: `pip install 'moto[server]' boto3` for \(ServerScripts.python)")
            }
            guard let data = FileManager.default.contents(atPath: directory + "/credentials.json"),
                let object = try JSONSerialization.jsonObject(with: data) as? [String: String],
                let key = object["access_key_id"], let secret = object["secret_access_key"]
            else { throw TestSupportError("moto_s3.py wrote no credentials.json\n\(process.stderrTail())") }
            return MotoServer(
                port: process.ports[0], accessKeyID: key, secretAccessKey: secret,
                requestLogPath: directory + "/requests.log", process: process)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// The environment `curlew upload` and boto3 take the credentials from.
    public var credentialEnvironment: [String: String] {
        ["AWS_ACCESS_KEY_ID": accessKeyID, "AWS_SECRET_ACCESS_KEY": secretAccessKey, "AWS_REGION": "us-east-1"]
    }

    /// Requests logged so far whose method and path (with query) satisfy `matching`, with their status.
    public func loggedRequests(
        _ matching: (_ method: String, _ target: String) -> Bool
    ) -> [(method: String, target: String, status: Int)] {
        let log = (try? String(contentsOfFile: requestLogPath, encoding: .utf8)) ?? ""
        var found: [(String, String, Int)] = []
        for line in log.split(separator: "\n") {
            // …] "PUT /bucket/key?partNumber=1&uploadId=x HTTP/1.1" 200 -
            let quoted = line.split(separator: "\"", omittingEmptySubsequences: false)
            guard quoted.count >= 3 else { continue }
            let request = quoted[1].split(separator: " ")
            let status = quoted[2].split(separator: " ").first.flatMap { Int($0) } ?? 0
            guard request.count >= 2 else { continue }
            let method = String(request[0])
            let target = String(request[1])
            if matching(method, target) { found.append((method, target, status)) }
        }
        return found
    }

    /// Runs `Tests/servers/s3_inspect.py` (boto3) with this server's credentials and returns its stdout; the wait
    /// happens off the cooperative pool, which the rest of the suite needs meanwhile.
    public func inspect(_ command: String, bucket: String, _ arguments: [String] = []) async throws -> String {
        try await offCooperativePool { try self.inspectBlocking(command, bucket: bucket, arguments) }
    }

    private func inspectBlocking(_ command: String, bucket: String, _ arguments: [String]) throws -> String {
        let directory = try TemporaryDirectory.make(prefix: "curlew-s3-inspect")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let stdoutPath = directory + "/stdout"
        try Spawn.run(
            [
                "env", "AWS_ACCESS_KEY_ID=\(accessKeyID)", "AWS_SECRET_ACCESS_KEY=\(secretAccessKey)", "sh", "-c",
                "exec \"$0\" \"$@\" > \(stdoutPath)", ServerScripts.python, ServerScripts.directory + "/s3_inspect.py",
                endpoint, command, bucket,
            ] + arguments,
            stderrPath: directory + "/stderr")
        return (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? ""
    }

    /// A fresh bucket of a unique name.
    public func makeBucket(_ hint: String) async throws -> String {
        let bucket = "\(hint)-\(UUID().uuidString.prefix(8).lowercased())"
        _ = try await inspect("create-bucket", bucket: bucket)
        return bucket
    }
}
