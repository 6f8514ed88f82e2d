/// How many sessions groserd opens and keeps (see docs/PROTOCOL.md, Sessions).
public struct SessionLimits: Sendable, Hashable {
    /// OpenSession calls one peer uid may make per second, on average (0: no limit).
    public var opensPerSecond: Int
    /// How many of them may come at once (the bucket's size).
    public var openBurst: Int
    /// Sessions (and accounts) groserd stores at most: past it, the change
    /// that would store a new session is refused.
    public var maximumStored: Int
    /// Seconds a token from OpenSession stays good while its session holds
    /// nothing (no change stored it); never longer than the idle lifetime.
    public var unstoredLifetime: Int64

    public init(opensPerSecond: Int = 50, openBurst: Int = 200, maximumStored: Int = 500_000,
                unstoredLifetime: Int64 = 6 * 3600) {
        self.opensPerSecond = opensPerSecond
        self.openBurst = openBurst
        self.maximumStored = maximumStored
        self.unstoredLifetime = unstoredLifetime
    }
}

/// The per-uid limit on OpenSession: a token bucket per peer uid, refilled
/// at `opensPerSecond` up to `openBurst`; the `exempt` uids (groserd's own
/// and root: operators, benchmarks) are not limited. A pure rule: the caller
/// passes the clock. The table holds at most `maximumPeers` uids; when it is full, uids
/// whose buckets have refilled (they hold nothing a fresh bucket would not)
/// are forgotten, and if none has, a new uid is refused until one does.
struct OpenSessionLimiter {
    let limits: SessionLimits
    let maximumPeers: Int
    let exempt: Set<UInt32>
    private var buckets: [UInt32: Bucket] = [:]

    private struct Bucket {
        /// Tokens left, in millionths of an OpenSession.
        var micros: Int64
        var atNanoseconds: UInt64
    }

    init(_ limits: SessionLimits, exempt: Set<UInt32> = [], maximumPeers: Int = 4096) {
        self.limits = limits
        self.exempt = exempt
        self.maximumPeers = maximumPeers
    }

    var peers: Int { buckets.count }

    /// True when the uid may open a session at `nowNanoseconds` (a
    /// monotonic clock), taking one token; false when its bucket is empty.
    /// A request without a uid (no peer credentials) counts as uid 0xffffffff.
    mutating func admit(uid: UInt32?, nowNanoseconds now: UInt64) -> Bool {
        guard limits.opensPerSecond > 0 else { return true }
        if let uid, exempt.contains(uid) { return true }
        let capacity = Int64(max(1, limits.openBurst)) * 1_000_000
        let key = uid ?? .max
        if buckets[key] == nil, buckets.count >= maximumPeers {
            forgetFull(now, capacity)
            guard buckets.count < maximumPeers else { return false }
        }
        var b = buckets[key] ?? Bucket(micros: capacity, atNanoseconds: now)
        b.micros = refilled(b, now, capacity)
        b.atNanoseconds = max(b.atNanoseconds, now)
        guard b.micros >= 1_000_000 else {
            buckets[key] = b
            return false
        }
        b.micros -= 1_000_000
        buckets[key] = b
        return true
    }

    private func refilled(_ b: Bucket, _ now: UInt64, _ capacity: Int64) -> Int64 {
        let elapsed = now > b.atNanoseconds ? now - b.atNanoseconds : 0
        // Microtokens gained: elapsed ns × rate / 1000 (capped first, so no overflow).
        let gained = Int64(min(elapsed, 3_600_000_000_000)) / 1000 * Int64(limits.opensPerSecond)
        return min(capacity, b.micros + gained)
    }

    private mutating func forgetFull(_ now: UInt64, _ capacity: Int64) {
        buckets = buckets.filter { refilled($0.value, now, capacity) < capacity }
    }
}
