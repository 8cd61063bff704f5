import CLibCurl
import Glibc
import Testing

/// The allocation functions the engine hands libcurl (CLibCurl/shims.h): they must behave exactly like glibc's calloc
/// and realloc, whatever path a size takes (the thread cache below 64 KiB, glibc's own above).
@Suite struct CurlAllocatorTests {
    @Test(arguments: [1, 24, 752, 1496, 65_535, 65_536, 300_000])
    func callocReturnsZeroedMemoryEvenWhereADirtyBlockWasJustFreed(size: Int) throws {
        // A freed block of the same size is what malloc hands out next from the thread cache.
        let dirty = try #require(malloc(size))
        memset(dirty, 0xA5, size)
        free(dirty)
        let block = try #require(curlew_curl_calloc(1, size))
        defer { free(block) }
        let bytes = UnsafeRawBufferPointer(start: block, count: size)
        #expect(bytes.allSatisfy { $0 == 0 })
    }

    @Test func callocRefusesASizeThatOverflows() {
        #expect(curlew_curl_calloc(Int.max / 2, 4) == nil)
    }

    @Test func reallocKeepsEveryByteWhileGrowingAcrossTheLargeBlockThresholdAndShrinkingBack() throws {
        var size = 16
        var block = try #require(curlew_curl_realloc(nil, size))
        fill(block, count: size)
        // libcurl's buffers double as they grow; go well past 64 KiB, then shrink in steps.
        for next in [40, 100, 1_000, 16_384, 70_000, 200_000, 50_000, 3_000, 10] {
            block = try #require(curlew_curl_realloc(block, next))
            let kept = min(size, next)
            #expect(isFilled(block, count: kept), "lost bytes going from \(size) to \(next)")
            fill(block, count: next)
            size = next
        }
        free(block)
    }

    private func pattern(at index: Int) -> UInt8 { UInt8(truncatingIfNeeded: index &* 31 &+ 7) }

    private func fill(_ block: UnsafeMutableRawPointer, count: Int) {
        for index in 0..<count { block.storeBytes(of: pattern(at: index), toByteOffset: index, as: UInt8.self) }
    }

    private func isFilled(_ block: UnsafeMutableRawPointer, count: Int) -> Bool {
        (0..<count).allSatisfy { block.load(fromByteOffset: $0, as: UInt8.self) == pattern(at: $0) }
    }
}
