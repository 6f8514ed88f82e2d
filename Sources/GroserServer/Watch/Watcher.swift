import GroserWire

/// One watch on a connection: which store, the version its last frame
/// said, and the changes not yet sent, merged (the latest state of each
/// product wins). A pure value: the loop feeds it changes and asks it for
/// the next frame when the connection can take one.
public struct Watcher: Sendable {
    /// The Watch request's id: every frame of the watch carries it.
    let id: UInt64
    let storeUID: String
    /// The store version the last frame sent said.
    private(set) var sentVersion: UInt64
    private(set) var pending: Pending?

    struct Pending: Equatable {
        var version: UInt64
        var catalogVersion: UInt64
        var reload: Bool
        /// The merged changes' shelves and products; empty while `single`
        /// holds the frame's one change.
        var shelfUIDs: Set<String>
        var products: [String: ProductChange]
        /// Changes merged into this one frame beyond the first.
        var merged: Int
    }

    /// The one change a pending frame holds, when it holds exactly one: its
    /// body is then sent as encoded once.
    private(set) var single: StoreChangeRecord?

    init(id: UInt64, storeUID: String, version: UInt64) {
        self.id = id
        self.storeUID = storeUID
        self.sentVersion = version
    }

    var hasPending: Bool { pending != nil }

    /// Takes a change of this watcher's store. Returns true when it merged
    /// into a frame not yet sent (coalesced); a change the watcher already
    /// has (its version is not newer) is ignored.
    @discardableResult
    mutating func take(_ r: StoreChangeRecord) -> Bool {
        guard r.storeUID == storeUID, r.version > (pending?.version ?? sentVersion) else { return false }
        guard var p = pending else {
            // The common case, one change per frame: the record's body is sent
            // as encoded once; the sets are built only if a second one merges.
            pending = Pending(version: r.version, catalogVersion: r.catalogVersion, reload: r.reload,
                              shelfUIDs: [], products: [:], merged: 0)
            single = r
            return false
        }
        if let first = single {
            if !first.reload {
                p.shelfUIDs = Set(first.shelfUIDs)
                for c in first.products { p.products[c.uid] = c }
            }
            single = nil
        }
        p.version = r.version
        p.catalogVersion = r.catalogVersion
        p.merged += 1
        if r.reload || p.reload {
            p.reload = true
        } else {
            p.shelfUIDs.formUnion(r.shelfUIDs)
            for c in r.products { p.products[c.uid] = c }
            // Past the limit the frame stops naming products: reload.
            if p.products.count > WatchHub.productLimit { p.reload = true }
        }
        if p.reload {
            p.shelfUIDs = []
            p.products = [:]
        }
        pending = p
        return true
    }

    /// Marks the watcher as owing a reload frame at `version` (its loop's
    /// mailbox overflowed, so changes were dropped).
    mutating func mustReload(version: UInt64, catalogVersion: UInt64) {
        guard version > (pending?.version ?? sentVersion) else { return }
        pending = Pending(version: version, catalogVersion: catalogVersion, reload: true, shelfUIDs: [], products: [:],
                          merged: pending.map { $0.merged + 1 } ?? 0)
        single = nil
    }

    /// Appends the pending frame (continues set) to `out` and marks it sent.
    mutating func emit(into out: inout [UInt8]) {
        guard let p = pending else { return }
        if let r = single {
            r.body.withUnsafeBytes { body in
                ResponseFrameWriter.appendStreamFrame(id: id, field: .watch, body: body, appendingVarintField: 3,
                                                      value: sentVersion, continues: true, to: &out)
            }
        } else {
            let event = WatchEvent(storeUID: storeUID, storeVersion: p.version, previousVersion: sentVersion, reload: p.reload,
                                   shelfUIDs: p.shelfUIDs.sorted(), products: p.products.values.sorted { $0.uid < $1.uid },
                                   catalogVersion: p.catalogVersion)
            BodyEncoder.watchEvent(event).withUnsafeBytes { body in
                ResponseFrameWriter.appendStreamFrame(id: id, field: .watch, body: body, continues: true, to: &out)
            }
        }
        sentVersion = p.version
        pending = nil
        single = nil
    }
}
