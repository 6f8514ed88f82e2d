/// A latency histogram of every request, HDR-style: values are nanoseconds,
/// counted exactly below 2^subBucketBits and above that in log-linear
/// buckets (each power of two split into 2^subBucketBits equal parts), so a
/// reported value is within 1/128 (0.8 %) of the true one at any magnitude.
/// Recording is an index computation and an increment: no allocation.
public struct LatencyHistogram: Sendable, Equatable {
    static let subBucketBits = 7
    static let subBucketCount = 1 << subBucketBits
    /// Enough buckets for any UInt64 value.
    static let bucketCount = subBucketCount + (64 - subBucketBits) * subBucketCount

    private var counts: [UInt64]
    /// Every recorded value, exactly.
    public private(set) var totalCount: UInt64 = 0
    public private(set) var minimum: UInt64 = .max
    public private(set) var maximum: UInt64 = 0
    private var sum: Double = 0

    public init() {
        counts = [UInt64](repeating: 0, count: Self.bucketCount)
    }

    /// The bucket that holds `value`.
    @inline(__always)
    static func bucketIndex(_ value: UInt64) -> Int {
        if value < UInt64(subBucketCount) { return Int(value) }
        let highestBit = 63 - value.leadingZeroBitCount
        let shift = highestBit - subBucketBits
        let sub = Int(truncatingIfNeeded: value >> UInt64(shift)) - subBucketCount
        return subBucketCount + shift * subBucketCount + sub
    }

    /// The largest value that falls in bucket `index`.
    static func highestValue(ofBucket index: Int) -> UInt64 {
        if index < subBucketCount { return UInt64(index) }
        let shift = (index - subBucketCount) / subBucketCount
        let sub = UInt64((index - subBucketCount) % subBucketCount + subBucketCount)
        let low = sub << UInt64(shift)
        return low + ((1 << UInt64(shift)) - 1)
    }

    /// Counts one value (nanoseconds).
    @inline(__always)
    public mutating func record(_ value: UInt64) {
        record(value, count: 1)
    }

    /// Counts `count` requests that all took `value` nanoseconds.
    public mutating func record(_ value: UInt64, count: UInt64) {
        guard count > 0 else { return }
        counts[Self.bucketIndex(value)] &+= count
        totalCount &+= count
        if value < minimum { minimum = value }
        if value > maximum { maximum = value }
        sum += Double(value) * Double(count)
    }

    /// Adds every count of `other` (another thread's histogram).
    public mutating func merge(_ other: LatencyHistogram) {
        guard other.totalCount > 0 else { return }
        for i in counts.indices where other.counts[i] != 0 { counts[i] &+= other.counts[i] }
        totalCount &+= other.totalCount
        minimum = Swift.min(minimum, other.minimum)
        maximum = Swift.max(maximum, other.maximum)
        sum += other.sum
    }

    /// The smallest recorded value that at least `percentile` % of the
    /// values do not exceed (the bucket's highest value, capped at the exact
    /// maximum). 0 when nothing was recorded.
    public func value(atPercentile percentile: Double) -> UInt64 {
        guard totalCount > 0 else { return 0 }
        let clamped = Swift.min(Swift.max(percentile, 0), 100)
        var rank = UInt64((clamped / 100 * Double(totalCount)).rounded(.up))
        rank = Swift.max(1, Swift.min(rank, totalCount))
        var seen: UInt64 = 0
        for i in counts.indices where counts[i] != 0 {
            seen += counts[i]
            if seen >= rank { return Swift.min(Self.highestValue(ofBucket: i), maximum) }
        }
        return maximum
    }

    /// The arithmetic mean, from exact values.
    public var mean: Double { totalCount == 0 ? 0 : sum / Double(totalCount) }
}
