import GroserStorage
import GroserWire

/// What a shard knows of products, read from the catalog's store on first
/// use and dropped, by shelf, when a catalog change re-encodes that shelf
/// (the change path publishes every change before its writer answers, so
/// the next batch sees it). Owned by one shard's thread; bounded. Each
/// product is held in a `ProductSlot` that cart lines keep: a slot dropped
/// from the cache is marked invalid, so the lines that hold it look again.
struct ProductCache {
    /// The product alone: a shelf's products are in `byShelf` (an entry
    /// with the shelf's uid retained and released it at every lookup).
    private var products: [String: ProductSlot] = [:]
    private var byShelf: [String: [String]] = [:]
    /// Products not in the catalog, so a client asking for a missing uid
    /// again and again costs one lookup per change, not one per request.
    private var missing: Set<String> = []
    let limit: Int
    /// Who the cache's slots belong to (`owns`).
    private let identity = Identity()
    private final class Identity {}
    let source: @Sendable (String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)?
    private(set) var lookups = 0

    init(limit: Int = 100_000, source: @escaping @Sendable (String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)?) {
        self.limit = limit
        self.source = source
    }

    /// The product, or nil when the catalog has none with this uid.
    /// The product's slot (nil when the catalog has none with this uid).
    mutating func slot(_ uid: String) throws(StorageError) -> ProductSlot? {
        if let p = products[uid] { return p }
        if missing.contains(uid) { return nil }
        lookups += 1
        if products.count >= limit || missing.count >= limit { removeAll() }
        guard let (p, shelf) = try source(uid) else {
            missing.insert(uid)
            return nil
        }
        let slot = ProductSlot(p, owner: ObjectIdentifier(identity))
        products[uid] = slot
        byShelf[shelf, default: []].append(uid)
        return slot
    }

    /// What the cache knows without a lookup: the product, `.some(nil)`
    /// when it is known not to exist, nil when unknown.
    func known(_ uid: String) -> ProductSlot?? {
        if let p = products[uid] { return .some(p) }
        if missing.contains(uid) { return .some(nil) }
        return nil
    }

    /// A slot this cache made (and so invalidates when its product may
    /// change): only such a slot may be trusted while it is valid.
    func owns(_ slot: ProductSlot) -> Bool { slot.owner == owner }

    /// What the slots this cache made carry as their `owner`.
    var owner: ObjectIdentifier { ObjectIdentifier(identity) }

    /// A slot for a product read elsewhere (a checkout's transaction): this
    /// cache's, but invalid from the start, so good for one request only.
    func oneOff(_ product: ProductRecord) -> ProductSlot {
        let slot = ProductSlot(product, owner: ObjectIdentifier(identity))
        slot.invalidate()
        return slot
    }

    /// Forgets what `change` may have changed.
    mutating func apply(_ change: CatalogChange) {
        missing.removeAll()
        if change.reloaded { return removeAll() }
        for store in change.stores {
            if store.shelfUIDs.isEmpty {
                let gone = products.filter { $0.value.product.storeUID == store.storeUID }.map(\.key)
                for uid in gone { products.removeValue(forKey: uid)?.invalidate() }
                continue
            }
            for shelf in store.shelfUIDs {
                for uid in byShelf.removeValue(forKey: shelf) ?? [] { products.removeValue(forKey: uid)?.invalidate() }
            }
        }
    }

    mutating func removeAll() {
        for slot in products.values { slot.invalidate() }
        products.removeAll()
        byShelf.removeAll()
        missing.removeAll()
    }

    var count: Int { products.count }
}
