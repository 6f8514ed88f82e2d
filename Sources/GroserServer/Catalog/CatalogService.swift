import GroserStorage
import GroserSystem
import Synchronization

/// The catalog every loop serves from: the current `EncodedCatalog`. A
/// change replaces only the segments it touched: the shelves storage marks
/// as changed are read and re-encoded, every other shelf and store is shared
/// with the previous version. The change is then published as a
/// `CatalogChange` to whoever subscribed (watchers, a search index, other
/// hosts).
public final class CatalogService: Sendable {
    private let store: any CatalogStore
    private let imageBaseURL: String
    private let encoded: Locked<EncodedCatalog>
    private let subscribers = Locked<[@Sendable (CatalogChange) -> Void]>([])
    /// Called by `announce()`: the watch hub wakes the event loops.
    private let announcers = Locked<[@Sendable () -> Void]>([])
    private let counters = Locked(Counters())
    /// Serialises the change path: the commit thread's refreshes and an
    /// import's swap.
    private let changing = Locked(())
    /// While an import applies and its catalog is encoded, refreshes from
    /// the commit thread are skipped (the import's reload catches them up),
    /// so the commit thread never encodes a whole catalog.
    private let importing = Atomic<Bool>(false)
    /// When the daemon started, for ServerInfo's uptime.
    public let startedAt: UInt64

    /// What the change path has done since start.
    public struct Counters: Sendable, Hashable {
        /// Shelves encoded: at a whole load and one per changed shelf.
        public var shelvesEncoded = 0
        /// Whole loads of the catalog (the first included).
        public var fullLoads = 0
        /// Changes applied by re-encoding only their shelves.
        public var incrementalChanges = 0
        /// The shelves of the last incremental change.
        public var lastChangedShelves: [String] = []
    }

    public init(store: any CatalogStore, imageBaseURL: String) throws(StorageError) {
        self.store = store
        self.imageBaseURL = imageBaseURL
        self.startedAt = monotonicNanoseconds()
        let first = try Self.encode(store, imageBaseURL)
        encoded = Locked(first)
        counters.withLock { $0.fullLoads = 1; $0.shelvesEncoded = Self.shelfCount(first) }
        Allocator.returnFreeMemory()
    }

    /// Loads and encodes the whole catalog; the decoded form is dropped on return.
    private static func encode(_ store: any CatalogStore, _ imageBaseURL: String,
                               previous: EncodedCatalog? = nil) throws(StorageError) -> EncodedCatalog {
        try EncodedCatalog.load(from: store, imageBaseURL: imageBaseURL, serverVersion: ProtocolInfo.serverVersion, previous: previous)
    }

    private static func shelfCount(_ c: EncodedCatalog) -> Int {
        c.stores.values.reduce(0) { $0 + $1.departments.reduce(0) { $0 + $1.shelves.count } }
    }

    /// The catalog to answer from now.
    public var current: EncodedCatalog { encoded.withLock { $0 } }

    public var stats: Counters { counters.withLock { $0 } }

    /// Calls `handler` with every later change, in version order, on the
    /// thread that applied it, as it is applied; `announce` when the change
    /// may be told (`refresh(announce:)`, `announce()`).
    public func subscribe(_ handler: @escaping @Sendable (CatalogChange) -> Void,
                          announce: @escaping @Sendable () -> Void = {}) {
        subscribers.withLock { $0.append(handler) }
        announcers.withLock { $0.append(announce) }
    }

    /// Brings the served catalog to storage's version: re-encodes the shelves
    /// changed since the current version (the whole catalog when a change
    /// altered a store's layout). Returns true when it changed. Called by the
    /// one thread that commits catalog changes.
    /// With `announce: false` the subscribers record the change but are
    /// not told to send it on until `announce()`: the commit queue first
    /// queues the change's own answer, so watch frames do not go out
    /// before it.
    @discardableResult
    public func refresh(announce: Bool = true) throws(StorageError) -> Bool {
        if importing.load(ordering: .acquiring) { return false }
        let changed = try changing.withLock { (_) throws(StorageError) -> Bool in try refreshLocked() }
        if announce { self.announce() }
        return changed
    }

    /// Tells the subscribers that the changes they recorded may go out.
    public func announce() {
        for announce in announcers.withLock({ $0 }) { announce() }
    }

    /// Runs `apply` (an import's commit), then loads and encodes the whole
    /// catalog on the calling thread, swaps it in and catches up with
    /// changes committed meanwhile. Readers answer from the old catalog until
    /// the swap.
    public func reload<T>(after apply: () throws(StorageError) -> T) throws(StorageError) -> T {
        importing.store(true, ordering: .releasing)
        defer { importing.store(false, ordering: .releasing) }
        let result = try apply()
        let next = try Self.encode(store, imageBaseURL, previous: current)
        try changing.withLock { (_) throws(StorageError) in
            encoded.withLock { if next.version >= $0.version { $0 = next } }
            counters.withLock { $0.fullLoads += 1; $0.shelvesEncoded += Self.shelfCount(next) }
            let change = CatalogChange(catalogVersion: next.version, stores: next.stores.values.map {
                StoreChange(storeUID: $0.uid, storeVersion: $0.version, shelfUIDs: [])
            }.sorted { $0.storeUID < $1.storeUID }, reloaded: true)
            for handler in subscribers.withLock({ $0 }) { handler(change) }
            _ = try refreshLocked()
        }
        announce()
        Allocator.returnFreeMemory()
        return result
    }

    private func refreshLocked() throws(StorageError) -> Bool {
        let old = current
        let (version, shelves) = try store.loadChangedShelves(since: old.version)
        if version == old.version { return false }
        let change: CatalogChange
        if let (next, applied) = old.replacing(shelves: shelves, version: version) {
            encoded.withLock { $0 = next }
            counters.withLock {
                $0.incrementalChanges += 1
                $0.shelvesEncoded += shelves.count
                $0.lastChangedShelves = shelves.keys.sorted()
            }
            change = applied
        } else {
            let next = try Self.encode(store, imageBaseURL, previous: old)
            encoded.withLock { $0 = next }
            counters.withLock { $0.fullLoads += 1; $0.shelvesEncoded += Self.shelfCount(next) }
            Allocator.returnFreeMemory()
            change = CatalogChange(catalogVersion: next.version, stores: next.stores.values.map {
                StoreChange(storeUID: $0.uid, storeVersion: $0.version, shelfUIDs: [])
            }.sorted { $0.storeUID < $1.storeUID }, reloaded: true)
        }
        for handler in subscribers.withLock({ $0 }) { handler(change) }
        return true
    }
}
