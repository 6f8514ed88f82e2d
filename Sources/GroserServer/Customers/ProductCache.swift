import GroserStorage
import GroserWire

/// What a shard knows of products, read from the catalog's store on first
/// use and dropped, by shelf, when a catalog change re-encodes that shelf
/// (the change path publishes every change before its writer answers, so
/// the next batch sees it). Owned by one shard's thread; bounded.
struct ProductCache {
    /// The product alone: a shelf's products are in `byShelf` (an entry
    /// with the shelf's uid retained and released it at every lookup).
    private var products: [String: ProductRecord] = [:]
    private var byShelf: [String: [String]] = [:]
    /// Products not in the catalog, so a client asking for a missing uid
    /// again and again costs one lookup per change, not one per request.
    private var missing: Set<String> = []
    let limit: Int
    let source: @Sendable (String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)?
    private(set) var lookups = 0

    init(limit: Int = 100_000, source: @escaping @Sendable (String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)?) {
        self.limit = limit
        self.source = source
    }

    /// The product, or nil when the catalog has none with this uid.
    mutating func product(_ uid: String) throws(StorageError) -> ProductRecord? {
        if let p = products[uid] { return p }
        if missing.contains(uid) { return nil }
        lookups += 1
        if products.count >= limit || missing.count >= limit { removeAll() }
        guard let (p, shelf) = try source(uid) else {
            missing.insert(uid)
            return nil
        }
        products[uid] = p
        byShelf[shelf, default: []].append(uid)
        return p
    }

    /// What the cache knows without a lookup: the product, `.some(nil)`
    /// when it is known not to exist, nil when unknown.
    func known(_ uid: String) -> ProductRecord?? {
        if let p = products[uid] { return .some(p) }
        if missing.contains(uid) { return .some(nil) }
        return nil
    }

    /// Forgets what `change` may have changed.
    mutating func apply(_ change: CatalogChange) {
        missing.removeAll()
        if change.reloaded { return removeAll() }
        for store in change.stores {
            if store.shelfUIDs.isEmpty {
                let gone = products.filter { $0.value.storeUID == store.storeUID }.map(\.key)
                for uid in gone { products[uid] = nil }
                continue
            }
            for shelf in store.shelfUIDs {
                for uid in byShelf.removeValue(forKey: shelf) ?? [] { products[uid] = nil }
            }
        }
    }

    mutating func removeAll() {
        products.removeAll()
        byShelf.removeAll()
        missing.removeAll()
    }

    var count: Int { products.count }
}
