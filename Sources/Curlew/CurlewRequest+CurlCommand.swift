public import CurlewEngine
import HTTPTypes

extension CurlewRequest {
    /// The request as a `curl` command line that sends the same thing, for debugging and bug reports.
    ///
    /// ```swift
    /// print(try provider.makeRequest(for: .login("a@b.c", "x")).curlCommand())
    /// // curl -X POST -H 'Content-Type: application/json' -H 'User-Agent:' -H 'Expect:' \
    /// //   --data-raw '{"email":"a@b.c","password":"x"}' --compressed --location --max-redirs 10 'https://…/login'
    /// ```
    /// The line reproduces what the engine sends with its default configuration: the method, every header field
    /// (and `-H 'User-Agent:'` to drop the one curl adds on its own), the body, `--compressed` when the response
    /// may be compressed, `--http1.1`, `--http2` or `--http2-prior-knowledge`, redirects and timeouts. Every
    /// argument is quoted for a POSIX shell, except binary bytes, which need bash's `$'…'`.
    ///
    /// Bodies:
    /// - bytes as `--data-raw` text, or `$'…'` escapes when they are not printable UTF-8 (`--data-raw`, because
    ///   `--data-binary` reads a file when its argument starts with `@`, and a body may: `@channel deploy done`);
    /// - a file as `--data-binary @path`;
    /// - a `multipart/form-data` form as curl's own form (curl picks its own boundary): text fields as
    ///   `--form-string name=value`, files as `-F 'name=@"path";filename="…";type=…'`, other in-memory parts as
    ///   `-F 'name="…";filename="…";type=…'`, each part's extra header fields as `;headers="…"`;
    /// - what a command line cannot carry (a stream, a file given by descriptor or as a range, bytes holding NUL)
    ///   as `@-`, standard input, and the line ends with a shell comment saying what to pipe in.
    ///
    /// - Parameter bodyFile: a file holding the bytes of a body the line cannot carry, used instead of `@-`.
    public func curlCommand(bodyFile: String? = nil) -> String {
        var arguments = ["curl"]
        var placeholders: [String] = []
        let hasBody = body != nil
        switch method {
        case .get where !hasBody: break
        case .head: arguments.append("--head")
        default: arguments += ["-X", ShellQuoting.quote(method.rawValue)]
        }
        // A form curl can build itself replaces the engine's Content-Type, whose boundary curl does not use.
        var formArguments: [String]?
        if let form = body?.multipart { formArguments = Self.curlForm(form, placeholders: &placeholders) }
        for field in headerFields {
            // The engine frames the body itself and never sends these as given; curl would.
            if field.name == .contentLength || field.name == .transferEncoding { continue }
            if formArguments != nil, field.name == .contentType,
                field.value.lowercased().hasPrefix("multipart/form-data")
            {
                continue
            }
            // The engine sends it to proxies only, as `--proxy-header` does, and an empty one not at all.
            if field.name == .proxyAuthorization && field.value.isEmpty { continue }
            let option = field.name == .proxyAuthorization ? "--proxy-header" : "-H"
            arguments += [
                option, ShellQuoting.quote(field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)"),
            ]
        }
        if headerFields[.userAgent] == nil { arguments += ["-H", "User-Agent:"] }
        if hasBody {
            // The engine never sends Expect unless asked, and no Content-Type the request does not name.
            if headerFields[.expect] == nil { arguments += ["-H", "Expect:"] }
            if headerFields[.contentType] == nil, formArguments == nil { arguments += ["-H", "Content-Type:"] }
        }
        if let formArguments {
            arguments += formArguments
        } else if let body {
            let standardInput = ShellQuoting.quote("@" + (bodyFile ?? "-"))
            var option = "--data-binary"
            let argument: String
            switch body.storage {
            case .bytes(let bytes) where !bytes.contains(0):
                option = "--data-raw"
                argument = ShellQuoting.quote(bytes: bytes)
            case .bytes(let bytes):
                argument = standardInput
                placeholders.append("the body (\(bytes.count) bytes with NUL, which no argument can hold)")
            case .file(let file):
                if let path = Self.wholeFilePath(file) {
                    argument = ShellQuoting.quote("@" + path)
                } else {
                    argument = standardInput
                    placeholders.append("the body (\(Self.describe(file)))")
                }
            case .stream:
                argument = standardInput
                placeholders.append("the body (a stream)")
            case .multipart:
                argument = standardInput
                placeholders.append("the encoded multipart form (a field name holds \"=\", which curl's -F cannot)")
            }
            arguments += [option, argument]
        }
        if decompression != .disabled { arguments.append("--compressed") }
        switch (httpVersion ?? .http2).storage {
        case .http1_1: arguments.append("--http1.1")
        case .http2: if url.lowercased().hasPrefix("https:") { arguments.append("--http2") }
        case .http2PriorKnowledge: arguments.append("--http2-prior-knowledge")
        }
        let redirects = self.redirects ?? CurlewClient.Redirects()
        if redirects.follow { arguments += ["--location", "--max-redirs", String(redirects.maximum)] }
        let timeouts = self.timeouts.applied(to: CurlewClient.Timeouts())
        if let connect = timeouts.connect { arguments += ["--connect-timeout", Self.seconds(connect)] }
        // A total the engine counts as no limit (`.seconds(Int64.max)`) is no --max-time.
        if let total = timeouts.total, !total.isBeyondEngineDeadlines {
            arguments += ["--max-time", Self.seconds(total)]
        }
        arguments.append(ShellQuoting.quote(url))
        var line = arguments.joined(separator: " ")
        if !placeholders.isEmpty {
            // A comment, so the line still runs (reading standard input) and says what it stands for. A line break
            // anywhere in it (a body file's path may hold one) would end it and run the rest as a command.
            let source = bodyFile.map { "from \(ShellQuoting.quote($0))" } ?? "on standard input"
            let comment = "placeholder, pipe in \(source): " + placeholders.joined(separator: "; ")
            line += " # " + comment.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: " ")
        }
        return line
    }

    /// curl's `-F` and `--form-string` arguments for a form, already quoted; `nil` when curl cannot build it
    /// (a field name with `=`, where curl ends the name).
    private static func curlForm(_ form: MultipartForm, placeholders: inout [String]) -> [String]? {
        guard !form.parts.isEmpty, !form.parts.contains(where: { $0.name.contains("=") }) else { return nil }
        var arguments: [String] = []
        for part in form.parts {
            let isPlainField = part.fileName == nil && part.contentType == nil && part.headerFields.isEmpty
            var value: [UInt8]
            switch part.content.storage {
            case .bytes(let bytes)
            where isPlainField && !bytes.contains(0)
                && String(validating: bytes, as: UTF8.self) != nil:
                // Taken literally: a leading @ or < and ";type=" mean nothing to --form-string.
                arguments += [
                    "--form-string", ShellQuoting.quote(part.name + "=" + String(decoding: bytes, as: UTF8.self)),
                ]
                continue
            case .bytes(let bytes) where !bytes.contains(0):
                value = Array("\"".utf8) + escapedForCurl(bytes) + Array("\"".utf8)
            case .file(let file) where wholeFilePath(file) != nil:
                // "@" makes a file part (curl names it after the file unless told); "<" sends the content alone.
                let path = escapedForCurl(Array(wholeFilePath(file)!.utf8))
                value = Array((part.fileName == nil ? "<\"" : "@\"").utf8) + path + Array("\"".utf8)
            case .bytes, .file, .stream:
                value = Array((part.fileName == nil ? "<-" : "@-").utf8)
                let what: String
                switch part.content.storage {
                case .file(let file): what = describe(file)
                case .stream: what = "a stream"
                case .bytes: what = "bytes with NUL"
                }
                placeholders.append("form part \"\(part.name)\" (\(what))")
            }
            if let fileName = part.fileName {
                value += Array(";filename=\"".utf8) + escapedForCurl(Array(fileName.utf8)) + Array("\"".utf8)
            }
            if let contentType = part.contentType { value += Array(";type=\(contentType)".utf8) }
            for field in part.headerFields {
                value +=
                    Array(";headers=\"".utf8) + escapedForCurl(Array("\(field.name): \(field.value)".utf8))
                    + Array("\"".utf8)
            }
            arguments += ["-F", ShellQuoting.quote(bytes: Array(part.name.utf8) + Array("=".utf8) + value)]
        }
        return arguments
    }

    /// A double-quoted word for curl's form syntax: `\` and `"` escaped with a backslash.
    private static func escapedForCurl(_ bytes: [UInt8]) -> [UInt8] {
        var escaped: [UInt8] = []
        escaped.reserveCapacity(bytes.count)
        for byte in bytes {
            if byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") { escaped.append(UInt8(ascii: "\\")) }
            escaped.append(byte)
        }
        return escaped
    }

    /// The path of a file body that sends the whole file, which `@path` reproduces.
    private static func wholeFilePath(_ file: FileBody) -> String? {
        guard let path = file.path, file.offset == 0, file.length == nil else { return nil }
        return path
    }

    private static func describe(_ file: FileBody) -> String {
        let range = file.length.map { "bytes \(file.offset)..<\(file.offset + $0)" } ?? "from byte \(file.offset)"
        if let path = file.path { return "\(range) of \(path)" }
        return "\(range) of descriptor \(file.descriptor ?? -1)"
    }

    /// Seconds for curl, to the millisecond; a duration too long for milliseconds as the longest curl takes
    /// (`LONG_MAX / 1000` seconds), where the multiplication used to trap.
    private static func seconds(_ duration: Duration) -> String {
        let milliseconds = duration.saturatingMilliseconds
        if milliseconds == .max { return String(Int64.max / 1000) }
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
        let isText =
            bytes.allSatisfy { $0 >= 0x20 || $0 == 0x0A || $0 == 0x09 || $0 == 0x0D }
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
        try makeRequest(for: route).curlCommand()
    }
}
