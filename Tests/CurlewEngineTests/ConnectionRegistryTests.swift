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

    /// A descriptor names one socket at a time: when it carries a new connection, the one it carried before is
    /// closed, and its entry goes. A long-lived client meeting ever new peers keeps one entry per descriptor.
    @Test func aDescriptorsNewConnectionReplacesTheOneItCarriedBefore() {
        let registry = ConnectionRegistry()
        for peer in 0..<1_000 {
            registry.register(Int32(5 + peer % 4), for: Self.key("10.0.\(peer / 256).\(peer % 256)", "10.1.0.1"))
        }
        #expect(registry.count == 4)
        #expect(registry.socketToCheck(for: Self.key("10.0.3.231", "10.1.0.1")) == 8, "the newest connection")
        #expect(registry.socketToCheck(for: Self.key("10.0.0.0", "10.1.0.1")) == nil, "closed long ago")
    }

    /// A key whose connection came back on another descriptor keeps its entry when the old descriptor carries
    /// something else.
    @Test func aKeyThatMovedToAnotherDescriptorOutlivesItsOldDescriptor() {
        let registry = ConnectionRegistry()
        let moved = Self.key("127.0.0.1", "127.0.0.1", localPort: 40_000)
        registry.register(5, for: moved)
        registry.register(6, for: moved)
        registry.register(5, for: Self.key("127.0.0.1", "127.0.0.1", localPort: 40_001))
        #expect(registry.socketToCheck(for: moved) == 6)
        #expect(registry.count == 2)
    }

    @Test func usesAreCountedPerConnectionAndStartAgainOnANewOne() {
        let registry = ConnectionRegistry()
        let key = Self.key("127.0.0.1", "127.0.0.1")
        registry.register(5, for: key)
        #expect(registry.countUse(of: key, isNewConnection: true) == 1)
        #expect(registry.countUse(of: key, isNewConnection: false) == 2)
        #expect(registry.countUse(of: key, isNewConnection: false) == 3)
        registry.register(6, for: key)
        #expect(registry.countUse(of: key, isNewConnection: true) == 1, "a new connection on the same ports")
        // A connection whose socket the engine never saw opened is counted, and never checked.
        let unseen = Self.key("127.0.0.2", "127.0.0.1")
        #expect(registry.countUse(of: unseen, isNewConnection: false) == 1)
        #expect(registry.countUse(of: unseen, isNewConnection: false) == 2)
        #expect(registry.socketToCheck(for: unseen) == nil)
        // The descriptor's next connection drops its earlier one with its count.
        registry.register(6, for: Self.key("127.0.0.3", "127.0.0.1"))
        #expect(registry.countUse(of: key, isNewConnection: false) == 1)
    }

    /// A connection a response came back on in HTTP/1 is known to speak it (an https request that allowed HTTP/2
    /// found a server without it); a new connection under the same key is not, until its own response says so.
    @Test func aConnectionIsKnownToSpeakHTTP1OnlyAfterAResponseOnItSaidSo() {
        let registry = ConnectionRegistry()
        let key = Self.key("127.0.0.1", "127.0.0.1")
        registry.noteSpeaksHTTP1(key)
        #expect(!registry.carriesHTTP1(key), "no such connection")
        registry.register(5, for: key)
        #expect(!registry.carriesHTTP1(key))
        registry.noteSpeaksHTTP1(key)
        #expect(registry.carriesHTTP1(key))
        registry.register(6, for: key)
        #expect(!registry.carriesHTTP1(key), "a new connection on the same ports")
        #expect(!registry.carriesHTTP1(Self.key("127.0.0.2", "127.0.0.1")))
    }
}
