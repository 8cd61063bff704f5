import ArgumentParser
import Foundation

/// `--prometheus [HOST:]PORT`: where the run's `/metrics` listens. A bare `PORT` or `:PORT` listens on 127.0.0.1
/// only (a load generator's counts are nobody else's business unless asked); `0.0.0.0:PORT` or another address
/// of the host opens it up; an IPv6 address is bracketed (`[::1]:9464`). Port 0 lets the kernel choose one.
struct PrometheusAddressArgument: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    static let defaultHost = "127.0.0.1"

    let host: String
    let port: Int
    private let text: String

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces)
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return nil
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
            guard !host.isEmpty else { return nil }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            // An unbracketed IPv6 address would be ambiguous.
            if host.contains(":") { return nil }
        } else {
            host = ""
            portText = text[...]
        }
        guard !portText.isEmpty, portText.allSatisfy(\.isASCII), let port = Int(portText), (0...65_535).contains(port)
        else { return nil }
        self.host = host.isEmpty ? Self.defaultHost : String(host)
        self.port = port
        self.text = text
    }

    var description: String { text }

    static var defaultCompletionKind: CompletionKind { .default }
}
