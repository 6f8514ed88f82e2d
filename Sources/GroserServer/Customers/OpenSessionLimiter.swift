import GroserSystem

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

/// A token bucket per peer uid: the per-uid limit on OpenSession (refilled
/// at `opensPerSecond` up to `openBurst`), and the per-uid share of stored
/// sessions (`StoredSessionShare`). The `exempt` uids (groserd's own and
/// root: operators, benchmarks) are not limited. A pure rule: the caller
/// passes the clock. The table holds at most `maximumPeers` uids; when it is
/// full, uids whose buckets have refilled (they hold nothing a fresh bucket
/// would not) are forgotten, and if none has, a new uid is refused until one does.
struct OpenSessionLimiter {
    let maximumPeers: Int
    let exempt: Set<UInt32>
    /// The bucket's size and its refill, in millionths of a token.
    private let capacity: Int64
    private let microsPerSecond: Double
    private var buckets: [UInt32: Bucket] = [:]

    private struct Bucket {
        /// Tokens left, in millionths of a token.
        var micros: Int64
        var atNanoseconds: UInt64
    }

    /// OpenSession's limit: `opensPerSecond` (0: none) with bursts of `openBurst`.
    init(_ limits: SessionLimits, exempt: Set<UInt32> = [], maximumPeers: Int = 4096) {
        self.init(burst: limits.openBurst, perSecond: Double(limits.opensPerSecond), exempt: exempt, maximumPeers: maximumPeers)
    }

    /// A bucket of `burst` tokens per uid refilled at `perSecond` (0: no limit).
    init(burst: Int, perSecond: Double, exempt: Set<UInt32> = [], maximumPeers: Int = 4096) {
        capacity = Int64(max(1, burst)) * 1_000_000
        microsPerSecond = perSecond * 1_000_000
        self.exempt = exempt
        self.maximumPeers = maximumPeers
    }

    var peers: Int { buckets.count }

    /// True when the uid may take a token at `nowNanoseconds` (a monotonic
    /// clock), taking it; false when its bucket is empty. A request without
    /// a uid (no peer credentials) counts as uid 0xffffffff.
    mutating func admit(uid: UInt32?, nowNanoseconds now: UInt64) -> Bool {
        guard microsPerSecond > 0 else { return true }
        if let uid, exempt.contains(uid) { return true }
        let key = uid ?? .max
        if buckets[key] == nil, buckets.count >= maximumPeers {
            forgetFull(now)
            guard buckets.count < maximumPeers else { return false }
        }
        var b = buckets[key] ?? Bucket(micros: capacity, atNanoseconds: now)
        b.micros = refilled(b, now)
        b.atNanoseconds = max(b.atNanoseconds, now)
        guard b.micros >= 1_000_000 else {
            buckets[key] = b
            return false
        }
        b.micros -= 1_000_000
        buckets[key] = b
        return true
    }

    /// Gives back a token `admit` took for something that did not happen.
    mutating func refund(uid: UInt32?) {
        guard microsPerSecond > 0 else { return }
        if let uid, exempt.contains(uid) { return }
        guard var b = buckets[uid ?? .max] else { return }
        b.micros = min(capacity, b.micros + 1_000_000)
        buckets[uid ?? .max] = b
    }

    private func refilled(_ b: Bucket, _ now: UInt64) -> Int64 {
        let elapsed = now > b.atNanoseconds ? now - b.atNanoseconds : 0
        let gained = Double(elapsed) / 1e9 * microsPerSecond
        return gained >= Double(capacity) ? capacity : min(capacity, b.micros + Int64(gained.rounded()))
    }

    private mutating func forgetFull(_ now: UInt64) {
        buckets = buckets.filter { refilled($0.value, now) < capacity }
    }
}

/// One uid's share of `--max-sessions`: the sessions it may store (a first
/// change of a token from OpenSession, a Login's new session), so that one
/// user cannot fill the store and lock everyone else out of carts and
/// logins. A bucket of an eighth of the cap per uid, refilled by as much
/// over the sessions' idle lifetime: since what a uid stored and left
/// unused expires after that lifetime, one uid holds at most a quarter of
/// the cap. groserd's own uid and root are not limited. Shared by every
/// shard and the account service (one lock, held briefly).
final class StoredSessionShare: Sendable {
    private let buckets: Locked<OpenSessionLimiter>
    private let monotonic: @Sendable () -> UInt64
    /// Tokens of one uid's bucket: an eighth of `--max-sessions`.
    let perUID: Int

    init(maximumStored: Int, idleLifetimeSeconds: Int64, exempt: Set<UInt32>,
         monotonic: @escaping @Sendable () -> UInt64 = monotonicNanoseconds) {
        perUID = max(1, maximumStored / 8)
        buckets = Locked(OpenSessionLimiter(burst: perUID, perSecond: Double(perUID) / Double(max(1, idleLifetimeSeconds)),
                                            exempt: exempt))
        self.monotonic = monotonic
    }

    /// True when `uid` may store one more session now (and counts it).
    func admit(_ uid: UInt32?) -> Bool {
        let now = monotonic()
        return buckets.withLock { $0.admit(uid: uid, nowNanoseconds: now) }
    }

    /// Gives back what `admit` counted for a session that was not stored.
    func refund(_ uid: UInt32?) { buckets.withLock { $0.refund(uid: uid) } }

    /// The refusal past the share.
    var refusal: Refusal {
        Refusal(.resourceExhausted, "This user has stored its share of sessions (\(perUID * 2) within a session lifetime, a quarter of --max-sessions); stored ones keep working, and the share refills as time passes. Reuse a session.")
    }
}
