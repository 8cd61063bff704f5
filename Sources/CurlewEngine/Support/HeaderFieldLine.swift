import Foundation

/// A header field written as one line of text, `Name: value`: curl's `-H` (`curlew bench` and `curlew upload`) and
/// the header lines of a `curlew bench` targets file.
package enum HeaderFieldLine {
    /// The name and value of `Name: value`, split at the first colon (a value may hold more: `Host: a:8080`) and
    /// trimmed of spaces and tabs; `nil` without a colon or with one first. An empty value stays empty; whether the
    /// name is a valid field name is the request's to check.
    package static func parse(_ line: some StringProtocol) -> (name: String, value: String)? {
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
        return (
            line[..<colon].trimmingCharacters(in: .whitespaces),
            line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        )
    }
}
