import CurlewTestSupport
import Foundation

/// The lines nginx logged for `/hits/MARKER/…` (see ``NginxServer/hitsAccessLogPath``), split into fields.
struct NginxHit: Sendable {
    /// When nginx logged the request, in seconds since the epoch.
    let time: Double
    /// nginx's serial number of the connection the request came on.
    let connection: Int
    let method: String
    let status: Int
    let uri: String
    let host: String
    /// The request's `X-Test-Tag` header ("-" without one): how a test tells apart processes that send the same URL.
    let tag: String

    /// A fresh path prefix, so a test counts only its own requests in the shared log.
    static func makeMarker() -> String { "/hits/" + UUID().uuidString + "/" }

    /// Waits (boundedly) until nginx has logged `expected` requests under `marker`, then returns them all; nginx
    /// writes a line when a request ends, which can be just after the client saw the response.
    static func read(_ nginx: NginxServer, marker: String, atLeast expected: Int) async throws -> [NginxHit] {
        var hits: [NginxHit] = []
        try await waitUntil(timeout: .seconds(10), "nginx to log \(expected) requests under \(marker)") {
            hits = Self.parse(lines: nginx.hitsLog.lines(inGroupOf: marker), marker: marker)
            return hits.count >= expected
        }
        return hits
    }

    static func parse(lines: [String], marker: String) -> [NginxHit] {
        lines.compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count >= 6, fields[4].hasPrefix(marker), let time = Double(fields[0]),
                let connection = Int(fields[1]),
                let status = Int(fields[3])
            else { return nil }
            return NginxHit(
                time: time, connection: connection, method: fields[2], status: status, uri: fields[4], host: fields[5],
                tag: fields.count > 7 ? fields[7] : "-")
        }
    }
}
