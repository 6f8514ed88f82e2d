import GroserSystem
import GroserWire
import Synchronization

/// Who may take a connection slot: `--max-connections` in all, at most
/// `--max-connections-per-uid` for one peer uid, and the last few slots
/// kept for operators (groserd's own user, root, `--admin-group`), so that
/// one local user cannot take every slot and the operator can still run
/// `groser-client stats` during a flood. A pure rule; `ConnectionAdmission`
/// keeps the counts it is applied to.
struct PeerConnectionLimits: Sendable, Hashable {
    var maximumConnections: Int
    var maximumPerUID: Int
    /// Slots at the top of `maximumConnections` only operators may take.
    var reserved: Int

    /// Why a connection is refused.
    enum Refusal: Sendable, Hashable {
        /// Every slot is taken.
        case total
        /// The peer's uid holds its maximum.
        case perUID
        /// Only the reserved slots are left, and the peer is no operator.
        case reserved
    }

    /// The decision for a new connection, counted in: `total` connections
    /// open with it, `uidCount` of them from its peer's uid. Operators may
    /// take the reserved slots and are held to no per-uid maximum (they can
    /// stop groserd anyway); `isOperator` is asked only when a limit would
    /// otherwise refuse (it may read the group database).
    func refusal(total: Int, uidCount: Int, isOperator: () -> Bool) -> Refusal? {
        if total > maximumConnections { return .total }
        let overUID = uidCount > maximumPerUID
        let inReserve = total > maximumConnections - reserved
        guard overUID || inReserve else { return nil }
        if isOperator() { return nil }
        return overUID ? .perUID : .reserved
    }

    /// The sentence sent with a refusal, naming its cause.
    func status(_ refusal: Refusal, uid: UInt32?, open: Int) -> Status {
        switch refusal {
        case .total:
            return Status(.unavailable, "groserd has \(maximumConnections) connections, its maximum; try again later.")
        case .perUID:
            return Status(.resourceExhausted, "uid \(uid.map(String.init) ?? "(unknown)") has \(maximumPerUID) connections to groserd, its maximum (--max-connections-per-uid); close one first.")
        case .reserved:
            return Status(.unavailable, "groserd has \(open) connections; its last \(reserved) of \(maximumConnections) are kept for its operators (its own user, root and --admin-group); try again later.")
        }
    }

    init(maximumConnections: Int, maximumPerUID: Int, reserved: Int) {
        self.maximumConnections = maximumConnections
        self.maximumPerUID = maximumPerUID
        self.reserved = reserved
    }

    /// groserd's limits, from its command line.
    init(_ config: ServerConfig) {
        self.init(maximumConnections: config.maximumConnections, maximumPerUID: config.maximumConnectionsPerUID,
                  reserved: Self.defaultReserve(maximumConnections: config.maximumConnections))
    }

    /// The slots kept for operators by default: 64, or a sixteenth of a
    /// smaller `--max-connections`.
    static func defaultReserve(maximumConnections: Int) -> Int { min(64, maximumConnections / 16) }
}

/// At most one log line a second for refused connections: a uid over its
/// maximum can be refused as fast as it connects, and each refusal's line
/// would fill the log. The line that goes out says how many went unlogged.
struct RefusalLogThrottle: Sendable, Hashable {
    private var lastLine: UInt64?
    private var skipped = 0

    /// For a refusal at `now` (nanoseconds): nil when it gets no line, else
    /// how many refusals before it got none since the last line.
    mutating func take(now: UInt64) -> Int? {
        if let last = lastLine, now &- last < 1_000_000_000 {
            skipped += 1
            return nil
        }
        defer { lastLine = now; skipped = 0 }
        return skipped
    }
}

/// The connection counts `PeerConnectionLimits` is applied to, shared by
/// every event loop: the total and, per peer uid with a connection open,
/// its count (so the table holds at most `--max-connections` entries).
/// Touched only when a connection is accepted or closed.
final class ConnectionAdmission: Sendable {
    let limits: PeerConnectionLimits
    /// The one rule for "operator" (`CommerceService.isOperator`).
    let isOperator: @Sendable (Caller) -> Bool
    private let counts = Locked<Counts>(Counts())
    private let logThrottle = Locked(RefusalLogThrottle())
    /// Recent `isOperator` answers by (uid, gid), with when each expires.
    private let operatorMemo = Locked<[UInt64: (Bool, UInt64)]>([:])
    let refusedTotal = Atomic<Int>(0)
    let refusedPerUID = Atomic<Int>(0)
    let refusedReserved = Atomic<Int>(0)

    private struct Counts {
        var total = 0
        var perUID: [UInt32: Int] = [:]
    }

    init(limits: PeerConnectionLimits, isOperator: @escaping @Sendable (Caller) -> Bool) {
        self.limits = limits
        self.isOperator = isOperator
    }

    /// Peers whose credentials could not be read count as one uid.
    private static func key(_ peer: PeerCredentials?) -> UInt32 { peer?.uid ?? UInt32.max }

    /// Counts in a connection from `peer`, or returns the status it is
    /// refused with (counted for Stats; there is nothing to undo). Whether
    /// the peer is an operator is asked only after a refusal, outside the
    /// lock, and then the connection is tried again.
    func admit(_ peer: PeerCredentials?) -> Status? {
        let key = Self.key(peer)
        var (refusal, open) = tryAdmit(key, isOperator: false)
        if let r = refusal, r != .total, let peer, operatorAnswer(peer) {
            (refusal, open) = tryAdmit(key, isOperator: true)
        }
        guard let refusal else { return nil }
        refusedTotal.add(1, ordering: .relaxed)
        switch refusal {
        case .perUID: refusedPerUID.add(1, ordering: .relaxed)
        case .reserved: refusedReserved.add(1, ordering: .relaxed)
        case .total: break
        }
        return limits.status(refusal, uid: peer?.uid, open: open)
    }

    /// `isOperator` for `peer`, remembered for 10 s: a uid over its limit may
    /// reconnect thousands of times a second, and with `--admin-group` each
    /// answer reads the password and group databases. At most 1,024 peers
    /// are remembered; past that the memory starts afresh.
    private func operatorAnswer(_ peer: PeerCredentials) -> Bool {
        let key = UInt64(peer.uid) << 32 | UInt64(peer.gid)
        let now = monotonicNanoseconds()
        if let (answer, until) = operatorMemo.withLock({ $0[key] }), now < until { return answer }
        let answer = isOperator(Caller(uid: peer.uid, gid: peer.gid))
        operatorMemo.withLock { memo in
            if memo.count >= 1024 { memo.removeAll(keepingCapacity: true) }
            memo[key] = (answer, now + 10_000_000_000)
        }
        return answer
    }

    /// Applies the rule to the counts and counts the connection in unless
    /// refused; also returns how many were open before it.
    private func tryAdmit(_ key: UInt32, isOperator: Bool) -> (PeerConnectionLimits.Refusal?, Int) {
        counts.withLock { c in
            let uidCount = (c.perUID[key] ?? 0) + 1
            let open = c.total
            let refusal = limits.refusal(total: open + 1, uidCount: uidCount) { isOperator }
            if refusal == nil {
                c.total += 1
                c.perUID[key] = uidCount
            }
            return (refusal, open)
        }
    }

    /// Whether a refusal at `now` is logged, and how many before it were not
    /// (`RefusalLogThrottle`, shared by every loop).
    func refusalLogLine(now: UInt64) -> Int? { logThrottle.withLock { $0.take(now: now) } }

    /// Counts out a connection `admit` let in.
    func release(_ peer: PeerCredentials?) {
        let key = Self.key(peer)
        counts.withLock { c in
            c.total -= 1
            if let n = c.perUID[key] { c.perUID[key] = n > 1 ? n - 1 : nil }
        }
    }

    /// Connections open now.
    var openConnections: Int { counts.withLock { $0.total } }

    /// The refusals, by cause, for Stats.
    func report(into s: inout ServerStats) {
        s.connectionsRefused = UInt64(refusedTotal.load(ordering: .relaxed))
        s.connectionsRefusedPerUID = UInt64(refusedPerUID.load(ordering: .relaxed))
        s.connectionsRefusedReserved = UInt64(refusedReserved.load(ordering: .relaxed))
    }

    /// Uids with a connection open (for tests).
    var uidsHoldingConnections: Int { counts.withLock { $0.perUID.count } }
}
