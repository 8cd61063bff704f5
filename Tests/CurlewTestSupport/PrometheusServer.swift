import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A real Prometheus server (Debian's `prometheus` package) that scrapes the given targets, with its own
/// configuration and TSDB in a temporary folder and its own loopback port; queried through its HTTP API. Each
/// instance is its own process (under the test supervisor, so it never outlives the test process), stopped by
/// ``stop()``.
public final class PrometheusServer: Sendable {
    /// The port of Prometheus' web UI and HTTP API.
    public let port: Int
    private let process: SupervisedProcess

    private init(port: Int, process: SupervisedProcess) {
        self.port = port
        self.process = process
    }

    /// `CURLEW_PROMETHEUS`, or Debian's `/usr/bin/prometheus`.
    public static var executable: String {
        ProcessInfo.processInfo.environment["CURLEW_PROMETHEUS"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "/usr/bin/prometheus"
    }

    /// Starts Prometheus scraping `targets` (`HOST:PORT`, path `/metrics`) every `scrapeInterval`, and waits until
    /// it scrapes them (whether or not anything listens there yet).
    public static func start(
        scraping targets: [String], every scrapeInterval: Duration = .milliseconds(250)
    ) async throws -> PrometheusServer {
        let prometheus = executable
        guard FileManager.default.isExecutableFile(atPath: prometheus) else {
            throw TestSupportError(
                "prometheus not found at \(prometheus): `apt-get install prometheus` (make deps), or set CURLEW_PROMETHEUS"
            )
        }
        let directory = try TemporaryDirectory.make(prefix: "curlew-prometheus")
        let milliseconds = Int(scrapeInterval / .milliseconds(1))
        let configuration = """
            global:
              scrape_interval: \(milliseconds)ms
              scrape_timeout: \(milliseconds)ms
            scrape_configs:
              - job_name: curlew-bench
                static_configs:
                  - targets: [\(targets.map { "'\($0)'" }.joined(separator: ", "))]
            """
        try configuration.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        let (process, port) = try await SupervisedProcess.launchBindingFreePort(
            name: "prometheus", directory: directory, readyTimeout: .seconds(60),
            program: { port, attempt in
                [
                    prometheus, "--config.file=\(directory)/prometheus.yml",
                    "--storage.tsdb.path=\(directory)/data-\(attempt)", "--web.listen-address=127.0.0.1:\(port)",
                ]
            },
            isReady: { Probe.httpStatus(port: $0, path: "/-/ready") == 200 })
        let server = PrometheusServer(port: port, process: process)
        // Ready is not yet scraping: Prometheus applies discovered targets on a 5 s tick. Once every target has an
        // `up` series (0 while nothing listens there), each is scraped every interval.
        do {
            try await waitUntil(
                timeout: .seconds(30), pollInterval: .milliseconds(100), "Prometheus to scrape \(targets)"
            ) {
                try await server.query("up").count == targets.count
            }
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    /// One series of an instant query's result: its labels and value.
    public struct Series: Sendable {
        public let labels: [String: String]
        public let value: Double
    }

    /// Runs the PromQL `query` at the current time (`/api/v1/query`) and returns its vector.
    public func query(_ query: String) async throws -> [Series] {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = query.addingPercentEncoding(withAllowedCharacters: allowed) ?? query
        let port = port
        let response = try await offCooperativePool {
            Probe.httpGet(port: port, path: "/api/v1/query?query=\(encoded)")
        }
        guard let response, response.status == 200,
            let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
            object["status"] as? String == "success", let data = object["data"] as? [String: Any],
            let result = data["result"] as? [[String: Any]]
        else {
            throw TestSupportError(
                "prometheus query \(query.debugDescription) failed: \(response.map { String(decoding: $0.body, as: UTF8.self) } ?? "no response")"
            )
        }
        return result.compactMap { series in
            guard let value = series["value"] as? [Any], value.count == 2, let text = value[1] as? String,
                let number = Double(text)
            else { return nil }
            return Series(labels: series["metric"] as? [String: String] ?? [:], value: number)
        }
    }

    /// Stops Prometheus (SIGTERM to its supervisor, by PID) and waits for it.
    public func stop() {
        process.terminate()
    }
}

extension Probe {
    /// Sends `GET path` over HTTP/1.0 and returns the status and the body (read to the end), or nil.
    static func httpGet(port: Int, path: String) -> (status: Int, body: [UInt8])? {
        withConnection(port: port, timeoutSeconds: 10) { fd -> (status: Int, body: [UInt8])? in
            let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
            let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent == request.count else { return nil }
            var response: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                response += chunk[0..<count]
            }
            guard response.count >= 12, response.starts(with: Array("HTTP/1.".utf8)),
                let status = Int(String(decoding: response[9..<12], as: UTF8.self))
            else { return nil }
            let separator = Array("\r\n\r\n".utf8)
            guard
                let end = (0...(response.count - separator.count)).first(where: {
                    response[$0..<$0 + separator.count].elementsEqual(separator)
                })
            else { return nil }
            return (status, Array(response[(end + separator.count)...]))
        }
    }
}
