import Testing

@testable import CurlewLoad

@Suite struct BenchConnectToTests {
    @Test func readsFourFieldsWithBracketedIPv6AndEmptyOnes() throws {
        let entry = try BenchConnectTo.parse("example.com:443:[::1]:8443")
        #expect(entry == BenchConnectTo(host: "example.com", port: 443, connectToHost: "[::1]", connectToPort: 8443))
        #expect(entry.description == "example.com:443:[::1]:8443")
        let any = try BenchConnectTo.parse("::backend:")
        #expect(any == BenchConnectTo(host: "", port: nil, connectToHost: "backend", connectToPort: nil))
        #expect(try BenchConnectTo.parse("[fe80::1%25eth0]:80:10.0.0.1:8080").host == "[fe80::1%25eth0]")
    }

    /// libcurl reads these only when a transfer connects, then fails every transfer: they are usage errors here.
    @Test(arguments: [
        "a:1:b", "a:1:b:2:3", "a:http:b:2", "a:1:b:65536", "a:1:b:0", "a:1:b:-1", "[::1:1:b:2", "[]:1:b:2",
        "a b:1:c:2", "::1:443:b:2",
    ])
    func refusesMalformedEntriesNamingTheFormat(text: String) {
        let error = #expect(throws: BenchConnectTo.ParseError.self) { try BenchConnectTo.parse(text) }
        #expect(error?.description.contains("HOST:PORT:HOST2:PORT2") == true)
    }
}
