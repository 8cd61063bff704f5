/// One `--connect-to HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT` entry, as libcurl's `CURLOPT_CONNECT_TO` reads it:
/// requests for HOST:PORT go to CONNECT-TO-HOST:CONNECT-TO-PORT. An empty HOST or PORT matches any; an empty
/// CONNECT-TO-HOST or CONNECT-TO-PORT keeps the request's own. IPv6 addresses are in brackets (`[::1]`).
///
/// libcurl reads the entries only when a transfer connects, and fails each transfer of a malformed one; parsing
/// them here makes a typo a usage error before anything is sent.
package struct BenchConnectTo: Sendable, Equatable, CustomStringConvertible {
    package var host: String
    package var port: Int?
    package var connectToHost: String
    package var connectToPort: Int?

    package struct ParseError: Error, CustomStringConvertible {
        package let description: String
    }

    /// The entry as libcurl reads it (what ``parse(_:)`` was given).
    package var description: String {
        [host, port.map(String.init) ?? "", connectToHost, connectToPort.map(String.init) ?? ""]
            .joined(separator: ":")
    }

    /// - Throws: ``ParseError`` naming the field that is wrong.
    package static func parse(_ text: String) throws(ParseError) -> BenchConnectTo {
        func fail(_ reason: String) -> ParseError {
            ParseError(description: "--connect-to \(text.debugDescription) is not HOST:PORT:HOST2:PORT2 (\(reason))")
        }
        // Byte by byte, as libcurl splits it: a colon is a separator whatever follows it.
        let bytes = Array(text.utf8)
        var position = 0
        func field(until end: (UInt8) -> Bool) -> String {
            let start = position
            while position < bytes.count, !end(bytes[position]) { position += 1 }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        }
        func readHost() throws(ParseError) -> String {
            if position < bytes.count, bytes[position] == UInt8(ascii: "[") {
                let address = field { $0 == UInt8(ascii: "]") }
                guard position < bytes.count else { throw fail("an IPv6 address without its ]") }
                position += 1
                guard address.utf8.count > 1 else { throw fail("empty brackets") }
                return address + "]"
            }
            let name = field { $0 == UInt8(ascii: ":") }
            guard !name.utf8.contains(where: { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") || $0 <= 0x20 })
            else { throw fail("the host \(name.debugDescription) holds a bracket, a space or a control character") }
            return name
        }
        func skipColon() throws(ParseError) {
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                throw fail("four fields separated by colons")
            }
            position += 1
        }
        func readPort(last: Bool) throws(ParseError) -> Int? {
            let digits = field { !last && $0 == UInt8(ascii: ":") }
            if digits.isEmpty { return nil }
            guard digits.utf8.count <= 5, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let number = Int(digits), (1...65535).contains(number)
            else { throw fail("the port \(digits.debugDescription) is not a number from 1 to 65535") }
            return number
        }
        let host = try readHost()
        try skipColon()
        let port = try readPort(last: false)
        try skipColon()
        let connectToHost = try readHost()
        try skipColon()
        let connectToPort = try readPort(last: true)
        return BenchConnectTo(host: host, port: port, connectToHost: connectToHost, connectToPort: connectToPort)
    }
}
