public import CurlewEngine
import HTTPTypes

extension CurlewRequest {
    /// The request as a `curl` command line that sends the same thing, for debugging and bug reports.
    ///
    /// ```swift
    /// print(try provider.makeRequest(for: .login("a@b.c", "x")).curlCommand())
    /// // curl -X POST -H 'Content-Type: application/json' -H 'User-Agent:' -H 'Expect:' \
    /// //   --data-binary '{"email":"a@b.c","password":"x"}' --compressed --location --max-redirs 10 'https://…/login'
    /// ```
    /// The line reproduces what the engine sends with its default configuration: the method, every header field
    /// (and `-H 'User-Agent:'` to drop the one curl adds on its own), the body as text, as `$'…'` escapes for
    /// binary bytes or as `--data-binary @file` for file bodies, `--compressed` when the response may be
    /// compressed, `--http1.1`, `--http2` or `--http2-prior-knowledge`, redirects and timeouts. Every argument is
    /// quoted for a POSIX shell.
    ///
    /// - Parameter bodyFile: the path to show for a file body (the engine does not expose it); `@-` when `nil`.
    public func curlCommand(bodyFile: String? = nil) -> String {
        var arguments = ["curl"]
        let hasBody = body != nil
        switch method {
        case .get where !hasBody: break
        case .head: arguments.append("--head")
        default: arguments += ["-X", method.rawValue]
        }
        // A form of text fields becomes curl's own form (`--form-string`), with curl's boundary in the
        // Content-Type; other forms cannot be rebuilt from outside the engine and go through standard input.
        let textFields = textFormFields()
        for field in headerFields {
            if textFields != nil, field.name == .contentType { continue }
            arguments += ["-H", field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)"]
        }
        if headerFields[.userAgent] == nil { arguments += ["-H", "User-Agent:"] }
        if hasBody {
            // The engine never sends Expect unless asked, and no Content-Type the request does not name.
            if headerFields[.expect] == nil { arguments += ["-H", "Expect:"] }
            if headerFields[.contentType] == nil, textFields == nil { arguments += ["-H", "Content-Type:"] }
        }
        if let textFields {
            for field in textFields { arguments += ["--form-string", "\(field.name)=\(field.value)"] }
        }
        var bodyArgument: String?
        // `if case` rather than a switch: body kinds the engine adds later render as standard input.
        if case .bytes(let bytes)? = body {
            bodyArgument = ShellQuoting.quote(bytes: bytes)
        } else if hasBody, textFields == nil {
            bodyArgument = ShellQuoting.quote("@" + (bodyFile ?? "-"))
        }
        if let bodyArgument { arguments += ["--data-binary", bodyArgument] }
        if decompression != .disabled { arguments.append("--compressed") }
        switch httpVersion ?? .http2 {
        case .http1_1: arguments.append("--http1.1")
        case .http2: if url.lowercased().hasPrefix("https:") { arguments.append("--http2") }
        case .http2PriorKnowledge: arguments.append("--http2-prior-knowledge")
        }
        let redirects = self.redirects ?? CurlewClient.Redirects()
        if redirects.follow { arguments += ["--location", "--max-redirs", String(redirects.maximum)] }
        let timeouts = self.timeouts ?? CurlewClient.Timeouts()
        if let connect = timeouts.connect { arguments += ["--connect-timeout", Self.seconds(connect)] }
        if let total = timeouts.total { arguments += ["--max-time", Self.seconds(total)] }
        arguments.append(url)
        return arguments.enumerated().map { index, argument in
            // The body argument is quoted already (it may need $'…').
            if index > 0, arguments[index - 1] == "--data-binary" { return argument }
            return index == 0 ? argument : ShellQuoting.quote(argument)
        }.joined(separator: " ")
    }

    /// The fields of a multipart body made only of text fields (no file name, type or extra headers).
    private func textFormFields() -> [(name: String, value: String)]? {
        guard case .multipart(let form)? = body, !form.parts.isEmpty else { return nil }
        var fields: [(name: String, value: String)] = []
        for part in form.parts {
            guard part.fileName == nil, part.contentType == nil, part.headerFields.isEmpty,
                case .bytes(let bytes) = part.content, let value = String(validating: bytes, as: UTF8.self),
                !part.name.contains("=")
            else { return nil }
            fields.append((part.name, value))
        }
        return fields
    }

    private static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? String(milliseconds / 1000) : String(Double(milliseconds) / 1000)
    }
}

enum ShellQuoting {
    /// Single quotes, with `'` written as `'\''`; plain words stay bare.
    static func quote(_ text: String) -> String {
        let safe = text.utf8.allSatisfy { byte in
            PercentEncoding.isUnreserved(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "@") || byte == UInt8(ascii: ",") || byte == UInt8(ascii: "=")
        }
        if safe, !text.isEmpty { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Printable UTF-8 text in single quotes; anything else as bash's `$'…'` with `\xHH` escapes.
    ///
    /// A NUL byte cannot travel in a shell argument at all, so such bodies are rendered as `@-`: pipe them in.
    static func quote(bytes: [UInt8]) -> String {
        if bytes.contains(0) { return "@-" }
        let isText = bytes.allSatisfy { $0 >= 0x20 || $0 == 0x0A || $0 == 0x09 || $0 == 0x0D }
            && String(validating: bytes, as: UTF8.self) != nil
        if isText { return quote(String(decoding: bytes, as: UTF8.self)) }
        var escaped = "$'"
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "'"): escaped += "\\'"
            case UInt8(ascii: "\\"): escaped += "\\\\"
            case 0x20...0x7E: escaped.append(Character(Unicode.Scalar(byte)))
            default: escaped += "\\x" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return escaped + "'"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

extension HTTPProvider {
    /// The `curl` command line for a route, as this provider would send it before interceptors run.
    public func curlCommand(for route: Route) throws(ProviderError) -> String {
        let request = try makeRequest(for: route)
        var bodyFile: String?
        if case .file(let path)? = route.body?.storage { bodyFile = path }
        return request.curlCommand(bodyFile: bodyFile)
    }
}
