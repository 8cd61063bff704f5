import Testing

@testable import CurlewEngine

/// `ConnectionRegistry`: which connection a key names, and which socket a key's check uses.
@Suite("Connection registry")
struct ConnectionRegistryTests {
    static func key(_ remote: String, _ local: String, remotePort: Int32 = 443, localPort: Int32 = 40_000) -> Int {
        remote.withCString { remote in
            local.withCString { local in
                ConnectionRegistry.key(
                    remoteAddress: remote, localAddress: local, remotePort: remotePort, localPort: localPort)
            }
        }
    }

    /// Linux gives one local port to connections with different peers: the ports alone would name two live
    /// connections, and a reuse of one would be checked on the other's socket.
    @Test func connectionsOnTheSamePortsToOtherAddressesHaveKeysOfTheirOwn() {
        let first = Self.key("10.0.0.1", "10.0.0.9")
        #expect(first == Self.key("10.0.0.1", "10.0.0.9"))
        #expect(first != Self.key("10.0.0.2", "10.0.0.9"), "another peer")
        #expect(first != Self.key("10.0.0.1", "10.0.0.8"), "another local address")
        #expect(first != Self.key("10.0.0.19", "10.0.0.9"), "an address that is a prefix of another")
        #expect(first != Self.key("10.0.0.1", "10.0.0.9", remotePort: 444))
        #expect(first != Self.key("10.0.0.1", "10.0.0.9", localPort: 40_001))
        #expect(Self.key("::1", "::1") != Self.key("127.0.0.1", "127.0.0.1"))
        // The address boundary counts: "1.2" + "3" is not "1" + "23".
        #expect(Self.key("1.2", "3") != Self.key("1", "23"))
    }

    @Test func theNewestConnectionOnAKeyIsTheOneChecked() {
        let registry = ConnectionRegistry()
        let key = Self.key("127.0.0.1", "127.0.0.1")
        #expect(registry.socketToCheck(for: key) == nil)
        registry.register(7, for: key)
        registry.register(9, for: key)
        #expect(registry.socketToCheck(for: key) == 9)
        #expect(registry.socketToCheck(for: Self.key("127.0.0.2", "127.0.0.1")) == nil)
    }
}
