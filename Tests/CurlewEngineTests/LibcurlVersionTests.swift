import CurlewEngine
import Testing

/// The version policy is pure: which libcurl the engine runs on and what it does differently on each, decided from
/// the run-time version number alone.
@Suite("libcurl versions")
struct LibcurlVersionTests {
    @Test func versionNumbersReadAsMajorMinorPatch() {
        let version = LibcurlVersion(number: 0x08_0E_01)
        #expect(version.description == "8.14.1")
        #expect(version == LibcurlVersion(8, 14, 1))
        #expect(LibcurlVersion(7, 88, 1) < version)
    }

    @Test func versionsOlderThan7_80AreRefusedWithBothVersionsNamed() {
        for number: UInt32 in [0x07_4C_01, 0x07_4F_01, 0x07_3D_01, 0] {  // RHEL 9's 7.76.1, 7.79.1, RHEL 8's 7.61.1
            let version = LibcurlVersion(number: number)
            #expect(!version.isSupported, "\(version)")
            let reason = version.unsupportedReason ?? ""
            #expect(reason.contains("libcurl \(version) is older than 7.80.0"), "\(reason)")
        }
    }

    @Test func theVersionsCIAndCommonDistributionsShipAreSupported() {
        // 7.80.0 itself, Ubuntu 22.04, Debian 12, Ubuntu 24.04, Debian 13.
        for version in [
            LibcurlVersion(7, 80, 0), LibcurlVersion(7, 81, 0), LibcurlVersion(7, 88, 1),
            LibcurlVersion(8, 5, 0), LibcurlVersion(8, 14, 1),
        ] {
            #expect(version.isSupported, "\(version)")
            #expect(version.unsupportedReason == nil)
        }
    }

    @Test func h2cReuseAndLibcurlsOwnDirtyConnectionCheckStartWith8_0() {
        for version in [LibcurlVersion(7, 80, 0), LibcurlVersion(7, 88, 1)] {
            #expect(!version.reusesPriorKnowledgeHTTP2Connections)
            #expect(!version.refusesPooledConnectionsWithPendingInput)
        }
        for version in [LibcurlVersion(8, 0, 0), LibcurlVersion(8, 14, 1)] {
            #expect(version.reusesPriorKnowledgeHTTP2Connections)
            #expect(version.refusesPooledConnectionsWithPendingInput)
        }
    }

    @Test func theRunningLibcurlIsTheOneTheClientReports() {
        #expect(LibcurlVersion.running.isSupported)
        #expect(CurlewClient.libcurlVersion.hasPrefix(LibcurlVersion.running.description))
        #expect(CurlewClient.oldestSupportedLibcurlVersion == "7.80.0")
        #expect(throws: Never.self) { try CurlewClient.requireSupportedLibcurl() }
    }
}
