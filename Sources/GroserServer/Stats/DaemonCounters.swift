import GroserStorage
import GroserSystem
import GroserWire
import Synchronization

/// What the daemon counts for Stats, shared by every thread: plain
/// counters as relaxed atomics, and per event loop the requests by method
/// and status with their latency histograms, each loop behind its own
/// (uncontended) lock so Stats can read them from another loop.
final class DaemonCounters: Sendable {
    let connectionsAccepted = Atomic<Int>(0)
    /// Connections closed for idleness (`--idle-timeout`); the refusals
    /// are `ConnectionAdmission`'s.
    let connectionsClosedIdle = Atomic<Int>(0)
    let watchers = Atomic<Int>(0)
    let watchFrames = Atomic<Int>(0)
    let watchCoalesced = Atomic<Int>(0)
    let watchersCutOff = Atomic<Int>(0)
    let slowReadersCutOff = Atomic<Int>(0)
    /// Connection ids: unique for the daemon's life, unlike descriptors.
    let nextConnectionID = Atomic<UInt64>(0)
    private let loops: [Locked<RequestTally>]
    /// The customer shards' batches, when the daemon keeps carts.
    let durability: DurabilityStats?
    /// The store's kind, state, round trips, conflicts and reconnects.
    let store: StoreHealth

    init(loops: Int, durability: DurabilityStats?, store: StoreHealth = StoreHealth(.sqlite)) {
        self.durability = durability
        self.store = store
        self.loops = (0..<max(1, loops)).map { _ in Locked(RequestTally()) }
    }

    /// Counts one answered request on loop `index`.
    @inline(__always)
    func record(loop index: Int, method: MethodField?, status: StatusCode, nanoseconds: UInt64) {
        loops[index].withLock { $0.record(method: method, status: status, nanoseconds: nanoseconds) }
    }

    /// Every loop's tally, merged.
    func requests() -> RequestTally {
        var all = RequestTally()
        for loop in loops { all.merge(loop.withLock { $0 }) }
        return all
    }
}

/// Requests answered, by method and by status, with each method's latency.
struct RequestTally: Sendable {
    /// Indexed by MethodField's raw value; 0 for requests of no known method.
    private(set) var requests = [UInt64](repeating: 0, count: 64)
    private(set) var errors = [UInt64](repeating: 0, count: 64)
    /// Made when a method is first answered (each is about 60 KB).
    private(set) var latency = [LatencyHistogram?](repeating: nil, count: 64)
    /// Indexed by status code (0...16; anything else at 17).
    private(set) var statuses = [UInt64](repeating: 0, count: 18)

    @inline(__always)
    mutating func record(method: MethodField?, status: StatusCode, nanoseconds: UInt64) {
        let m = Int(method?.rawValue ?? 0) & 63
        requests[m] &+= 1
        if status != .ok { errors[m] &+= 1 }
        if latency[m] == nil { latency[m] = LatencyHistogram() }
        latency[m]!.record(nanoseconds)
        let s = Int(status.rawValue)
        statuses[s >= 0 && s < 17 ? s : 17] &+= 1
    }

    mutating func merge(_ other: RequestTally) {
        for i in 0..<64 {
            requests[i] &+= other.requests[i]
            errors[i] &+= other.errors[i]
            if let h = other.latency[i] {
                if latency[i] == nil { latency[i] = LatencyHistogram() }
                latency[i]!.merge(h)
            }
        }
        for i in statuses.indices { statuses[i] &+= other.statuses[i] }
    }

    /// Stats' lines: one per method answered at least once, by name.
    var methods: [MethodStats] {
        var out: [MethodStats] = []
        for i in 0..<64 where requests[i] > 0 {
            let name = MethodField(rawValue: UInt32(i))?.methodName ?? "(unknown)"
            out.append(MethodStats(method: name, requests: requests[i], errors: errors[i],
                                   latency: latency[i].map(LatencySummary.init) ?? LatencySummary()))
        }
        return out.sorted { $0.method < $1.method }
    }

    /// Answers by status code other than OK.
    var errorCounts: [StatusCount] {
        (1..<17).compactMap { i in statuses[i] > 0 ? StatusCount(code: StatusCode(rawValue: Int32(i)), count: statuses[i]) : nil }
    }
}

extension LatencySummary {
    /// Microseconds, from a histogram of nanoseconds.
    init(_ h: LatencyHistogram) {
        self.init(count: h.totalCount, p50: h.value(atPercentile: 50) / 1000, p90: h.value(atPercentile: 90) / 1000,
                  p99: h.value(atPercentile: 99) / 1000, p999: h.value(atPercentile: 99.9) / 1000,
                  max: h.maximum / 1000, sum: UInt64(h.mean * Double(h.totalCount) / 1000))
    }
}
