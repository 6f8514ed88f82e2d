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
        var sinceSeconds: Int64
        var sinceNanoseconds: Int
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
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        failure.withLock { f in
            if f == nil {
                f = Failure(sinceSeconds: Int64(now.tv_sec), sinceNanoseconds: Int(now.tv_nsec), reason: reason)
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
            f.map { "unavailable since \(Self.rfc3339(seconds: $0.sinceSeconds, nanoseconds: $0.sinceNanoseconds)): \($0.reason)" }
        }
        return Report(store: kind.rawValue, state: state ?? "ok", roundTrips: roundTrips.withLock { $0 },
                      conflicts: conflictCount.load(ordering: .relaxed), reconnects: reconnectCount.load(ordering: .relaxed))
    }

    /// UTC with milliseconds, as the log's: 2026-12-02T16:45:23.123Z.
    static func rfc3339(seconds: Int64, nanoseconds: Int) -> String {
        var t = time_t(seconds)
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = nanoseconds / 1_000_000
        let milliseconds = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)).\(milliseconds)Z"
    }
}
