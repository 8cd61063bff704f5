import CurlewLoad
import Foundation
import Histogram

/// The `--report` page: one self-contained HTML file (inline SVG and CSS, no script, nothing fetched) with the
/// run's requests/s and latency percentiles over time, the latency distribution, status codes and errors over
/// time, the thresholds and the run's parameters.
struct BenchReport {
    var title: String
    /// Label and value pairs: URL, connections, stages, …
    var parameters: [(String, String)]
    var summary: BenchSummary
    var intervals: [BenchInterval]
    /// The whole run's latencies, for the percentile distribution.
    var histogram: LatencyHistogram

    /// Series colours; the report test looks for them in the screenshot.
    enum Color {
        static let requests = "#1f77b4"
        static let p50 = "#2ca02c"
        static let p90 = "#ff7f0e"
        static let p99 = "#d62728"
        static let failed = "#7f7f7f"
        static let status: [Int: String] = [1: "#9467bd", 2: "#2ca02c", 3: "#17becf", 4: "#ff7f0e", 5: "#d62728"]
    }

    var html: String {
        let times = intervals.map(\.endSeconds)
        let rps = SVGChart.Series(
            name: "requests/s", color: Color.requests, points: Array(zip(times, intervals.map(\.requestsPerSecond))))
        // Latencies in milliseconds; an interval without requests has no percentile and no point.
        func latencySeries(_ name: String, _ percentile: Double, _ color: String) -> SVGChart.Series {
            let points = intervals.filter { $0.requests > 0 }.map {
                ($0.endSeconds, $0.latencyMicroseconds(percentile: percentile) / 1_000)
            }
            return SVGChart.Series(name: name, color: color, points: points)
        }
        var statusSeries: [SVGChart.Series] = []
        for statusClass in 1...5 {
            let counts = intervals.map { interval in
                interval.statusCounts.filter { $0.key / 100 == statusClass }.reduce(0) { $0 + $1.value }
            }
            guard counts.contains(where: { $0 > 0 }) else { continue }
            statusSeries.append(
                SVGChart.Series(
                    name: "\(statusClass)xx", color: Color.status[statusClass]!,
                    points: Array(zip(times, counts.map(Double.init)))))
        }
        statusSeries.append(
            SVGChart.Series(
                name: "failed", color: Color.failed, points: Array(zip(times, intervals.map { Double($0.failed) }))))

        // The distribution on HdrHistogram's usual axis: x = log10(1 / (1 - p)), so 90 %, 99 %, 99.9 % are evenly
        // spaced.
        var distribution: [(Double, Double)] = []
        if histogram.totalCount > 0 {
            let deepest = min(max(log10(Double(histogram.totalCount)), 1), 6)
            for step in 0...Int(deepest * 20) {
                let x = Double(step) / 20
                let percentile = min((1 - pow(10, -x)) * 100, 100)
                distribution.append((x, Double(histogram.valueAtPercentile(percentile)) / 1_000))
            }
        }
        let distributionTicks = (0...Int(distribution.last?.0 ?? 1)).map { decade -> (Double, String) in
            let label = decade == 0 ? "0%" : "99." + String(repeating: "9", count: max(decade - 2, 0)) + "%"
            return (Double(decade), decade == 1 ? "90%" : decade == 2 ? "99%" : label)
        }

        var body = "<h1>\(htmlEscaped(title))</h1>\n"
        body +=
            "<p class=\"lead\">\(formatCount(summary.requests)) requests in \(String(format: "%.2f", summary.durationSeconds)) s, "
        body += "\(formatCount(summary.succeeded)) succeeded, \(formatCount(summary.failed)) failed; "
        body +=
            "p50 \(formatLatency(microseconds: summary.latencyMicroseconds.p50)), p99 \(formatLatency(microseconds: summary.latencyMicroseconds.p99))"
        body += " (latency from \(summary.latencyFrom) send times)."
        if let late = summary.lateLine { body += " Late requests: \(htmlEscaped(late))." }
        body += " Exit status \(summary.exitStatus).</p>\n"
        body +=
            SVGChart(
                id: "requests-per-second", title: "Requests per second", xLabel: "seconds", yLabel: "requests/s",
                series: [rps]
            ).svg
        body +=
            SVGChart(
                id: "latency-over-time", title: "Latency percentiles per interval", xLabel: "seconds", yLabel: "ms",
                series: [
                    latencySeries("p50", 50, Color.p50), latencySeries("p90", 90, Color.p90),
                    latencySeries("p99", 99, Color.p99),
                ]
            ).svg
        body +=
            SVGChart(
                id: "latency-distribution", title: "Latency by percentile (whole run)", xLabel: "percentile",
                yLabel: "ms",
                series: [SVGChart.Series(name: "latency", color: Color.p99, points: distribution)],
                xTicks: distributionTicks,
                logarithmicY: true, markers: false
            ).svg
        body +=
            SVGChart(
                id: "status-over-time", title: "Status codes and failures per interval", xLabel: "seconds",
                yLabel: "responses", series: statusSeries
            ).svg
        body += table(
            id: "thresholds", title: "Thresholds", header: ["threshold", "result", "measured"],
            rows: summary.thresholds.map { result in
                [
                    result.threshold, result.passed ? "passed" : "FAILED",
                    LoadThreshold.format(result.actual, unit: result.unit),
                ]
            }, empty: "No thresholds were given.")
        if let checks = summary.checks {
            body += table(
                id: "checks", title: "Checks", header: ["check", "pass rate", "passed", "failed"],
                rows: checks.map { check in
                    [
                        check.check, String(format: "%.2f%%", check.passRate), formatCount(check.passed),
                        formatCount(check.failed),
                    ]
                }, empty: "")
        }
        body += table(
            id: "parameters", title: "Run", header: ["parameter", "value"], rows: parameters.map { [$0.0, $0.1] },
            empty: "")
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
            <title>\(htmlEscaped(title))</title>
            <style>
            body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; max-width: 960px; }
            h1 { font-size: 20px; } h2 { font-size: 16px; margin: 24px 0 4px; }
            svg { display: block; } svg text { font: 11px sans-serif; fill: #444; }
            table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
            .failed { color: #d62728; font-weight: bold; } .passed { color: #2ca02c; }
            </style></head><body>
            \(body)
            </body></html>

            """
    }

    private func table(id: String, title: String, header: [String], rows: [[String]], empty: String) -> String {
        var html = "<h2>\(htmlEscaped(title))</h2>\n"
        guard !rows.isEmpty else { return html + "<p>\(htmlEscaped(empty))</p>\n" }
        html += "<table id=\"\(id)\"><tr>" + header.map { "<th>\(htmlEscaped($0))</th>" }.joined() + "</tr>\n"
        for row in rows {
            html +=
                "<tr>"
                + row.map { cell in
                    let style = cell == "FAILED" ? " class=\"failed\"" : cell == "passed" ? " class=\"passed\"" : ""
                    return "<td\(style)>\(htmlEscaped(cell))</td>"
                }.joined() + "</tr>\n"
        }
        return html + "</table>\n"
    }
}

/// A line chart as inline SVG: linear x, linear or logarithmic y, one polyline (and a marker per point) per series.
struct SVGChart {
    struct Series {
        var name: String
        var color: String
        var points: [(Double, Double)]
    }

    var id: String
    var title: String
    var xLabel: String
    var yLabel: String
    var series: [Series]
    /// Positions and labels of the x ticks; nil picks round numbers.
    var xTicks: [(Double, String)]? = nil
    var logarithmicY = false
    /// A circle per data point (`class="point"`), which is what makes each interval visible and countable.
    var markers = true

    private let width = 900.0, height = 260.0
    private let left = 64.0, right = 110.0, top = 12.0, bottom = 36.0

    var svg: String {
        let points = series.flatMap(\.points)
        var out = "<h2>\(htmlEscaped(title))</h2>\n"
        out +=
            "<svg id=\"\(id)\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
        out +=
            "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(width - left - right)\" height=\"\(height - top - bottom)\" fill=\"none\" stroke=\"#ccc\"/>\n"
        guard !points.isEmpty else {
            return out + "<text x=\"\(width / 2 - 30)\" y=\"\(height / 2)\">no data</text>\n</svg>\n"
        }
        let xMax = max(points.map(\.0).max()!, xTicks?.map(\.0).max() ?? 0, 1e-9)
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        func x(_ value: Double) -> Double { left + value / xMax * plotWidth }

        let yTicks: [Double]
        let y: (Double) -> Double
        if logarithmicY {
            let positive = points.map(\.1).filter { $0 > 0 }
            let low = floor(log10(positive.min() ?? 0.001)), high = max(ceil(log10(positive.max() ?? 1)), low + 1)
            yTicks = stride(from: low, through: high, by: 1).map { pow(10, $0) }
            y = { value in top + plotHeight - (log10(max(value, pow(10, low))) - low) / (high - low) * plotHeight }
        } else {
            let step = Self.niceStep(max(points.map(\.1).max()!, 1e-9) / 5)
            let yMax = (max(points.map(\.1).max()!, step) / step).rounded(.up) * step
            yTicks = stride(from: 0, through: yMax + step / 2, by: step).map { $0 }
            y = { value in top + plotHeight - value / yMax * plotHeight }
        }
        for tick in yTicks {
            out +=
                "<line x1=\"\(left)\" x2=\"\(left + plotWidth)\" y1=\"\(fmt(y(tick)))\" y2=\"\(fmt(y(tick)))\" stroke=\"#eee\"/>"
            out += "<text x=\"\(left - 6)\" y=\"\(fmt(y(tick) + 4))\" text-anchor=\"end\">\(Self.label(tick))</text>\n"
        }
        let ticks = xTicks ?? stride(from: 0, through: xMax, by: Self.niceStep(xMax / 8)).map { ($0, Self.label($0)) }
        for (position, label) in ticks {
            out +=
                "<text x=\"\(fmt(x(position)))\" y=\"\(height - bottom + 16)\" text-anchor=\"middle\">\(htmlEscaped(label))</text>\n"
        }
        out +=
            "<text x=\"\(left + plotWidth / 2)\" y=\"\(height - 4)\" text-anchor=\"middle\">\(htmlEscaped(xLabel))</text>\n"
        out +=
            "<text x=\"14\" y=\"\(top + plotHeight / 2)\" transform=\"rotate(-90 14 \(top + plotHeight / 2))\" text-anchor=\"middle\">\(htmlEscaped(yLabel))</text>\n"
        for (index, line) in series.enumerated() {
            let coordinates = line.points.map { "\(fmt(x($0.0))),\(fmt(y($0.1)))" }
            out +=
                "<polyline data-series=\"\(htmlEscaped(line.name))\" fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"2\" points=\"\(coordinates.joined(separator: " "))\"/>\n"
            if markers {
                for point in line.points {
                    out +=
                        "<circle class=\"point\" data-series=\"\(htmlEscaped(line.name))\" data-x=\"\(fmt(point.0))\" data-y=\"\(fmt(point.1))\" cx=\"\(fmt(x(point.0)))\" cy=\"\(fmt(y(point.1)))\" r=\"3\" fill=\"\(line.color)\"/>\n"
                }
            }
            let legendY = top + 14 + Double(index) * 16
            out +=
                "<rect x=\"\(width - right + 10)\" y=\"\(legendY - 9)\" width=\"12\" height=\"10\" fill=\"\(line.color)\"/>"
            out += "<text x=\"\(width - right + 27)\" y=\"\(legendY)\">\(htmlEscaped(line.name))</text>\n"
        }
        return out + "</svg>\n"
    }

    /// 1, 2 or 5 times a power of ten, at least `raw`.
    static func niceStep(_ raw: Double) -> Double {
        let magnitude = pow(10, floor(log10(raw)))
        for factor in [1.0, 2, 5, 10] where factor * magnitude >= raw { return factor * magnitude }
        return 10 * magnitude
    }

    static func label(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e15 { return formatCount(Int(value)) }
        return String(format: value < 0.01 ? "%.4g" : "%.3g", value)
    }
}

private func fmt(_ value: Double) -> String { String(format: "%.1f", value) }

/// Escapes text for HTML element content and attribute values.
func htmlEscaped(_ text: String) -> String {
    var escaped = ""
    for character in text {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&#39;"
        default: escaped.append(character)
        }
    }
    return escaped
}
