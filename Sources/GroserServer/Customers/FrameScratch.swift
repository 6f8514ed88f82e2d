/// A batch's answer frames, written one after another into memory a shard
/// keeps from batch to batch: a cart answer is written in place (no array
/// per answer, each of which cost about 700 instructions to make and a free
/// on the loop's thread), and the batch's frames leave in one array
/// (`take`), of which each answer is a slice. The shard's thread only.
final class FrameScratch {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0
    /// Room kept after a batch; a larger buffer goes back to the allocator.
    static let keptCapacity = 1 << 20

    init(capacity: Int = 64 * 1024) {
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

    /// Every frame written so far, in one new array; the scratch is empty again.
    func take() -> [UInt8] {
        let frames = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if count > 0 { UnsafeMutableRawPointer(buffer.baseAddress!).copyMemory(from: base, byteCount: count) }
            initialized = count
        }
        count = 0
        if capacity > Self.keptCapacity {
            base.deallocate()
            capacity = Self.keptCapacity
            base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        }
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
