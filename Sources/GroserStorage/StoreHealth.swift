import GroserSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What Stats says of the store (`store`, `store_state`,
/// `store_round_trip`, `store_conflicts`, `store_reconnects`): one object
/// per daemon, shared by every thread that talks to the store (the
/// customer shards, the catalog store, the follower of other hosts'
/// catalog changes), which tell it of their round trips, failures,
/// conflicts and reconnects.
///
/// A *failure* is a round trip that could not be made: PostgreSQL could
/// not be reached, or the connection was lost. An error PostgreSQL answers
/// (a constraint, a conflict with another host) is an answer: the round
/// trip succeeded. The store is "unavailable" from the first failure after
/// a success until the next success, with the latest failure's reason.
public final class StoreHealth: Sendable {
    public enum Kind: String, Sendable {
        case sqlite
        case postgresql
    }

    /// Stats' view of it at one moment.
    public struct Report: Sendable {
        /// "sqlite" or "postgresql".
        public var store: String
        /// "ok", or "unavailable since <RFC 3339 time>: <reason>".
        public var state: String
        /// Round trips, in nanoseconds (see `roundTrip(nanoseconds:)`).
        public var roundTrips: LatencyHistogram
        public var conflicts: UInt64
        public var reconnects: UInt64
    }

    public let kind: Kind
    private struct Failure {
        /// Wall-clock time of the first failure since the last success.
        var since: timespec
        var reason: String
    }
    private let failure = Locked<Failure?>(nil)
    /// Set while `failure` is not nil: a success reads it without the lock.
    private let failing = Atomic<Bool>(false)
    private let roundTrips = Locked(LatencyHistogram())
    private let conflictCount = Atomic<UInt64>(0)
    private let reconnectCount = Atomic<UInt64>(0)

    public init(_ kind: Kind) {
        self.kind = kind
    }

    /// A round trip that took `nanoseconds` (counted in `store_round_trip`);
    /// the store answered, so it is available.
    public func roundTrip(nanoseconds: UInt64) {
        roundTrips.withLock { $0.record(nanoseconds) }
        succeeded()
    }

    /// The store answered (a round trip not timed).
    public func succeeded() {
        guard failing.load(ordering: .acquiring) else { return }
        failure.withLock { f in
            f = nil
            failing.store(false, ordering: .releasing)
        }
    }

    /// A round trip could not be made, for `reason`.
    public func failed(_ reason: String) {
        let now = wallClockNow()
        failure.withLock { f in
            if f == nil {
                f = Failure(since: now, reason: reason)
            } else {
                f!.reason = reason
            }
            failing.store(true, ordering: .releasing)
        }
    }

    /// A batch is run again because another host changed one of its rows first.
    public func conflict() { conflictCount.add(1, ordering: .relaxed) }

    /// A connection was made again after one was lost (or could not be made).
    public func reconnected() { reconnectCount.add(1, ordering: .relaxed) }

    public var report: Report {
        let state = failure.withLock { f in
            f.map { "unavailable since \(rfc3339Milliseconds($0.since)): \($0.reason)" }
        }
        return Report(store: kind.rawValue, state: state ?? "ok", roundTrips: roundTrips.withLock { $0 },
                      conflicts: conflictCount.load(ordering: .relaxed), reconnects: reconnectCount.load(ordering: .relaxed))
    }
}
