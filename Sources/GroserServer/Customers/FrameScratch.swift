import Synchronization

/// A batch's answer frames, written one after another straight into the
/// array they leave in: a cart answer is written in place (no array per
/// answer, each of which cost about 700 instructions to make and a free on
/// the loop's thread, and no copy of the batch's frames at its end, which
/// callgrind counts at an instruction a byte), and each answer is a range
/// of that array (`append`'s, sent as a `FrameRun` of what `take` returns).
/// The arrays come back: the scratch keeps the last few it handed out, and
/// once the loop holds no part of one it is written again, so a steady
/// batch allocates nothing and the arrays are freed on the shard's thread
/// (but for one over `keptCapacity`, or one made while all those kept were
/// still held, which the loop's thread frees with the answers in it). An
/// array's count is its whole room (zeros, or the frames of an earlier
/// batch), so that a frame can be written anywhere in it; only the ranges
/// a batch placed mean anything. The shard's thread only.
final class FrameScratch {
    // Not checked for exclusivity at run time (the shard's thread alone
    // touches them): each checked access cost about 80 instructions, a few
    // a batch, which at one request a batch (P=1) is a few a request.
    /// The array this batch writes into; the frames are its first `count` bytes.
    @exclusivity(unchecked) private var current: [UInt8] = []
    @exclusivity(unchecked) private(set) var count = 0
    /// The bytes the last batch wrote: what the next one is expected to need.
    @exclusivity(unchecked) private var lastCount = 0
    /// The largest array kept for reuse; a larger one goes back to the allocator.
    static let keptCapacity = 1 << 20
    /// Arrays `take` handed out, held as their storage objects (an array is
    /// one reference to its storage) so that their uniqueness can be asked:
    /// once this is the only reference, the loop is done with every frame
    /// of it. At most `lentLimit`, each of at most `keptCapacity` bytes.
    @exclusivity(unchecked) private var lent: [AnyObject] = []
    static let lentLimit = 8

    init() {
        precondition(MemoryLayout<[UInt8]>.size == MemoryLayout<AnyObject>.size, "FrameScratch: an array is not one reference")
    }

    /// Writes `n` bytes at the end through `write`, which returns how many
    /// it wrote (exactly `n`: a frame sized otherwise is a bug); returns where they are.
    func append(exactly n: Int, _ write: (UnsafeMutableRawPointer) -> Int) -> Range<Int> {
        if count + n > current.count || current.isEmpty { grow(Swift.max(count + n, 1)) }
        let at = count
        let written = current.withUnsafeMutableBytes { write($0.baseAddress! + at) }
        precondition(written == n, "FrameScratch: \(written) bytes written for a frame sized \(n)")
        count += n
        return at..<count
    }

    /// Appends `bytes`; returns where they are.
    func append(_ bytes: [UInt8]) -> Range<Int> {
        append(exactly: bytes.count) { p in
            bytes.withUnsafeBytes { if let b = $0.baseAddress { p.copyMemory(from: b, byteCount: $0.count) } }
            return bytes.count
        }
    }

    /// The array every frame written so far is in (its first `count`
    /// bytes; the ranges `append` returned address them); the scratch is
    /// empty again, writing next into an array the loop has given up, or a
    /// new one.
    func take() -> [UInt8] {
        guard count > 0 else { return [] }
        var frames: [UInt8] = []
        swap(&frames, &current)
        if frames.count <= Self.keptCapacity {
            if lent.count < Self.lentLimit {
                lent.append(unsafeBitCast(frames, to: AnyObject.self))
            } else {
                // A free one that did not fit makes room for this one.
                var i = 0
                while i < lent.count && !isKnownUniquelyReferenced(&lent[i]) { i += 1 }
                if i < lent.count { lent[i] = unsafeBitCast(frames, to: AnyObject.self) }
            }
        }
        // (A batch past what is kept is not what the next one needs room for.)
        lastCount = Swift.min(count, Self.keptCapacity)
        count = 0
        return frames
    }

    /// An array of `capacity` to 4 × `capacity` bytes, or of at most 256
    /// (the least such)
    /// that the loop has given up, or nil; an answer a connection holds
    /// keeps its whole array, so a large one is not used for a small batch.
    private func reclaim(capacity: Int) -> [UInt8]? {
        var best: Int?
        var bestCapacity = Int.max
        // (A while loop: `for i in lent.indices where ...` kept a copy of
        // `lent` alive, so `&lent[i]` copied it and no element was unique.)
        var i = 0
        while i < lent.count {
            if isKnownUniquelyReferenced(&lent[i]) {
                let c = unsafeBitCast(lent[i], to: [UInt8].self).count
                if c >= capacity && c <= Swift.max(4 * capacity, 256) && c < bestCapacity { (best, bestCapacity) = (i, c) }
            }
            i += 1
        }
        guard let best else { return nil }
        // The loop's last release of it happened before this: its reads of
        // the old frames are done before the writes to come.
        atomicMemoryFence(ordering: .acquiring)
        let storage = lent.remove(at: best)
        return unsafeBitCast(consume storage, to: [UInt8].self)
    }

    /// Room for `needed` bytes. A batch's first frame takes an array the
    /// loop has given up, fit for the last batch's size, or a new one; a
    /// batch that outgrows its array moves to one twice as large (its
    /// frames copied, at the same places). A new array is a power of two,
    /// at most twice what the batch needs or the last one needed.
    private func grow(_ needed: Int) {
        let expected = Swift.max(needed, lastCount)
        if count == 0, let free = reclaim(capacity: expected) {
            current = free
            return
        }
        let want = Swift.max(needed, count == 0 ? expected : 2 * current.count, 64)
        let size = 1 << (Int.bitWidth - (2 * want - 1).leadingZeroBitCount - 1)
        let kept = count
        current = current.withUnsafeBytes { old in
            [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
                let p = UnsafeMutableRawPointer(buffer.baseAddress!)
                if kept > 0 { p.copyMemory(from: old.baseAddress!, byteCount: kept) }
                (p + kept).initializeMemory(as: UInt8.self, repeating: 0, count: size - kept)
                initialized = size
            }
        }
    }
}
