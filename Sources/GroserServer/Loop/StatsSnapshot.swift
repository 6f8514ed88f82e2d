import GroserStorage
import GroserSystem
import GroserWire

/// What Stats answers: the daemon's counters, its catalog and its
/// connections' admission read at one moment, with the process's memory.
enum StatsSnapshot {
    static func make(catalog: EncodedCatalog, startedAt: UInt64, now: UInt64, counters: DaemonCounters,
                     admission: ConnectionAdmission) -> ServerStats {
        let tally = counters.requests()
        var s = ServerStats()
        s.serverVersion = ProtocolInfo.serverVersion
        s.uptimeMilliseconds = (now &- startedAt) / 1_000_000
        s.connections = UInt64(max(0, admission.openConnections))
        s.connectionsAccepted = UInt64(counters.connectionsAccepted.load(ordering: .relaxed))
        admission.report(into: &s)
        s.connectionsClosedIdle = UInt64(counters.connectionsClosedIdle.load(ordering: .relaxed))
        s.watchers = UInt64(max(0, counters.watchers.load(ordering: .relaxed)))
        s.watchFrames = UInt64(counters.watchFrames.load(ordering: .relaxed))
        s.watchCoalesced = UInt64(counters.watchCoalesced.load(ordering: .relaxed))
        s.watchersCutOff = UInt64(counters.watchersCutOff.load(ordering: .relaxed))
        s.slowReadersCutOff = UInt64(counters.slowReadersCutOff.load(ordering: .relaxed))
        s.methods = tally.methods
        s.errors = tally.errorCounts
        s.catalogVersion = catalog.version
        s.catalogStores = UInt64(catalog.stores.count)
        s.catalogProducts = UInt64(catalog.stores.values.reduce(0) { $0 + $1.productCount })
        if let durability = counters.durability {
            let h = durability.histogram
            s.commitBatches = h.totalCount
            s.fsync = LatencySummary(h)
        }
        let store = counters.store.report
        s.store = store.store
        s.storeState = store.state
        if counters.store.kind == .postgresql { s.storeRoundTrip = LatencySummary(store.roundTrips) }
        s.storeConflicts = store.conflicts
        s.storeReconnects = store.reconnects
        s.residentBytes = UInt64(ProcessInfo.residentKilobytes() ?? 0) * 1024
        s.searchIndexBytes = UInt64(catalog.stores.values.reduce(0) { $0 + $1.searchBytes })
        return s
    }
}
