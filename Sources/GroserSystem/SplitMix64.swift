/// SplitMix64 (Steele, Lea and Flood): a small, fast, fully deterministic
/// generator. The sample catalog's prices and names, the fuzz harness's
/// read and write sizes, and the tests' "random" inputs come from it, so a
/// seed always gives the same sequence and a failure can be replayed.
public struct SplitMix64: RandomNumberGenerator {
    public var state: UInt64

    @inlinable
    public init(seed: UInt64) { state = seed }

    @inlinable
    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// One of `values` (not empty), by `next() % count`.
    @inlinable
    public mutating func pick<T>(_ values: [T]) -> T { values[Int(next() % UInt64(values.count))] }
}
