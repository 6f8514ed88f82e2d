/// A session's carts by store uid, kept small: the first cart inline (a
/// session mostly shops one store), any others in an array. A dictionary of
/// one cart was a 160-byte allocation a session; this is none.
///
/// Reads like the dictionary it replaces (a subscript by store uid, its
/// entries as `(key, value)` pairs); equality ignores the entries' order.
/// Positions (`index(forKey:)`, `subscript(at:)`) hold until a cart is
/// removed.
public struct StoreCarts: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: String, value: StoredCart)
    // Internal, not private: the lookups are inlined into the shard (see
    // SessionTable).
    @usableFromInline var first: Entry?
    @usableFromInline var others: [Entry] = []

    @usableFromInline
    struct Entry: Sendable, Hashable {
        @usableFromInline var store: String
        @usableFromInline var cart: StoredCart
        @usableFromInline init(store: String, cart: StoredCart) {
            self.store = store
            self.cart = cart
        }
    }

    public init() {}

    public init(dictionaryLiteral elements: (String, StoredCart)...) {
        for (store, cart) in elements { self[store] = cart }
    }

    public init<S: Sequence>(_ entries: S) where S.Element == (key: String, value: StoredCart) {
        for (store, cart) in entries { self[store] = cart }
    }

    @inlinable public var count: Int { first == nil ? 0 : 1 + others.count }
    @inlinable public var isEmpty: Bool { first == nil }

    /// Where the cart of `store` lies, or nil when the session has none.
    @inlinable
    public func index(forKey store: String) -> Int? {
        guard let first else { return nil }
        if first.store == store { return 0 }
        for i in others.indices where others[i].store == store { return i + 1 }
        return nil
    }

    /// The cart at a position `index(forKey:)` gave, read or changed in place.
    @inlinable @inline(__always)
    public subscript(at i: Int) -> StoredCart {
        get { i == 0 ? first!.cart : others[i - 1].cart }
        _modify {
            if i == 0 { yield &first!.cart } else { yield &others[i - 1].cart }
        }
    }

    /// `body` on the cart at position `i`, in place: what the hot path
    /// uses, since `subscript(at:)`'s `_modify`, called from another module,
    /// allocated its coroutine's frame on every call.
    @inlinable @inline(__always)
    public mutating func withCart<R, E: Error>(at i: Int, _ body: (inout StoredCart) throws(E) -> R) throws(E) -> R {
        if i == 0 { return try body(&first!.cart) }
        return try body(&others[i - 1].cart)
    }

    public subscript(store: String) -> StoredCart? {
        get { index(forKey: store).map { self[at: $0] } }
        set {
            if let newValue { updateValue(newValue, forKey: store) } else { removeValue(forKey: store) }
        }
    }

    public subscript(store: String, default make: @autoclosure () -> StoredCart) -> StoredCart {
        get { self[store] ?? make() }
        _modify {
            let i: Int
            if let found = index(forKey: store) {
                i = found
            } else {
                updateValue(make(), forKey: store)
                i = count - 1
            }
            yield &self[at: i]
        }
    }

    /// Sets the cart of `store`; returns the one it replaced.
    @discardableResult
    public mutating func updateValue(_ cart: StoredCart, forKey store: String) -> StoredCart? {
        if let i = index(forKey: store) {
            var old = cart
            swap(&old, &self[at: i])
            return old
        }
        if first == nil { first = Entry(store: store, cart: cart) } else { others.append(Entry(store: store, cart: cart)) }
        return nil
    }

    @discardableResult
    public mutating func removeValue(forKey store: String) -> StoredCart? {
        guard let i = index(forKey: store) else { return nil }
        if i > 0 { return others.remove(at: i - 1).cart }
        let old = first!.cart
        first = others.isEmpty ? nil : others.removeFirst()
        return old
    }

    /// The carts as a dictionary (what the login's merge rules take).
    public var dictionary: [String: StoredCart] { Dictionary(uniqueKeysWithValues: map { ($0.key, $0.value) }) }

    public struct Iterator: IteratorProtocol {
        fileprivate let carts: StoreCarts
        fileprivate var at = 0
        public mutating func next() -> Element? {
            guard at < carts.count else { return nil }
            defer { at += 1 }
            let e = at == 0 ? carts.first! : carts.others[at - 1]
            return (e.store, e.cart)
        }
    }

    public func makeIterator() -> Iterator { Iterator(carts: self) }

    public static func == (a: StoreCarts, b: StoreCarts) -> Bool {
        a.count == b.count && a.allSatisfy { b[$0.key] == $0.value }
    }

    public func hash(into h: inout Hasher) {
        // Order-free, as equality is.
        var sum = 0
        for (store, cart) in self {
            var one = Hasher()
            one.combine(store)
            one.combine(cart)
            sum &+= one.finalize()
        }
        h.combine(count)
        h.combine(sum)
    }
}
