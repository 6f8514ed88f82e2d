@testable import GroserServer
import Testing

/// A shard's batch frames leave in arrays the scratch takes back once the
/// loop has dropped every slice of one: a batch then allocates nothing, and
/// an array still held is never written again.
@Suite("frame scratch")
struct FrameScratchTests {
    static func batch(_ scratch: FrameScratch, _ bytes: [UInt8]) -> [UInt8] {
        _ = scratch.append(bytes)
        return scratch.take()
    }

    static func address(_ a: [UInt8]) -> UnsafeRawPointer? { a.withUnsafeBytes { $0.baseAddress } }

    @Test func anArrayTheLoopDroppedIsFilledAgain() {
        let scratch = FrameScratch()
        var first: [UInt8]? = Self.batch(scratch, [1, 2, 3])
        #expect(first == [1, 2, 3])
        let storage = Self.address(first!)
        first = nil
        let second = Self.batch(scratch, [4, 5])
        #expect(second == [4, 5])
        #expect(Self.address(second) == storage, "the dropped array is reused, not a new one made")
    }

    @Test func anArrayStillHeldIsNeverWrittenAgain() {
        let scratch = FrameScratch()
        let whole = Self.batch(scratch, [1, 2, 3, 4])
        let held = whole[1..<3]  // one answer's slice, held by a slow connection
        var made: [UnsafeRawPointer?] = [Self.address(whole)]
        for n in 0..<20 {
            let next = Self.batch(scratch, [UInt8](repeating: UInt8(10 + n), count: 3))
            #expect(next == [UInt8](repeating: UInt8(10 + n), count: 3))
            made.append(Self.address(next))
        }
        #expect(Array(held) == [2, 3], "the held slice's bytes are untouched")
        #expect(Self.address(whole) == made[0])
        #expect(!made.dropFirst().contains(made[0]), "the held array was not handed out again")
    }

    @Test func aSmallBatchDoesNotTakeALargeArray() {
        // An answer a connection holds keeps its whole array alive.
        let scratch = FrameScratch()
        var big: [UInt8]? = Self.batch(scratch, [UInt8](repeating: 1, count: 50_000))
        let bigStorage = Self.address(big!)
        big = nil
        let small = Self.batch(scratch, [2, 3])
        #expect(small == [2, 3])
        #expect(Self.address(small) != bigStorage && small.capacity < 1_000, "a 2-byte batch leaves in a small array")
    }

    @Test func aBatchLargerThanEveryArrayGetsANewOne() {
        let scratch = FrameScratch()
        _ = Self.batch(scratch, [7])
        let big = [UInt8](repeating: 9, count: 100_000)
        #expect(Self.batch(scratch, big) == big)
        #expect(Self.batch(scratch, [8]) == [8])
    }
}
