import GroserServer
import GroserSystem
import Testing

/// A connection's owed output, in chunks below glibc's mmap threshold.
@Suite("owed output in chunks")
struct OutputChunksTests {
    /// Random appends (up to 200 KiB, so across chunk boundaries) and
    /// random writes from the front, against one plain array.
    @Test func randomAppendsAndWritesGiveBackExactlyWhatWentIn() {
        var rng = SplitMix64(seed: 7)
        var chunks = OutputChunks()
        var expected: [UInt8] = []
        var written: [UInt8] = []
        var sent = 0
        for step in 0..<2000 {
            if rng.next() % 3 != 0 {
                let n = Int(rng.next() % (rng.next() % 8 == 0 ? 200_000 : 3000))
                let piece = (0..<n).map { UInt8(truncatingIfNeeded: sent + $0 + step) }
                sent += n
                chunks.append(piece)
                expected += piece
            } else if !chunks.isEmpty {
                // A socket takes at most what one write offers: the first chunk's bytes.
                let want = Int(rng.next() % 100_000) + 1
                let taken = chunks.withFirstBytes { Array($0.prefix(want)) }
                #expect(!taken.isEmpty, "owed output with nothing to write")
                #expect(chunks.withFirstBytes { $0.count } <= OutputChunks.chunkBytes)
                written += taken
                chunks.consume(taken.count)
            }
            #expect(chunks.count == expected.count - written.count)
        }
        while !chunks.isEmpty {
            let taken = chunks.withFirstBytes { Array($0) }
            written += taken
            chunks.consume(taken.count)
        }
        #expect(written == expected)
        #expect(chunks.bytes.isEmpty && chunks.withFirstBytes { $0.isEmpty })
    }

    @Test func noChunkIsAsLargeAsGlibcsMmapThreshold() {
        var chunks = OutputChunks()
        chunks.append([UInt8](repeating: 1, count: 1_600_000))
        chunks.append([UInt8](repeating: 2, count: 10))
        var sizes: [Int] = []
        while !chunks.isEmpty {
            let n = chunks.withFirstBytes { $0.count }
            sizes.append(n)
            chunks.consume(n)
        }
        #expect(sizes.allSatisfy { $0 <= 64 * 1024 } && sizes.reduce(0, +) == 1_600_010, "\(sizes)")
        #expect(OutputChunks.chunkBytes < 128 * 1024)
    }
}
