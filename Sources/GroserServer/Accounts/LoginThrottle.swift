/// Failed logins, counted per account (its normalised email, whether or not
/// an account has it, so the throttle tells nothing about which do) and per
/// peer uid. After `allowed` failures in a row each further attempt must
/// wait, doubling from one second up to 15 minutes; a success clears the
/// account's count. A pure value with the clock passed in; its memory is
/// bounded by `capacity` entries per kind.
public struct LoginThrottle: Sendable {
    public struct Limits: Sendable, Hashable {
        /// Failures per account before the waits start (0: no limit).
        public var perAccount: Int
        /// Failures per peer uid before the waits start (0: no limit). Higher
        /// than the account's: one uid (a web front end) serves many people.
        public var perPeer: Int
        public var capacity: Int
        public init(perAccount: Int = 5, perPeer: Int = 50, capacity: Int = 100_000) {
            self.perAccount = perAccount
            self.perPeer = perPeer
            self.capacity = capacity
        }
    }

    struct Entry: Sendable {
        var failures: Int
        var lastFailureMillis: UInt64
        var blockedUntilMillis: UInt64
    }

    public let limits: Limits
    private var accounts: [String: Entry] = [:]
    private var peers: [UInt32: Entry] = [:]
    static let firstWaitMillis: UInt64 = 1000
    static let longestWaitMillis: UInt64 = 15 * 60 * 1000

    public init(_ limits: Limits = Limits()) { self.limits = limits }

    /// How many milliseconds the caller must still wait before trying this
    /// account from this peer; 0 when it may try now.
    public func wait(account: String, peer: UInt32?, nowMillis: UInt64) -> UInt64 {
        var wait: UInt64 = 0
        if let e = accounts[account], e.blockedUntilMillis > nowMillis { wait = e.blockedUntilMillis - nowMillis }
        if let peer, let e = peers[peer], e.blockedUntilMillis > nowMillis { wait = max(wait, e.blockedUntilMillis - nowMillis) }
        return wait
    }

    public mutating func failed(account: String, peer: UInt32?, nowMillis: UInt64) {
        Self.count(&accounts, account, allowed: limits.perAccount, capacity: limits.capacity, nowMillis)
        if let peer { Self.count(&peers, peer, allowed: limits.perPeer, capacity: limits.capacity, nowMillis) }
    }

    public mutating func succeeded(account: String) { accounts[account] = nil }

    private static func count<K: Hashable>(_ table: inout [K: Entry], _ key: K, allowed: Int, capacity: Int, _ now: UInt64) {
        guard allowed > 0 else { return }
        if table[key] == nil && table.count >= capacity { evict(&table, now) }
        var e = table[key] ?? Entry(failures: 0, lastFailureMillis: now, blockedUntilMillis: 0)
        // A quiet spell as long as the longest wait starts the count afresh.
        if now - min(now, e.lastFailureMillis) > longestWaitMillis { e.failures = 0 }
        e.failures += 1
        e.lastFailureMillis = now
        if e.failures >= allowed {
            let doublings = min(e.failures - allowed, 20)
            e.blockedUntilMillis = now + min(longestWaitMillis, firstWaitMillis << UInt64(doublings))
        }
        table[key] = e
    }

    /// Makes room: entries that no longer block and are quiet go first,
    /// then, if none is, the one whose last failure is oldest.
    private static func evict<K: Hashable>(_ table: inout [K: Entry], _ now: UInt64) {
        let before = table.count
        table = table.filter { $0.value.blockedUntilMillis > now || now - min(now, $0.value.lastFailureMillis) <= longestWaitMillis }
        if table.count == before, let oldest = table.min(by: { $0.value.lastFailureMillis < $1.value.lastFailureMillis }) {
            table[oldest.key] = nil
        }
    }

    var entryCount: Int { accounts.count + peers.count }
}
