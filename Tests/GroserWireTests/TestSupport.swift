import GroserWire

/// SplitMix64: a small seeded generator, so "random" test inputs are the same
/// on every run and a failure can be reproduced from its seed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `count` deterministic bytes that differ from frame to frame.
func patternBytes(count: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededGenerator(seed: seed)
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
