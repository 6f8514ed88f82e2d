import GroserSystem
import GroserWire

/// One store's part of one catalog change, as watchers get it: made once on
/// the thread that applied the change and shared by every loop, its frame
/// body encoded once for every watcher (each frame adds its own
/// previous_version after it).
public final class StoreChangeRecord: Sendable {
    let storeUID: String
    let version: UInt64
    let catalogVersion: UInt64
    /// The change cannot be named product by product (an import, a layout change).
    let reload: Bool
    let shelfUIDs: [String]
    let products: [ProductChange]
    /// The WatchEvent body, without previous_version.
    let body: [UInt8]

    init(storeUID: String, version: UInt64, catalogVersion: UInt64, reload: Bool, shelfUIDs: [String], products: [ProductChange]) {
        self.storeUID = storeUID
        self.version = version
        self.catalogVersion = catalogVersion
        self.reload = reload
        self.shelfUIDs = shelfUIDs
        self.products = products
        body = BodyEncoder.watchEvent(WatchEvent(storeUID: storeUID, storeVersion: version, previousVersion: 0, reload: reload,
                                                 shelfUIDs: shelfUIDs, products: products, catalogVersion: catalogVersion))
    }
}

/// What a watch starting at `since_version` is told first.
enum CatchUp: Equatable {
    /// The store is at `since_version` (or the client named none).
    case upToDate
    /// These changes happened since: the products as they are now.
    case changes(shelfUIDs: [String], products: [ProductChange])
    /// The daemon no longer has (or never had) every change since: reload.
    case reload
}

/// Carries catalog changes to the watchers: keeps a bounded history of
/// recent store changes (for a watch's catch-up from since_version) and one
/// bounded mailbox per event loop, whose watchers it wakes.
public final class WatchHub: Sendable {
    /// Store changes kept for catch-up.
    static let historyLimit = 4096
    /// Changes a loop may have waiting before they are replaced by "reload".
    static let mailboxLimit = 4096
    /// Products one frame may name; past it the frame says reload.
    static let productLimit = 1000

    private struct History {
        var records: [StoreChangeRecord] = []
        /// Every change with a greater version is in `records`.
        var start: UInt64
        /// Each store's version as the records tell it.
        var storeVersions: [String: UInt64]
    }

    private struct Mailbox {
        var records: [StoreChangeRecord] = []
        var overflowed = false
    }

    private let history: Locked<History>
    private let mailboxes: [Locked<Mailbox>]
    private let wakers = Locked<[@Sendable () -> Void]>([])

    public init(catalog: EncodedCatalog, loops: Int) {
        history = Locked(History(start: catalog.version, storeVersions: catalog.stores.mapValues(\.version)))
        mailboxes = (0..<max(1, loops)).map { _ in Locked(Mailbox()) }
    }

    func attach(wakers: [@Sendable () -> Void]) { self.wakers.withLock { $0 = wakers } }

    /// Called with every catalog change, on the thread that applied it:
    /// records it and fills the loops' mailboxes; `wakeLoops` sends it on.
    func publish(_ change: CatalogChange) {
        var records = change.stores.map { s in
            StoreChangeRecord(storeUID: s.storeUID, version: s.storeVersion, catalogVersion: change.catalogVersion,
                              reload: change.reloaded, shelfUIDs: s.shelfUIDs, products: s.products)
        }
        history.withLock { h in
            if change.reloaded {
                // A store the new catalog no longer has: its watchers are told to reload (and find it gone).
                let kept = Set(change.stores.map(\.storeUID))
                for uid in h.storeVersions.keys.sorted() where !kept.contains(uid) {
                    records.append(StoreChangeRecord(storeUID: uid, version: max(change.catalogVersion, h.storeVersions[uid]! + 1),
                                                     catalogVersion: change.catalogVersion, reload: true, shelfUIDs: [], products: []))
                }
                h.storeVersions = [:]
                for r in records where kept.contains(r.storeUID) { h.storeVersions[r.storeUID] = r.version }
            } else {
                for r in records { h.storeVersions[r.storeUID] = r.version }
            }
            h.records.append(contentsOf: records)
            if h.records.count > Self.historyLimit + Self.historyLimit / 8 {
                let drop = h.records.count - Self.historyLimit
                h.start = max(h.start, h.records[drop - 1].version)
                h.records.removeFirst(drop)
            }
        }
        guard !records.isEmpty else { return }
        for box in mailboxes {
            box.withLock { m in
                if m.overflowed { return }
                if m.records.count + records.count > Self.mailboxLimit {
                    m.records = []
                    m.overflowed = true
                } else {
                    m.records.append(contentsOf: records)
                }
            }
        }
    }

    /// Wakes every loop to send the changes `publish` left in its mailbox
    /// (after the change's own answer is queued: `CatalogService.announce`).
    func wakeLoops() {
        for wake in wakers.withLock({ $0 }) { wake() }
    }

    /// The changes waiting for loop `index`; `overflowed` when some were
    /// dropped (every watcher of the loop must then be told to reload).
    func take(for index: Int) -> (records: [StoreChangeRecord], overflowed: Bool) {
        mailboxes[index].withLock { m in
            defer { m = Mailbox() }
            return (m.records, m.overflowed)
        }
    }

    /// The store's version as watchers know it, and what a watch from
    /// `since` must be told first; nil when the store is unknown.
    func start(store: String, since: UInt64) -> (version: UInt64, catchUp: CatchUp)? {
        history.withLock { h in
            guard let version = h.storeVersions[store] else { return nil }
            if since == 0 || since == version { return (version, .upToDate) }
            if since > version || since < h.start { return (version, .reload) }
            var products: [String: ProductChange] = [:]
            var shelves = Set<String>()
            for r in h.records where r.storeUID == store && r.version > since {
                if r.reload { return (version, .reload) }
                shelves.formUnion(r.shelfUIDs)
                for p in r.products { products[p.uid] = p }
                if products.count > Self.productLimit { return (version, .reload) }
            }
            return (version, .changes(shelfUIDs: shelves.sorted(), products: products.values.sorted { $0.uid < $1.uid }))
        }
    }
}
