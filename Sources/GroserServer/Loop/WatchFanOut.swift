import GroserWire

/// One event loop's watches: which of its connections watch, Watch and
/// CancelWatch on them, and handing catalog changes to their watchers.
/// The loop's thread only; the loop does the I/O (`finishIO`, writes).
struct WatchFanOut {
    /// Connections with at least one watch, by descriptor.
    var watching: [Int32: Connection] = [:]
    /// Watch frames sent since the loop last added them to the counters:
    /// counted once a turn, as one shared atomic per frame bounced its cache
    /// line between the loops at every fan-out.
    var framesUncounted = 0

    /// A connection with this much output not yet taken gets no more watch
    /// frames: its changes wait, merged, until the output drains.
    static let outputLimit = 64 * 1024

    /// Watch: starts a watcher on `connection`, answering into `out`.
    mutating func start(_ request: Request, selector: StoreSelector?, since: UInt64, on connection: Connection,
                        catalog: EncodedCatalog, hub: WatchHub, counters: DaemonCounters, into out: inout [UInt8]) {
        guard WatchRequests.start(id: request.id, selector: selector, since: since, catalog: catalog, hub: hub,
                                  watchers: &connection.watchers, into: &out) else { return }
        watching[connection.socket.descriptor] = connection
        counters.watchers.add(1, ordering: .relaxed)
        counters.watchFrames.add(1, ordering: .relaxed)
    }

    /// CancelWatch: the stream's last frame, then the CancelWatch answer.
    mutating func cancel(_ request: Request, watchID: UInt64, on connection: Connection, counters: DaemonCounters,
                         into out: inout [UInt8]) {
        var end: [UInt8] = []
        var answer: [UInt8] = []
        guard let removed = WatchRequests.cancel(id: request.id, watchID: watchID, watchers: &connection.watchers,
                                                 streamEnd: &end, into: &answer) else {
            out.append(contentsOf: answer)
            return
        }
        if removed.hasPending { connection.machine.watchFrameDropped() }
        counters.watchers.subtract(1, ordering: .relaxed)
        if connection.watchers.isEmpty { watching[connection.socket.descriptor] = nil }
        out.append(contentsOf: end)
        out.append(contentsOf: answer)
    }

    /// The connection closed: its watchers go.
    mutating func closed(_ connection: Connection, counters: DaemonCounters) {
        guard !connection.watchers.isEmpty else { return }
        watching[connection.socket.descriptor] = nil
        counters.watchers.subtract(connection.watchers.count, ordering: .relaxed)
        connection.watchers = []
    }

    /// Hands `records` (and, after the hub overflowed, a reload from
    /// `reload`) to every watcher of this loop; `send` is called for each
    /// connection that now has frames waiting. Returns how many changes
    /// were merged into a frame already waiting.
    /// `watching` is passed as a copy: `send` may close a connection,
    /// which removes it from the loop's own.
    static func deliver(_ records: [StoreChangeRecord], reload: EncodedCatalog?, to watching: [Int32: Connection],
                        send: (Connection) -> Void) -> Int {
        var coalesced = 0
        for connection in watching.values {
            coalesced += Self.hand(records, reload: reload, to: &connection.watchers, machine: &connection.machine)
            if connection.machine.watchesPending > 0 { send(connection) }
        }
        return coalesced
    }

    /// One connection's part of `deliver`, without a socket: each watcher
    /// takes the records of its store (a reload first, when given), and the
    /// machine hears of each watcher that had no frame waiting and now has.
    static func hand(_ records: [StoreChangeRecord], reload catalog: EncodedCatalog?, to watchers: inout [Watcher],
                     machine: inout ConnectionStateMachine) -> Int {
        var coalesced = 0
        for i in watchers.indices {
            let had = watchers[i].hasPending
            if let catalog {
                let store = catalog.stores[watchers[i].storeUID]
                watchers[i].mustReload(version: store?.version ?? catalog.version, catalogVersion: catalog.version)
            }
            for r in records where r.storeUID == watchers[i].storeUID {
                if watchers[i].take(r) { coalesced += 1 }
            }
            if !had && watchers[i].hasPending { machine.watchFrameWaiting() }
        }
        return coalesced
    }

    /// Appends the connection's waiting watch frames: into `direct` (the
    /// loop's buffer, straight to the socket) when nothing is owed before
    /// them, else into the connection's own output. Counts them.
    mutating func push(_ connection: Connection, direct: inout [UInt8]) {
        var sent = 0
        let emit = { (output: inout [UInt8]) in
            for i in connection.watchers.indices where connection.watchers[i].hasPending {
                connection.watchers[i].emit(into: &output)
                sent += 1
            }
        }
        if connection.machine.mayWriteDirectly {
            connection.machine.pushWatchFrames(into: &direct, emit)
        } else {
            connection.machine.pushWatchFrames(emit)
        }
        framesUncounted += sent
    }
}
