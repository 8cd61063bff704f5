import CurlewEngine
import Testing

/// The event-loop choice is a struct: a thread loop with its driver, or the Dispatch loop.
@Suite("Event loop kinds")
struct CurlewClientEventLoopKindTests {
    typealias Kind = CurlewClient.Configuration.EventLoopKind

    @Test func aThreadLoopNamesItsDriverAndTheDefaultIsPoll() {
        #expect(Kind.thread == .thread(driver: .poll))
        #expect(Kind.thread.threadDriver == .poll)
        #expect(Kind.thread(driver: .socketAction).threadDriver == .socketAction)
        #expect(Kind.dispatch.threadDriver == nil)
        #expect(CurlewClient.Configuration().eventLoop == .thread)
    }

    @Test func everyKindHasAStableDescriptionAndIsDistinct() {
        let kinds: [Kind] = [.thread, .thread(driver: .socketAction), .dispatch]
        #expect(kinds.map(\.description) == ["thread(poll)", "thread(socket-action)", "dispatch"])
        #expect(Set(kinds).count == 3)
    }

    @Test func onlyThreadLoopsOfferTaskExecutors() async {
        for kind: Kind in [.thread, .thread(driver: .socketAction), .dispatch] {
            var configuration = CurlewClient.Configuration()
            configuration.eventLoop = kind
            configuration.loopCount = 2
            let client = CurlewClient(configuration: configuration)
            #expect(client.executors.count == (kind == .dispatch ? 0 : 2), "\(kind)")
            await client.shutdown()
        }
    }
}
