import Foundation
import HTTPTypes
import Testing

@testable import CurlewEngine

/// `Transfer.setup(for:settings:sink:submittedAt:)`: what the state machine decides with, from a request and its
/// client, computed without a loop or libcurl.
@Suite("Transfer setup")
struct TransferSetupTests {
    static func setup(
        _ request: CurlewRequest, sink: ResponseSink = .collect, submittedAt: UInt64 = 1_000,
        configure: (inout CurlewClient.Configuration) -> Void = { _ in }
    ) -> TransferStateMachine.Setup {
        var configuration = CurlewClient.Configuration()
        configure(&configuration)
        return Transfer.setup(
            for: request, settings: ClientSettings(configuration: configuration), sink: sink, submittedAt: submittedAt)
    }

    /// The setup knows a request has fields only a proxy gets, so the machine can take them off at a redirect; an
    /// empty `Proxy-Authorization` is none.
    @Test func aNonEmptyProxyAuthorizationIsAProxyField() throws {
        var request = try CurlewRequest(url: "http://a.test/")
        #expect(!Self.setup(request).hasProxyHeaderLines)
        try request.addHeader("Proxy-Authorization", "")
        #expect(!Self.setup(request).hasProxyHeaderLines)
        try request.addHeader("Proxy-Authorization", "Basic eA==")
        #expect(Self.setup(request).hasProxyHeaderLines)
    }

    /// A proxy scheme libcurl does not take is named when it is a scheme by RFC 3986's grammar (digits included),
    /// and not quoted otherwise: what comes before `://` may be a password the URL was mistyped around.
    @Test(arguments: [
        ("http2://127.0.0.1:1", "\"http2\""), ("htps://u:p@127.0.0.1:1", "\"htps\""),
        ("u:hunter2@x://127.0.0.1", "that is not a scheme"), ("2http://127.0.0.1", "that is not a scheme"),
    ])
    func anUnsupportedProxySchemeIsNamedOnlyWhenItIsAScheme(proxy: String, shown: String) throws {
        let error = try #require(Transfer.unsupportedProxyScheme(proxy))
        #expect(error.code == .invalidRequest)
        #expect(error.detail.contains("scheme \(shown) is not one of"), "\(error)")
        #expect(!error.detail.contains("hunter2"))
        #expect(Transfer.unsupportedProxyScheme("SOCKS5H://127.0.0.1:1") == nil)
    }

    @Test func subSecondTimeoutsAreKeptToTheNanosecond() throws {
        var request = try CurlewRequest(url: "http://127.0.0.1:1/")
        request.timeouts = .init(total: .milliseconds(1900), idle: .milliseconds(250))
        let setup = Self.setup(request)
        #expect(setup.totalDeadline == 1_000 + 1_900_000_000)
        #expect(setup.idleTimeout == 250_000_000)
    }

    @Test func timeoutsTooFarToRepresentAreNoTimeouts() throws {
        var request = try CurlewRequest(url: "http://127.0.0.1:1/")
        request.timeouts = .init(total: .seconds(Int64.max), idle: .seconds(Int64.max))
        let setup = Self.setup(request)
        #expect(setup.totalDeadline == .max)
        #expect(setup.idleTimeout == 0)
    }

    /// The connect timeout counts from submission (note 0028); none is libcurl's 300 s, counted the same way.
    @Test func theConnectionDeadlineIsTheConnectTimeoutFromSubmission() throws {
        var request = try CurlewRequest(url: "http://127.0.0.1:1/")
        #expect(Self.setup(request).connectionDeadline == 1_000 + 10_000_000_000)
        request.timeouts.connect = .some(.milliseconds(1500))
        #expect(Self.setup(request).connectionDeadline == 1_000 + 1_500_000_000)
        request.timeouts.connect = .some(nil)
        #expect(Self.setup(request).connectionDeadline == 1_000 + 300_000_000_000)
        request.timeouts.connect = .some(.seconds(Int64.max))
        #expect(Self.setup(request).connectionDeadline == .max)
    }

    /// A repeated transfer's next request reuses the last setup with its deadlines moved to the new submission:
    /// the same as computing it again there, for every timeout, none and one too far to represent.
    @Test func aResubmittedSetupIsTheSetupComputedAtTheNewSubmission() throws {
        var request = try CurlewRequest(url: "http://127.0.0.1:1/")
        let overrides: [CurlewRequest.TimeoutOverrides] = [
            .init(), .init(total: .milliseconds(1900), idle: .milliseconds(250)),
            .init(connect: .milliseconds(1500), total: .seconds(Int64.max)), .init(connect: .some(nil)),
            .init(connect: .seconds(Int64.max), total: .seconds(3)),
        ]
        let submissions: [(earlier: UInt64, now: UInt64)] = [
            (1_000, 1_000), (1_000, 5_000_000_000), (0, UInt64.max - 2_000_000_000),
        ]
        for timeout in overrides {
            request.timeouts = timeout
            for (earlier, now) in submissions {
                let resubmitted = Self.setup(request, submittedAt: earlier).resubmitted(from: earlier, at: now)
                #expect(resubmitted == Self.setup(request, submittedAt: now), "\(timeout) from \(earlier) to \(now)")
            }
        }
    }

    @Test func theClientsBodyLimitBoundsMemoryOnly() throws {
        let request = try CurlewRequest(url: "http://127.0.0.1:1/")
        let configure: (inout CurlewClient.Configuration) -> Void = { $0.maxResponseBodySize = 1_000 }
        let collected = Self.setup(request, configure: configure)
        #expect(collected.bodyLimit == 1_000)
        #expect(collected.inMemoryBodyLimit == 1_000)
        let discarded = Self.setup(request, sink: .discard, configure: configure)
        #expect(discarded.bodyLimit == Int64(Int.max))
        let download = Self.setup(request, sink: .file(FileSink(descriptor: -1)), configure: configure)
        #expect(download.bodyLimit == Int64(Int.max))
        #expect(download.inMemoryBodyLimit == 1_000, "a failed download's explanation is kept in memory")
    }

    @Test func aDecodedLimitAppliesOnlyWhenSmallerThanTheBodyLimit() throws {
        var request = try CurlewRequest(url: "http://127.0.0.1:1/")
        request.decompression = .enabledWithLimit(500)
        request.maxResponseBodySize = 1_000
        #expect(Self.setup(request).decodedBodyLimit == 500)
        request.maxResponseBodySize = 100
        #expect(Self.setup(request).decodedBodyLimit == nil)
    }

    @Test func theRequestsFactsTheDecisionsDependOn() throws {
        var upload = try CurlewRequest(method: .put, url: "http://127.0.0.1:1/")
        upload.body = .bytes(Array("x".utf8))
        upload.expectContinue = .enabled(timeout: .seconds(1))
        upload.headerFields[.authorization] = "Bearer secret"
        let setup = Self.setup(upload, sink: .discard)
        #expect(setup.hasRequestBody)
        #expect(setup.sentExpectContinue)
        #expect(setup.carriesCredentials)
        #expect(!setup.streamsResponse)

        let get = Self.setup(try CurlewRequest(url: "http://127.0.0.1:1/"))
        #expect(!get.hasRequestBody)
        #expect(!get.sentExpectContinue)
        #expect(!get.carriesCredentials)
        #expect(get.followsRedirects == CurlewClient.Configuration().redirects.follow)
    }
}
