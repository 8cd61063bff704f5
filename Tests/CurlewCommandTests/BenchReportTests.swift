import CurlewLoopbackServer
import CurlewTestSupport
import Foundation
import Synchronization
import Testing

/// `--report`: the page is rendered by a real browser (Debian's chromium, headless) and checked in the screenshot.
@Suite struct BenchReportTests {
    static let chromium =
        ProcessInfo.processInfo.environment["CURLEW_CHROMIUM"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/bin/chromium"

    /// Renders `page` to a PNG with every request the browser makes sent through a recording proxy; returns the
    /// requests' targets (`http://host/path` for plain HTTP, `host:443` for CONNECT).
    private func render(_ page: String, to png: String) async throws -> [String] {
        guard FileManager.default.isExecutableFile(atPath: Self.chromium) else {
            throw TestSupportError(
                "chromium not found at \(Self.chromium): `apt-get install chromium` (make test installs it) or set CURLEW_CHROMIUM"
            )
        }
        let seen = Mutex<[String]>([])
        let profile = NSTemporaryDirectory() + "curlew-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        return try await withScriptedServer({ request in
            seen.withLock { $0.append(request.uri) }
            return ScriptedResponse(status: 403)
        }) { proxy in
            let output = try await CurlewBinary.runProgram(
                [
                    Self.chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-pings",
                    "--disable-domain-reliability", "--disable-default-apps",
                    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter",
                    "--user-data-dir=\(profile)",
                    // Everything, loopback included, goes through the recording proxy.
                    "--proxy-server=\(proxy.baseURL)", "--proxy-bypass-list=<-loopback>",
                    "--window-size=1000,1500", "--screenshot=\(png)", "file://\(page)",
                ], timeout: .seconds(60))
            #expect(output.status == 0, "chromium: \(output.stderr)")
            return seen.withLock { $0 }
        }
    }

    /// Requests Chromium makes on its own whatever the page (component updates, account checks): not the page's.
    private static func isBrowserService(_ target: String) -> Bool {
        ["update.googleapis.com", "accounts.google.com", "clients2.google.com", "redirector.gvt1.com"].contains {
            target.contains($0)
        }
    }

    /// Counts the screenshot's pixels of each colour (within a small tolerance), with a PNG decoder written for
    /// the test in Python (zlib and the five PNG filters), so nothing of the command is involved.
    private func pixelCounts(_ png: String, colors: [String]) async throws -> [String: Int] {
        let script = """
            import json, struct, sys, zlib
            data = open(sys.argv[1], 'rb').read()
            assert data[:8] == b'\\x89PNG\\r\\n\\x1a\\n'
            pos, idat = 8, b''
            while pos < len(data):
                length, kind = struct.unpack('>I4s', data[pos:pos + 8])
                chunk = data[pos + 8:pos + 8 + length]
                if kind == b'IHDR':
                    width, height, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', chunk)
                elif kind == b'IDAT':
                    idat += chunk
                pos += 12 + length
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
            raw, stride = zlib.decompress(idat), width * bpp
            rows, prev, i = [], bytearray(stride), 0
            for _ in range(height):
                f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
                for x in range(stride):
                    a = line[x - bpp] if x >= bpp else 0
                    b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
                    if f == 1: line[x] = (line[x] + a) & 255
                    elif f == 2: line[x] = (line[x] + b) & 255
                    elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
                    elif f == 4:
                        p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                        line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
                rows.append(line); prev = line
            targets = {h: tuple(int(h[k:k + 2], 16) for k in (1, 3, 5)) for h in sys.argv[2:]}
            counts = {h: 0 for h in targets}
            for line in rows:
                for x in range(0, stride, bpp):
                    px = line[x:x + 3]
                    for h, t in targets.items():
                        if abs(px[0] - t[0]) <= 12 and abs(px[1] - t[1]) <= 12 and abs(px[2] - t[2]) <= 12:
                            counts[h] += 1
            print(json.dumps(counts))
            """
        let output = try await CurlewBinary.runProgram(["python3", "-c", script, png] + colors)
        #expect(output.status == 0, "\(output.stderr)")
        return try JSONDecoder().decode([String: Int].self, from: Data(output.stdout.utf8))
    }

    @Test func reportRendersTheRunsDataWithoutNetworkAccess() async throws {
        let directory = NSTemporaryDirectory() + "curlew-report-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = directory + "/report.html"
        try await withLoopbackServer { server in
            let output = try await CurlewBinary.run([
                "bench", server.baseURL + "/small", "--rate", "300", "-d", "2s", "-c", "8", "--interval", "250ms",
                "--threshold", "p99<10s", "--threshold", "rps>1000000", "--report", report, "--json",
            ])
            #expect(output.status == 99, "\(output.stderr)")
            let json = try output.json()
            #expect(json["report"] as? String == report)
            let html = try String(contentsOfFile: report, encoding: .utf8)

            // Self-contained: nothing that could load a resource, and a policy that forbids it anyway.
            #expect(html.contains("default-src 'none'"))
            for reference in ["<script", "<link", "src=", "href=", "url(", "@import"] {
                #expect(!html.contains(reference), "the report contains \(reference)")
            }
            // One marker per interval on the rate chart, and the per-interval 2xx counts add up to the run's.
            // One marker per interval on each over-time chart (a loaded machine may stretch an interval, so their
            // number is not fixed), the last at the end of the run.
            let rateMarkers = html.components(separatedBy: "class=\"point\" data-series=\"requests/s\"").count - 1
            let okMarkers = html.components(separatedBy: "class=\"point\" data-series=\"2xx\"").count - 1
            #expect(
                rateMarkers >= 2 && rateMarkers == okMarkers, "\(rateMarkers) rate markers, \(okMarkers) 2xx markers")
            let duration = try #require(json["durationSeconds"] as? Double)
            let lastX = html.components(separatedBy: "data-series=\"requests/s\" data-x=\"").dropFirst().compactMap {
                Double($0.prefix { $0 != "\"" })
            }.max()
            #expect(abs((lastX ?? 0) - duration) < 0.3, "last interval ends at \(lastX ?? 0) s of \(duration) s")
            let okCounts = html.components(separatedBy: "data-series=\"2xx\" data-x=\"").dropFirst().compactMap {
                part -> Double? in
                guard let range = part.range(of: "data-y=\"") else { return nil }
                return Double(part[range.upperBound...].prefix { $0 != "\"" })
            }
            #expect(okCounts.reduce(0, +) == 600)
            #expect(json["requests"] as? Int == 600)
            #expect(html.contains("rps&gt;1000000") && html.contains("FAILED"))

            // A control page proves the recording proxy sees a page's fetches.
            let control = directory + "/control.html"
            try "<html><body><img src=\"http://curlew-report-probe.invalid/x.png\"></body></html>"
                .write(toFile: control, atomically: true, encoding: .utf8)
            let controlRequests = try await render(control, to: directory + "/control.png")
            #expect(controlRequests.contains { $0.contains("curlew-report-probe.invalid") }, "\(controlRequests)")

            let png = directory + "/report.png"
            let reportRequests = try await render(report, to: png)
            #expect(
                reportRequests.filter { !Self.isBrowserService($0) }.isEmpty, "the report fetched \(reportRequests)")
            // The plotted series are in the picture: requests/s (blue), p50/p90/p99 lines, the 2xx series.
            let counts = try await pixelCounts(png, colors: ["#1f77b4", "#2ca02c", "#ff7f0e", "#d62728"])
            for (color, count) in counts {
                #expect(count > 100, "only \(count) pixels of \(color)")
            }
            #expect(server.requestsServed == 600)
        }
    }
}
