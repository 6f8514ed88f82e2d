/// Failed logins (and registrations of a taken email), counted so that an
/// attacker's failures slow the attacker: per (account, peer uid, session)
/// "pair", per peer uid, and per account as a backstop that holds back only
/// pairs with failures of their own. Attempts still being checked count
/// as failures until they end, and a check is reserved (`reserve`) before
/// its request is queued for hashing, so N pipelined attempts past a limit
/// are refused without hashing. After `allowed` failures each further
/// attempt waits, doubling from one second up to 15 minutes. A pure value
/// with the clock passed in; its memory is bounded by `capacity` entries
/// per table. docs/PROTOCOL.md §7A.2 states the rules.
public struct LoginThrottle: Sendable {
    public struct Limits: Sendable, Hashable {
        /// Failures per (account, uid, session) before the waits start (0: no limit).
        public var perAccount: Int
        /// Failures per peer uid before the waits start (0: no limit). Higher
        /// than the account's: one uid (a web front end) serves many people.
        public var perPeer: Int
        /// Failures per account, from all uids, before pairs that have
        /// failed on it too must wait (0: no limit).
        public var accountWide: Int
        /// Registrations per peer uid per minute (a token bucket of as many; 0: no limit).
        public var registrationsPerMinute: Int
        public var capacity: Int
        public init(perAccount: Int = 5, perPeer: Int = 50, accountWide: Int? = nil, registrationsPerMinute: Int = 20,
                    capacity: Int = 100_000) {
            self.perAccount = perAccount
            self.perPeer = perPeer
            self.accountWide = accountWide ?? perAccount * 20
            self.registrationsPerMinute = registrationsPerMinute
            self.capacity = capacity
        }
    }

    /// What an attempt is counted against: the hashes (with this process's
    /// random seed, so no one can aim at a collision) of its pair and its
    /// account, and its peer uid.
    public struct Attempt: Sendable, Hashable {
        let pair: UInt64
        /// nil for a registration: a taken email is the registering uid's
        /// failure, not the account's.
        let account: UInt64?
        let peer: UInt32?

        /// A login of `account` (normalised) from `peer`, with the anonymous
        /// `session` it carries ("" for none).
        public static func login(account: String, peer: UInt32?, session: String) -> Attempt {
            Attempt(pair: key("login", account, peer, session), account: key("account", account, nil, ""), peer: peer)
        }

        /// A registration of `account` (normalised) from `peer`.
        public static func registration(account: String, peer: UInt32?) -> Attempt {
            Attempt(pair: key("register", account, peer, ""), account: nil, peer: peer)
        }

        private static func key(_ kind: String, _ account: String, _ peer: UInt32?, _ session: String) -> UInt64 {
            var h = Hasher()
            h.combine(kind)
            // The bytes, not the String: Strings hash by canonical equivalence.
            h.combine(account.utf8.count)
            for b in account.utf8 { h.combine(b) }
            h.combine(peer)
            h.combine(session)
            return UInt64(bitPattern: Int64(h.finalize()))
        }
    }

    struct Entry: Sendable {
        var failures: Int32 = 0
        var inFlight: Int32 = 0
        var lastFailureMillis: UInt64 = 0
        var blockedUntilMillis: UInt64 = 0

        /// The failures that still count: a quiet spell as long as the
        /// longest wait starts the count afresh.
        func failures(_ now: UInt64) -> Int {
            now - min(now, lastFailureMillis) > LoginThrottle.longestWaitMillis ? 0 : Int(failures)
        }

        var isIdle: Bool { inFlight == 0 && failures == 0 }
    }

    public let limits: Limits
    private var pairs: [UInt64: Entry] = [:]
    private var accounts: [UInt64: Entry] = [:]
    private var peers: [UInt32?: Entry] = [:]
    static let firstWaitMillis: UInt64 = 1000
    static let longestWaitMillis: UInt64 = 15 * 60 * 1000

    public init(_ limits: Limits = Limits()) { self.limits = limits }

    /// Reserves a check for `attempt`: nil when it may go on (it then counts
    /// as in flight until `finish`), else how many milliseconds the caller
    /// must wait first. Past a limit, one attempt at a time is let through
    /// once the wait is over.
    public mutating func reserve(_ attempt: Attempt, nowMillis now: UInt64) -> UInt64? {
        let pair = pairs[attempt.pair]
        var wait = Self.wait(pair, allowed: limits.perAccount, now)
        if limits.perPeer > 0 { wait = max(wait, Self.wait(peers[attempt.peer], allowed: limits.perPeer, now)) }
        // The backstop holds back only a pair that has failed itself: a uid
        // (or session) that never guessed wrong is never locked out by others.
        if let account = attempt.account, let e = accounts[account], (pair?.failures(now) ?? 0) > 0,
           e.blockedUntilMillis > now {
            wait = max(wait, e.blockedUntilMillis - now)
        }
        if wait > 0 { return wait }
        if limits.perAccount > 0 { Self.begin(&pairs, attempt.pair, capacity: limits.capacity, now) }
        if limits.perPeer > 0 { Self.begin(&peers, attempt.peer, capacity: limits.capacity, now) }
        return nil
    }

    /// Ends a reserved attempt: a failure counts (and may start a wait); a
    /// success clears its pair's count; neither (the request could not be
    /// answered) only ends the reservation.
    public mutating func finish(_ attempt: Attempt, failed: Bool?, nowMillis now: UInt64) {
        if limits.perAccount > 0 {
            Self.end(&pairs, attempt.pair, failed: failed, allowed: limits.perAccount, clears: true, now)
        }
        if limits.perPeer > 0 {
            Self.end(&peers, attempt.peer, failed: failed, allowed: limits.perPeer, clears: false, now)
        }
        if let account = attempt.account, failed == true, limits.accountWide > 0 {
            if accounts[account] == nil && accounts.count >= limits.capacity { Self.evict(&accounts, now) }
            var e = accounts[account] ?? Entry()
            Self.fail(&e, allowed: limits.accountWide, now)
            accounts[account] = e
        }
    }

    /// The wait an entry imposes on a new attempt.
    private static func wait(_ e: Entry?, allowed: Int, _ now: UInt64) -> UInt64 {
        guard allowed > 0, let e else { return 0 }
        if e.blockedUntilMillis > now { return e.blockedUntilMillis - now }
        let failures = e.failures(now)
        if failures + Int(e.inFlight) < allowed { return 0 }
        if failures >= allowed && e.inFlight == 0 { return 0 }
        // Only attempts still being checked stand in the way: their
        // outcome decides, so the caller tries again in a moment.
        return firstWaitMillis
    }

    private static func begin<K: Hashable>(_ table: inout [K: Entry], _ key: K, capacity: Int, _ now: UInt64) {
        if table[key] == nil && table.count >= capacity { evict(&table, now) }
        table[key, default: Entry()].inFlight += 1
    }

    private static func end<K: Hashable>(_ table: inout [K: Entry], _ key: K, failed: Bool?, allowed: Int, clears: Bool,
                                         _ now: UInt64) {
        guard var e = table[key] else { return }
        e.inFlight = max(0, e.inFlight - 1)
        if failed == true {
            fail(&e, allowed: allowed, now)
        } else if failed == false && clears {
            e.failures = 0
            e.blockedUntilMillis = 0
        }
        table[key] = e.isIdle ? nil : e
    }

    /// Counts a failure; from the `allowed`th on, the next attempt waits.
    private static func fail(_ e: inout Entry, allowed: Int, _ now: UInt64) {
        e.failures = Int32(clamping: e.failures(now) + 1)
        e.lastFailureMillis = now
        if Int(e.failures) >= allowed {
            let doublings = min(Int(e.failures) - allowed, 20)
            e.blockedUntilMillis = now + min(longestWaitMillis, firstWaitMillis << UInt64(doublings))
        }
    }

    /// Makes room: entries that hold nothing back go first (not blocked,
    /// nothing in flight, quiet); if none does, the one whose last failure
    /// is oldest, unless it is in flight.
    private static func evict<K: Hashable>(_ table: inout [K: Entry], _ now: UInt64) {
        let before = table.count
        table = table.filter { $0.value.inFlight > 0 || $0.value.blockedUntilMillis > now || $0.value.failures(now) > 0 }
        if table.count == before,
           let oldest = table.filter({ $0.value.inFlight == 0 }).min(by: { $0.value.lastFailureMillis < $1.value.lastFailureMillis }) {
            table[oldest.key] = nil
        }
    }

    var entryCount: Int { pairs.count + accounts.count + peers.count }
}
