import GroserSystem
import GroserWire

/// `count` deterministic bytes that differ from frame to frame.
func patternBytes(count: Int, seed: UInt64) -> [UInt8] {
    var rng = SplitMix64(seed: seed)
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        var i = 0
        while i < count {
            var word = rng.next()
            for _ in 0..<min(8, count - i) {
                buffer[i] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                i += 1
            }
        }
        initialized = count
    }
}

extension FrameDecoder {
    /// Every whole frame now buffered, copied out (the decoder's slices share its buffer).
    mutating func drain() throws(FrameError) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        while let body = try next() { frames.append(Array(body)) }
        return frames
    }
}
