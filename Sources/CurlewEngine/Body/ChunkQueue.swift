/// Byte chunks in arrival order, taken from the front whole or in part without moving the rest: the buffer
/// between a body's producer and the read callback, and between the write callback and a body's consumer.
struct ChunkQueue: Sendable {
    private var chunks: [[UInt8]] = []
    private var first = 0
    private var offsetInFirst = 0
    /// The bytes queued and not yet taken.
    private(set) var byteCount = 0

    var isEmpty: Bool { byteCount == 0 }

    mutating func append(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        chunks.append(chunk)
        byteCount += chunk.count
    }

    /// Takes the oldest chunk (what is left of it) whole.
    mutating func popFirst() -> [UInt8]? {
        guard first < chunks.count else { return nil }
        var chunk = chunks[first]
        if offsetInFirst > 0 { chunk = Array(chunk[offsetInFirst...]) }
        byteCount -= chunk.count
        dropFirstChunk()
        return chunk
    }

    /// Copies as many bytes as fit into `buffer`, across chunks; returns how many.
    mutating func copy(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var copied = 0
        while copied < buffer.count, first < chunks.count {
            let count = min(buffer.count - copied, chunks[first].count - offsetInFirst)
            chunks[first].withUnsafeBytes { source in
                (buffer.baseAddress! + copied).copyMemory(from: source.baseAddress! + offsetInFirst, byteCount: count)
            }
            copied += count
            offsetInFirst += count
            if offsetInFirst == chunks[first].count { dropFirstChunk() }
        }
        byteCount -= copied
        return copied
    }

    mutating func removeAll() {
        chunks.removeAll()
        first = 0
        offsetInFirst = 0
        byteCount = 0
    }

    private mutating func dropFirstChunk() {
        chunks[first] = []
        first += 1
        offsetInFirst = 0
        // Taken chunks are released at once; the array itself is compacted now and then, not on every take.
        if first == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            first = 0
        } else if first > 64 {
            chunks.removeFirst(first)
            first = 0
        }
    }
}
