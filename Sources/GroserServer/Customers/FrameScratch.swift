import Synchronization

/// A batch's answer frames, written one after another into memory a shard
/// keeps from batch to batch: a cart answer is written in place (no array
/// per answer, each of which cost about 700 instructions to make and a free
/// on the loop's thread), and the batch's frames leave in one array
/// (`take`), of which each answer is a slice. The arrays come back: the
/// scratch keeps the last few it handed out, and once the loop has dropped
/// every slice of one it is filled again, so a batch allocates nothing and
/// nothing the shard allocated is freed on the loop's thread. The shard's
/// thread only.
final class FrameScratch {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0
    /// Room kept after a batch; a larger buffer goes back to the allocator.
    static let keptCapacity = 1 << 20
    /// Arrays `take` handed out, held as their storage objects (an array is
    /// one reference to its storage) so that their uniqueness can be asked:
    /// once this is the only reference, the loop is done with every slice of
    /// it. At most `lentLimit`, each of at most `keptCapacity` bytes.
    private var lent: [AnyObject] = []
    static let lentLimit = 8

    init(capacity: Int = 64 * 1024) {
        precondition(MemoryLayout<[UInt8]>.size == MemoryLayout<AnyObject>.size, "FrameScratch: an array is not one reference")
        self.capacity = capacity
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    /// Writes `n` bytes at the end through `write`, which returns how many
    /// it wrote (exactly `n`: a frame sized otherwise is a bug); returns where they are.
    func append(exactly n: Int, _ write: (UnsafeMutableRawPointer) -> Int) -> Range<Int> {
        reserve(n)
        let written = write(base + count)
        precondition(written == n, "FrameScratch: \(written) bytes written for a frame sized \(n)")
        count += n
        return count - n..<count
    }

    /// Appends `bytes`; returns where they are.
    func append(_ bytes: [UInt8]) -> Range<Int> {
        append(exactly: bytes.count) { p in
            bytes.withUnsafeBytes { if let b = $0.baseAddress { p.copyMemory(from: b, byteCount: $0.count) } }
            return bytes.count
        }
    }

    /// Every frame written so far, in one array (one the loop has given up,
    /// or a new one); the scratch is empty again.
    func take() -> [UInt8] {
        guard count > 0 else { return [] }
        let written = UnsafeRawBufferPointer(start: base, count: count)
        var frames = reclaim(capacity: count) ?? []
        if frames.capacity == 0 {
            // Some room for the batches to come, at most twice this one's:
            // an answer a connection holds keeps its whole array.
            frames = [UInt8](unsafeUninitializedCapacity: count <= 64 ? 128 : 1 << (Int.bitWidth - (count - 1).leadingZeroBitCount)) { buffer, initialized in
                UnsafeMutableRawPointer(buffer.baseAddress!).copyMemory(from: base, byteCount: count)
                initialized = count
            }
        } else {
            frames.append(contentsOf: written.bindMemory(to: UInt8.self))
        }
        if frames.capacity <= Self.keptCapacity {
            if lent.count < Self.lentLimit {
                lent.append(unsafeBitCast(frames, to: AnyObject.self))
            } else {
                // A free one that did not fit makes room for this one.
                var i = 0
                while i < lent.count && !isKnownUniquelyReferenced(&lent[i]) { i += 1 }
                if i < lent.count { lent[i] = unsafeBitCast(frames, to: AnyObject.self) }
            }
        }
        count = 0
        if capacity > Self.keptCapacity {
            base.deallocate()
            capacity = Self.keptCapacity
            base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        }
        return frames
    }

    /// An empty array of `capacity` to 4 × `capacity` bytes (the least
    /// such) that the loop has given up, or nil; an answer a connection
    /// holds keeps its whole array, so a large one is not used for a small
    /// batch.
    private func reclaim(capacity: Int) -> [UInt8]? {
        var best: Int?
        var bestCapacity = Int.max
        // (A while loop: `for i in lent.indices where ...` kept a copy of
        // `lent` alive, so `&lent[i]` copied it and no element was unique.)
        var i = 0
        while i < lent.count {
            if isKnownUniquelyReferenced(&lent[i]) {
                let c = unsafeBitCast(lent[i], to: [UInt8].self).capacity
                if c >= capacity && c <= Swift.max(4 * capacity, 256) && c < bestCapacity { (best, bestCapacity) = (i, c) }
            }
            i += 1
        }
        guard let best else { return nil }
        // The loop's last release of it happened before this: its reads of
        // the old frames are done before the writes to come.
        atomicMemoryFence(ordering: .acquiring)
        let storage = lent.remove(at: best)
        var frames = unsafeBitCast(consume storage, to: [UInt8].self)
        frames.removeAll(keepingCapacity: true)
        return frames
    }

    private func reserve(_ n: Int) {
        guard count + n > capacity else { return }
        var grown = capacity * 2
        while grown < count + n { grown *= 2 }
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 16)
        bigger.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = bigger
        capacity = grown
    }
}
