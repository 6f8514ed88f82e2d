import GroserWire
import Synchronization

/// A product as carts and checkout need it: authoritative price and stock.
///
/// A value with one reference inside: its fields live in a box shared by
/// copies until one of them changes a field (copy on write). A cart
/// request copies its product a dozen times (the lookups' answers, the
/// rules' checks, the view), and a copy of four strings cost eight
/// reference-count operations; a copy of the box costs two.
public struct ProductRecord: Sendable, Hashable {
    @usableFromInline var box: Box

    public init(uid: String, storeUID: String, name: String, price: Money, stock: UInt32) {
        box = Box(uid: uid, storeUID: storeUID, name: name, price: price, stock: stock)
    }

    // Which product it is does not change; its price and stock do.
    @inlinable public var uid: String { box.uid }
    @inlinable public var storeUID: String { box.storeUID }
    @inlinable public var name: String { box.name }
    @inlinable
    public var price: Money {
        get { box.price }
        set { unique().price = newValue }
    }
    @inlinable
    public var stock: UInt32 {
        get { box.stock }
        set { unique().stock = newValue }
    }

    public static func == (a: ProductRecord, b: ProductRecord) -> Bool {
        a.box === b.box || (a.uid == b.uid && a.storeUID == b.storeUID && a.name == b.name
            && a.price == b.price && a.stock == b.stock)
    }

    public func hash(into h: inout Hasher) {
        h.combine(uid)
        h.combine(storeUID)
        h.combine(name)
        h.combine(price)
        h.combine(stock)
    }

    @usableFromInline
    mutating func unique() -> Box {
        if !isKnownUniquelyReferenced(&box) {
            box = Box(uid: box.uid, storeUID: box.storeUID, name: box.name, price: box.price, stock: box.stock)
        }
        return box
    }

    // @unchecked: a box is changed only through `unique()`, by the one
    // value that holds it; shared boxes are never written. For the same
    // reason its fields' exclusivity is not checked at run time (a check
    // per field read, per cart line shown).
    @usableFromInline
    final class Box: @unchecked Sendable {
        @usableFromInline let uid: String
        @usableFromInline let storeUID: String
        @usableFromInline let name: String
        @usableFromInline @exclusivity(unchecked) var price: Money
        @usableFromInline @exclusivity(unchecked) var stock: UInt32
        @usableFromInline init(uid: String, storeUID: String, name: String, price: Money, stock: UInt32) {
            self.uid = uid
            self.storeUID = storeUID
            self.name = name
            self.price = price
            self.stock = stock
        }
    }
}

/// A cart line as stored: the price the customer last saw, so a catalog
/// change is never charged silently.
public struct CartLineRecord: Sendable, Hashable {
    public var productUID: String
    public var quantity: UInt32
    public var seenPriceMinorUnits: Int64
    /// The product as the shard that holds the line last found it, while
    /// that is still good (`ProductSlot.isValid`): the line reads its
    /// product without looking its uid up. Memory only: never stored, and
    /// not part of the line's value (equality and hashing leave it out).
    public var slot: ProductSlot?

    public init(productUID: String, quantity: UInt32, seenPriceMinorUnits: Int64, slot: ProductSlot? = nil) {
        self.productUID = productUID
        self.quantity = quantity
        self.seenPriceMinorUnits = seenPriceMinorUnits
        self.slot = slot
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.productUID == b.productUID && a.quantity == b.quantity && a.seenPriceMinorUnits == b.seenPriceMinorUnits
    }

    public func hash(into h: inout Hasher) {
        h.combine(productUID)
        h.combine(quantity)
        h.combine(seenPriceMinorUnits)
    }
}

/// A product as one customer shard's cache holds it, shared by reference
/// with the cart lines that name it, so that showing a cart reads each
/// line's product without a lookup by uid. The cache marks a slot invalid
/// when a catalog change may have changed its product; a line with an
/// invalid slot looks its product up again. Only the owning shard's thread
/// touches a slot (hence @unchecked): a line that reaches another shard
/// (a guest's cart merged into an account's at login) carries a slot whose
/// `owner` is not that shard's cache, which it must not trust (nor read
/// `isValid` of: another thread writes it).
public final class ProductSlot: @unchecked Sendable {
    public let product: ProductRecord
    /// The cache that made the slot and alone invalidates it (nil: none, in tests).
    public let owner: ObjectIdentifier?
    /// Good until `invalidate`.
    public var isValid: Bool { valid }
    // Not checked for exclusivity at run time (a check on every line's
    // read, made by the reading module when the property was public):
    // only the owning shard's thread touches it.
    @exclusivity(unchecked) private var valid = true
    /// What a cart line shows of the product, read without copying the
    /// product (its strings' references): the price, its currency, whether
    /// none is in stock.
    public let priceMinorUnits: Int64
    public let currency: String
    /// The currency's UTF-8 bytes as a number when they fit 8 bytes (an
    /// ISO 4217 code does), else 0: equal keys but 0 are equal currencies,
    /// compared without reading the string.
    public let currencyKey: UInt64
    public let outOfStock: Bool
    /// This slot's number, never given to another slot of this process:
    /// what a remembered answer line names its product's slot by, without
    /// holding it (`LineMemo`). A product that changes gets a new slot.
    public let serial: UInt64
    private static let serials = Atomic<UInt64>(1)
    /// The product's uid, name and price as a cart answer's line begins
    /// (`EncodedCartLine.head`), written once; freed with the slot.
    @inlinable public var head: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage, count: headCount) }
    @usableFromInline let storage: UnsafeMutableRawPointer
    @usableFromInline let headCount: Int

    public init(_ product: ProductRecord, owner: ObjectIdentifier? = nil) {
        self.product = product
        self.owner = owner
        priceMinorUnits = product.price.minorUnits
        currency = product.price.currency
        currencyKey = Self.key(of: product.price.currency)
        serial = Self.serials.wrappingAdd(1, ordering: .relaxed).oldValue
        outOfStock = product.stock == 0
        let bytes = EncodedCartLine.head(productUID: product.uid, name: product.name, unitPrice: product.price.minorUnits,
                                         currency: product.price.currency)
        storage = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        headCount = bytes.count
        bytes.withUnsafeBytes { if let b = $0.baseAddress { storage.copyMemory(from: b, byteCount: $0.count) } }
    }

    deinit { storage.deallocate() }

    /// `currencyKey` for `currency`.
    static func key(of currency: String) -> UInt64 {
        let utf8 = currency.utf8
        guard !utf8.isEmpty && utf8.count <= 8 else { return 0 }
        var key: UInt64 = 0
        for (i, b) in utf8.enumerated() { key |= UInt64(b) << (8 * UInt64(i)) }
        return key
    }

    /// The product may have changed: lines holding this slot look it up again.
    public func invalidate() { valid = false }
}

/// A stored answer to an idempotent request.
public struct IdempotentAnswer: Sendable, Hashable {
    /// What the first request asked, to tell a retry from a key reused for something else.
    public var fingerprint: String
    /// The response field and encoded body sent the first time.
    public var field: UInt32
    public var body: [UInt8]

    public init(fingerprint: String, field: UInt32, body: [UInt8]) {
        self.fingerprint = fingerprint
        self.field = field
        self.body = body
    }
}

/// The operations of one write transaction on the catalog's database:
/// SetProduct, and checkout's stock and orders. Sessions and carts are in
/// the customer log (`CustomerStore`).
public protocol CommerceTransaction {
    /// Isolates one request inside a grouped commit.
    func savepoint() throws(StorageError)
    func rollbackToSavepoint() throws(StorageError)
    func releaseSavepoint() throws(StorageError)

    /// The store's city code, or nil when there is no such store.
    func storeCityCode(_ storeUID: String) throws(StorageError) -> String?
    func product(_ uid: String) throws(StorageError) -> ProductRecord?
    /// The product as the catalog serves it (image URL still relative), and its stock.
    func catalogProduct(_ uid: String) throws(StorageError) -> (Product, UInt32)?

    /// Checkout's remembered answers (kept with the orders, so a retry after
    /// a crash between the order's commit and the customer log's finds it).
    func idempotentAnswer(session: SessionKey, key: String) throws(StorageError) -> IdempotentAnswer?
    func saveIdempotentAnswer(session: SessionKey, key: String, _ answer: IdempotentAnswer) throws(StorageError)

    /// Takes `quantity` off the product's stock; the caller checked there is enough.
    func decrementStock(productUID: String, by quantity: UInt32) throws(StorageError)
    func updateProduct(_ update: ProductUpdate) throws(StorageError)
    /// Bumps and returns the catalog version (caches are keyed on it), and
    /// marks `products` as changed at that version, so the catalog's
    /// encoded segments can follow with only their shelves re-encoded.
    func bumpCatalogVersion(touching products: [String]) throws(StorageError) -> UInt64

    /// Stores `order` for `session` and returns it with its number assigned
    /// (the number given is ignored).
    func insertOrder(_ order: Order, session: SessionKey) throws(StorageError) -> Order
    /// Newest first.
    func orders(session: SessionKey) throws(StorageError) -> [Order]
}

/// Where carts, sessions and orders live.
public protocol CommerceStore: Sendable {
    /// Runs `body` in one write transaction and commits it durably before
    /// returning; rolls back when `body` throws.
    func write<T>(_ body: (any CommerceTransaction) throws(StorageError) -> T) throws(StorageError) -> T
}
