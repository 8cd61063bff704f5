import CurlewEngine
import Testing

/// The event-loop choice is a struct: a thread loop with its driver, or the Dispatch loop.
@Suite("Event loop kinds")
struct CurlewClientEventLoopKindTests {
    typealias Kind = CurlewClient.Configuration.EventLoopKind

    @Test func aThreadLoopNamesItsDriverPollByDefaultAndTheDefaultLoopIsDispatch() {
        #expect(Kind.thread == .thread(driver: .poll))
        #expect(Kind.thread.threadDriver == .poll)
        #expect(Kind.thread(driver: .socketAction).threadDriver == .socketAction)
        #expect(Kind.dispatch.threadDriver == nil)
        #expect(CurlewClient.Configuration().eventLoop == .dispatch)
    }

    @Test func everyKindHasAStableDescriptionAndIsDistinct() {
        let kinds: [Kind] = [.thread, .thread(driver: .socketAction), .dispatch]
        #expect(kinds.map(\.description) == ["thread(poll)", "thread(socket-action)", "dispatch"])
        #expect(Set(kinds).count == 3)
    }

    @Test func everyLoopOffersATaskExecutor() async {
        for kind: Kind in [.thread, .thread(driver: .socketAction), .dispatch] {
            var configuration = CurlewClient.Configuration()
            configuration.eventLoop = kind
            configuration.loopCount = 2
            let client = CurlewClient(configuration: configuration)
            #expect(client.executors.count == 2, "\(kind)")
            await client.shutdown()
        }
    }
}

/// The configuration's choices are structs, compared with `==` and read through properties.
@Suite("Configuration choices")
struct CurlewClientConfigurationChoiceTests {
    @Test func httpVersionsHaveStableNamesAndTheDefaultIsHTTP2() {
        let versions: [CurlewClient.HTTPVersion] = [.http1_1, .http2, .http2PriorKnowledge]
        #expect(versions.map(\.name) == ["http1_1", "http2", "http2PriorKnowledge"])
        #expect(versions.map(\.description) == versions.map(\.name))
        #expect(Set(versions).count == 3)
        #expect(CurlewClient.Configuration().httpVersion == .http2)
    }

    @Test func decompressionSaysWhetherItDecodesAndWithWhichLimit() {
        let choices: [CurlewClient.Decompression] = [.disabled, .enabled, .enabledWithLimit(64)]
        #expect(choices.map(\.isEnabled) == [false, true, true])
        #expect(choices.map(\.decodedSizeLimit) == [nil, nil, 64])
        #expect(choices.map(\.description) == ["disabled", "enabled", "enabledWithLimit(64)"])
        #expect(CurlewClient.Decompression.enabledWithLimit(64) != .enabledWithLimit(65))
        #expect(CurlewClient.Configuration().decompression == .enabled)
    }

    @Test func aProxyKeepsItsURLAndExceptionsButDoesNotPrintTheURL() {
        let proxy = CurlewClient.Proxy.url("http://user:secret@127.0.0.1:3128", noProxy: "localhost")
        #expect(proxy.url == "http://user:secret@127.0.0.1:3128")
        #expect(proxy.noProxy == "localhost")
        #expect(CurlewClient.Proxy.url("http://p:1").noProxy == nil)
        #expect(CurlewClient.Proxy.environment.url == nil)
        #expect(CurlewClient.Proxy.none.url == nil)
        #expect([CurlewClient.Proxy.environment, .none, proxy].map(\.description) == ["environment", "none", "url"])
        #expect(CurlewClient.Proxy.environment != .none)
        #expect(proxy == .url("http://user:secret@127.0.0.1:3128", noProxy: "localhost"))
        #expect(CurlewClient.Configuration().proxy == .environment)
    }

    @Test func expectContinueKeepsItsTimeout() {
        let enabled = CurlewClient.ExpectContinue.enabled(timeout: .milliseconds(200))
        #expect(enabled.timeout == .milliseconds(200))
        #expect(CurlewClient.ExpectContinue.disabled.timeout == nil)
        #expect(enabled.description == "enabled(timeout: 0.2 seconds)")
        #expect(CurlewClient.ExpectContinue.disabled.description == "disabled")
        #expect(enabled != .enabled(timeout: .seconds(1)))
        #expect(CurlewClient.Configuration().expectContinue == .disabled)
    }
}
