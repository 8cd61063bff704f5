import Synchronization
import Testing

@testable import CurlewEngine

/// The hand-over of a streamed body to its reader, without a transfer: chunks, the end, and cancellation.
@Suite("Response body buffer")
struct ResponseBodyBufferTests {
    @Test func aReaderGetsTheBufferedChunksInOrderThenTheEnd() async throws {
        let buffer = ResponseBodyBuffer(limit: 1024, resumeReceiving: {})
        #expect(offer(buffer, [1, 2]))
        #expect(offer(buffer, [3]))
        buffer.complete(.success(TransferMetrics(bytesReceived: 3)))
        #expect(try await buffer.next(onCancel: {}) == [1, 2])
        #expect(try await buffer.next(onCancel: {}) == [3])
        #expect(try await buffer.next(onCancel: {}) == nil)
        #expect(buffer.finalMetrics?.bytesReceived == 3)
    }

    @Test func aFullBufferRefusesTheNextChunk() {
        let buffer = ResponseBodyBuffer(limit: 2, resumeReceiving: {})
        #expect(offer(buffer, [1, 2]))
        #expect(!offer(buffer, [3]))
    }

    /// A reader that runs late finds the whole body buffered; once its task is cancelled it must still stop there,
    /// and cancel the transfer, rather than read on as if nothing happened.
    @Test func aCancelledReaderStopsEvenWhenTheWholeBodyIsBuffered() async throws {
        let buffer = ResponseBodyBuffer(limit: 1024, resumeReceiving: {})
        #expect(offer(buffer, [1, 2, 3]))
        buffer.complete(.success(TransferMetrics(bytesReceived: 3)))
        let cancelled = Atomic<Int>(0)
        let reader = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await buffer.next(onCancel: { cancelled.add(1, ordering: .relaxed) })
        }
        await #expect(throws: CancellationError.self) { try await reader.value }
        #expect(cancelled.load(ordering: .relaxed) == 1)
    }
}

private func offer(_ buffer: ResponseBodyBuffer, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { buffer.offer($0) }
}
