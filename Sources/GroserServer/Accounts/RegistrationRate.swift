/// How fast one peer uid may register accounts: a token bucket per uid
/// holding `perMinute` registrations, refilled at `perMinute` a minute,
/// each Register taking one before it is queued (whatever its answer, so
/// a uid probing which emails are taken is as slow as one creating
/// accounts). A pure value with the clock passed in; at most `capacity`
/// uids are remembered (a full bucket is as good as none).
public struct RegistrationRate: Sendable {
    public let perMinute: Int
    public let capacity: Int
    private struct Bucket: Sendable {
        /// In thousandths of a registration.
        var tokens: Int64
        var atMillis: UInt64
    }
    private var buckets: [UInt32?: Bucket] = [:]

    public init(perMinute: Int, capacity: Int = 10_000) {
        self.perMinute = perMinute
        self.capacity = max(1, capacity)
    }

    private var full: Int64 { Int64(perMinute) * 1000 }

    private func refilled(_ b: Bucket, _ now: UInt64) -> Int64 {
        let elapsed = Int64(clamping: now - min(now, b.atMillis))
        // perMinute per 60,000 ms, in thousandths: elapsed * perMinute / 60.
        let gained = elapsed.multipliedReportingOverflow(by: Int64(perMinute)).overflow ? full : elapsed * Int64(perMinute) / 60
        return min(full, b.tokens + gained)
    }

    /// Takes one registration for `peer`: nil when it may register now,
    /// else the milliseconds until it may.
    public mutating func take(peer: UInt32?, nowMillis now: UInt64) -> UInt64? {
        guard perMinute > 0 else { return nil }
        let tokens = buckets[peer].map { refilled($0, now) } ?? full
        guard tokens >= 1000 else { return UInt64((1000 - tokens) * 60 / Int64(perMinute)) + 1 }
        if buckets[peer] == nil && buckets.count >= capacity {
            buckets = buckets.filter { refilled($0.value, now) < full }
            if buckets.count >= capacity, let fullest = buckets.max(by: { refilled($0.value, now) < refilled($1.value, now) }) {
                buckets[fullest.key] = nil
            }
        }
        buckets[peer] = Bucket(tokens: tokens - 1000, atMillis: now)
        return nil
    }

    /// Gives back a registration taken for a request that was then not
    /// queued (its uid's queue was full).
    public mutating func giveBack(peer: UInt32?, nowMillis now: UInt64) {
        guard perMinute > 0, let b = buckets[peer] else { return }
        buckets[peer] = Bucket(tokens: min(full, refilled(b, now) + 1000), atMillis: now)
    }

    var entryCount: Int { buckets.count }
}
