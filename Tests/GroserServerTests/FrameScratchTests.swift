@testable import GroserServer
import Testing

/// A shard's batch frames leave in arrays the scratch takes back once the
/// loop has dropped every slice of one: a batch then allocates nothing, and
/// an array still held is never written again.
@Suite("frame scratch")
struct FrameScratchTests {
    /// The batch's frames (the taken array's first bytes: the rest of it is room).
    static func batch(_ scratch: FrameScratch, _ bytes: [UInt8]) -> [UInt8] {
        let placed = scratch.append(bytes)
        let whole = scratch.take()
        #expect(placed == 0..<bytes.count)
        return Array(whole[placed])
    }

    /// The batch's whole array.
    static func array(_ scratch: FrameScratch, _ bytes: [UInt8]) -> [UInt8] {
        _ = scratch.append(bytes)
        return scratch.take()
    }

    static func address(_ a: [UInt8]) -> UnsafeRawPointer? { a.withUnsafeBytes { $0.baseAddress } }

    @Test func anArrayTheLoopDroppedIsFilledAgain() {
        let scratch = FrameScratch()
        var first: [UInt8]? = Self.array(scratch, [1, 2, 3])
        #expect(first?.prefix(3) == [1, 2, 3])
        let storage = Self.address(first!)
        first = nil
        let second = Self.array(scratch, [4, 5])
        #expect(second.prefix(2) == [4, 5])
        #expect(Self.address(second) == storage, "the dropped array is reused, not a new one made")
    }

    @Test func anArrayStillHeldIsNeverWrittenAgain() {
        let scratch = FrameScratch()
        let whole = Self.array(scratch, [1, 2, 3, 4])
        let held = whole[1..<3]  // one answer's slice, held by a slow connection
        var made: [UnsafeRawPointer?] = [Self.address(whole)]
        for n in 0..<20 {
            let next = Self.array(scratch, [UInt8](repeating: UInt8(10 + n), count: 3))
            #expect(next.prefix(3) == [UInt8](repeating: UInt8(10 + n), count: 3)[...])
            made.append(Self.address(next))
        }
        #expect(Array(held) == [2, 3], "the held slice's bytes are untouched")
        #expect(Self.address(whole) == made[0])
        #expect(!made.dropFirst().contains(made[0]), "the held array was not handed out again")
    }

    @Test func smallBatchesDoNotKeepTakingALargeArray() {
        // An answer a connection holds keeps its whole array alive: a batch
        // takes an array fit for the last batch's size, so after a large
        // batch only the next one may write into a large array.
        let scratch = FrameScratch()
        var big: [UInt8]? = Self.array(scratch, [UInt8](repeating: 1, count: 50_000))
        let bigStorage = Self.address(big!)
        big = nil
        #expect(Self.batch(scratch, [2, 3]) == [2, 3])
        let small = Self.array(scratch, [4, 5])
        #expect(small.prefix(2) == [4, 5])
        #expect(Self.address(small) != bigStorage && small.count < 1_000, "a 2-byte batch after a 2-byte batch leaves in a small array")
    }

    @Test func aBatchLargerThanItsArrayMovesItsFramesToALargerOne() {
        let scratch = FrameScratch()
        _ = Self.batch(scratch, [7])
        let first = scratch.append([1, 2, 3])
        let big = [UInt8](repeating: 9, count: 100_000)
        let second = scratch.append(big)
        let whole = scratch.take()
        #expect(Array(whole[first]) == [1, 2, 3], "the frames written before the array grew are where they were")
        #expect(Array(whole[second]) == big)
        #expect(Self.batch(scratch, [8]) == [8])
    }

    @Test func aFrameIsWrittenExactlyWhereItsSliceSays() {
        let scratch = FrameScratch()
        var placed: [(Range<Int>, [UInt8])] = []
        for n in 1...40 {
            let frame = [UInt8](repeating: UInt8(n), count: n * 7)
            placed.append((scratch.append(frame), frame))
        }
        let whole = scratch.take()
        for (range, frame) in placed { #expect(Array(whole[range]) == frame) }
        let written: Int = placed.reduce(0) { $0 + $1.0.count }
        #expect(written == 7 * 40 * 41 / 2, "the slices are the frames, back to back")
    }
}
