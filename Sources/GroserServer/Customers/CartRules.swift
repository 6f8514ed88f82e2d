import GroserStorage
import GroserWire

/// The rules of carts and checkout, as pure functions over values: a cart,
/// a request's fields, what the catalog says of a product, and the clock
/// in; a new cart (or order plan) or a refusal out. No storage call is
/// made here; the shard that owns the cart stores what a rule returns.
public struct CartRules: Sendable {
    public var limits: CartLimits
    /// The currency of an empty cart.
    public var defaultCurrency: String

    public init(limits: CartLimits = CartLimits(), defaultCurrency: String = "RUB") {
        self.limits = limits
        self.defaultCurrency = defaultCurrency
    }

    /// What a rule may ask of the catalog: the product, when it exists.
    public typealias Lookup = (String) -> ProductRecord?

    // MARK: Cart changes
    //
    // Each rule reads the cart and decides a `CartEdit`, which the shard
    // makes in place (`StoredCart.apply`, which moves the version on). The
    // forms that return a new cart apply the edit to a copy, for tests and
    // for callers that hold a copy anyway.

    public func add(_ cart: StoredCart, product uid: String, quantity: UInt32, storeUID: String,
                    _ lookup: Lookup) throws(Refusal) -> StoredCart {
        applied(try addEdit(cart, product: uid, quantity: quantity, storeUID: storeUID, lookup), to: cart)
    }

    public func setQuantity(_ cart: StoredCart, product uid: String, quantity: UInt32, storeUID: String,
                            _ lookup: Lookup) throws(Refusal) -> StoredCart {
        guard let edit = try setQuantityEdit(cart, product: uid, quantity: quantity, storeUID: storeUID, lookup) else { return cart }
        return applied(edit, to: cart)
    }

    public func remove(_ cart: StoredCart, product uid: String) throws(Refusal) -> StoredCart {
        applied(try removeEdit(cart, product: uid), to: cart)
    }

    public func clear(_ cart: StoredCart) -> StoredCart {
        StoredCart(version: cart.version, lines: [])
    }

    /// The copy forms keep the version: the caller moves it on.
    private func applied(_ edit: CartEdit, to cart: StoredCart) -> StoredCart {
        var next = cart
        _ = next.apply(edit)
        next.version = cart.version
        return next
    }

    /// Where a rule finds the product's line: by searching the cart, or
    /// where its caller found it already (nil: the cart has none), so that a
    /// mutation reads the cart's lines once.
    public enum LineOf: Sendable {
        case search
        case at(Int?)

        func index(of uid: String, in cart: borrowing StoredCart) -> Int? {
            switch self {
            case .search: return CartRules.line(of: uid, in: cart)
            case .at(let i):
                assert(i.map { cart.lines[$0].productUID == uid } ?? !cart.lines.contains { $0.productUID == uid },
                       "CartRules.LineOf.at: not where \(uid)'s line is")
                return i
            }
        }
    }

    public func addEdit(_ cart: borrowing StoredCart, product uid: String, quantity: UInt32, storeUID: String,
                        _ lookup: Lookup, line: LineOf = .search) throws(Refusal) -> CartEdit {
        guard (1...limits.maximumQuantity).contains(quantity) else {
            throw Refusal(.invalidArgument, "The quantity must be 1 to \(limits.maximumQuantity), not \(quantity).")
        }
        let p = try orderable(uid, storeUID: storeUID, lookup)
        if let i = line.index(of: uid, in: cart) {
            let have = cart.lines[i].quantity
            let (total, overflow) = have.addingReportingOverflow(quantity)
            guard !overflow, total <= limits.maximumQuantity else {
                throw Refusal(.failedPrecondition, "That would make \(UInt64(have) + UInt64(quantity)) of \(p.name); a line holds at most \(limits.maximumQuantity).")
            }
            return .quantity(at: i, total)
        }
        return try appendEdit(p, quantity: quantity, to: cart)
    }

    /// nil: nothing to change (a quantity of 0 for a product the cart does not hold).
    public func setQuantityEdit(_ cart: borrowing StoredCart, product uid: String, quantity: UInt32, storeUID: String,
                                _ lookup: Lookup, line: LineOf = .search) throws(Refusal) -> CartEdit? {
        try requireProductUID(uid)
        guard quantity <= limits.maximumQuantity else {
            throw Refusal(.invalidArgument, "The quantity must be 0 to \(limits.maximumQuantity), not \(quantity).")
        }
        let index = line.index(of: uid, in: cart)
        if quantity == 0 { return index.map { .remove(at: $0) } }
        if let index {
            // Lowering is always allowed; raising needs the product in stock.
            if quantity > cart.lines[index].quantity { _ = try orderable(uid, storeUID: storeUID, lookup) }
            return .quantity(at: index, quantity)
        }
        return try appendEdit(try orderable(uid, storeUID: storeUID, lookup), quantity: quantity, to: cart)
    }

    public func removeEdit(_ cart: borrowing StoredCart, product uid: String, line: LineOf = .search) throws(Refusal) -> CartEdit {
        try requireProductUID(uid)
        guard let index = line.index(of: uid, in: cart) else {
            throw Refusal(.notFound, "The product \"\(clip(uid))\" is not in the cart.")
        }
        return .remove(at: index)
    }

    /// The line holding `uid`, read in place (`firstIndex(where:)` handed
    /// its closure a copy of each line).
    static func line(of uid: String, in cart: borrowing StoredCart) -> Int? {
        cart.lines.withUnsafeBufferPointer { b in b.indices.first { b[$0].productUID == uid } }
    }

    /// A mutation names the version it was made against (0: any).
    public func checkVersion(_ cart: StoredCart, expected: UInt64) throws(Refusal) {
        if expected != 0 && expected != cart.version {
            throw Refusal(.aborted, "The cart is at version \(cart.version), not \(expected); fetch it and try again.")
        }
    }

    private func appendEdit(_ p: ProductRecord, quantity: UInt32, to cart: borrowing StoredCart) throws(Refusal) -> CartEdit {
        guard cart.lines.count < limits.maximumLines else {
            throw Refusal(.failedPrecondition, "The cart already has \(cart.lines.count) lines, the most it may hold.")
        }
        return .append(CartLineRecord(productUID: p.uid, quantity: quantity, seenPriceMinorUnits: p.price.minorUnits))
    }

    /// Every cart method refuses an empty product uid alike, also where the
    /// product need not exist (SetQuantity 0, RemoveItem).
    private func requireProductUID(_ uid: String) throws(Refusal) {
        guard !uid.isEmpty else { throw Refusal(.invalidArgument, "The product uid is empty.") }
    }

    /// The product, when it exists in this store and is in stock.
    private func orderable(_ uid: String, storeUID: String, _ lookup: Lookup) throws(Refusal) -> ProductRecord {
        try requireProductUID(uid)
        guard let p = lookup(uid) else { throw Refusal(.invalidArgument, "No product has the uid \"\(clip(uid))\".") }
        guard p.storeUID == storeUID else {
            throw Refusal(.invalidArgument, "\(p.name) (\(uid)) is sold by store \(p.storeUID), not by this cart's store \(storeUID).")
        }
        guard p.stock > 0 else { throw Refusal(.failedPrecondition, "\(p.name) is out of stock.") }
        return p
    }

    // MARK: What the customer sees

    public func emptyCart(_ storeUID: String) -> Cart {
        Cart(storeUID: storeUID, lines: [], subtotal: Money(minorUnits: 0, currency: defaultCurrency),
             itemCount: 0, currency: defaultCurrency, version: 0)
    }

    /// The cart as the customer sees it: current prices, changed lines
    /// marked, totals in checked arithmetic. Products no longer sold are left out.
    public func view(_ cart: StoredCart, storeUID: String, _ lookup: Lookup) throws(Refusal) -> Cart {
        let shown = try self.shown(cart, storeUID: storeUID, lookup)
        return Cart(storeUID: storeUID, lines: shown.lines.map(CartLine.init), subtotal: shown.subtotal,
                    itemCount: shown.itemCount, currency: shown.currency, version: shown.version)
    }

    /// `view`, with each line as its stored record and its product: what
    /// `view` builds its lines from, and what a shard encodes its answer
    /// from directly (`ShownCart.body`).
    public func shown(_ cart: StoredCart, storeUID: String, _ lookup: Lookup) throws(Refusal) -> ShownCart {
        var lines: [ShownLine] = []
        lines.reserveCapacity(cart.lines.count)
        let totals = try show(cart, lookup, into: &lines)
        return ShownCart(storeUID: storeUID, lines: lines, subtotal: totals.subtotal, itemCount: totals.itemCount,
                         currency: totals.subtotal.currency, version: cart.version)
    }

    /// `shown`'s lines appended to `lines`, and its totals.
    public func show(_ cart: borrowing StoredCart, _ lookup: Lookup,
                     into lines: inout [ShownLine]) throws(Refusal) -> (subtotal: Money, itemCount: UInt32) {
        var totals = ShownTotals()
        try cart.lines.withUnsafeBufferPointer { (stored) throws(Refusal) in
            for i in stored.indices {
                guard let p = lookup(stored[i].productUID) else { continue }
                let total = try totals.add(p.price, stored[i].quantity)
                lines.append(ShownLine(record: stored[i], product: p, total: total))
            }
        }
        return (Money(minorUnits: totals.subtotal, currency: totals.currency ?? defaultCurrency), totals.items)
    }

    /// Drops from `lines` those not among `shown` (the lines of products
    /// the catalog no longer has, which showing skips), keeping the order:
    /// no lookup of its own. `shown` is `lines`' shown lines, in order, and
    /// a cart holds a product at most once.
    public static func keepShown<L: CartLineFields>(_ lines: inout [CartLineRecord], _ shown: [L]) {
        guard shown.count < lines.count else { return }
        var next = 0
        lines.removeAll { r in
            guard next < shown.count, shown[next].productUID == r.productUID else { return true }
            next += 1
            return false
        }
    }

    /// Showing a cart shows its new prices: from then on they are the ones
    /// the customer saw, and checkout may charge them. The cart with those
    /// prices as seen (version bumped), or nil when no price changed.
    public func acknowledgingPrices(_ cart: StoredCart, shown: Cart) -> StoredCart? {
        guard shown.lines.contains(where: \.priceChanged) else { return nil }
        var next = cart
        for line in shown.lines where line.priceChanged {
            if let i = next.lines.firstIndex(where: { $0.productUID == line.productUID }) {
                next.lines[i].seenPriceMinorUnits = line.unitPrice.minorUnits
            }
        }
        next.version += 1
        return next
    }

    // MARK: Checkout

    /// What a checkout that passed every rule takes and records.
    public struct CheckoutPlan: Sendable, Hashable {
        public var order: Order
        /// (product, units) to take off stock.
        public var take: [(String, UInt32)] { order.lines.map { ($0.productUID, $0.quantity) } }
        /// Products whose last units this order takes.
        public var soldOut: [String]
        public static func == (a: Self, b: Self) -> Bool { a.order == b.order && a.soldOut == b.soldOut }
        public func hash(into h: inout Hasher) { h.combine(order) }
    }

    /// The fingerprint an idempotency key is bound to. It is stored, so it
    /// keeps the card's last four digits only.
    public static func checkoutFingerprint(_ d: CheckoutDetails) -> String {
        let last4 = String(d.card.number.filter(\.isNumber).suffix(4))
        return "Checkout|\(d.storeUID)|\(d.expectedVersion)|\(d.deliveryAddress.trimmingCharacters)|\(last4)|\(d.card.expiryMonth)/\(d.card.expiryYear)|\(d.card.holderName.trimmingCharacters)"
    }

    /// Checks a checkout against the cart the customer confirmed and the
    /// catalog as it is now (`lookup` must read stock inside the transaction
    /// that takes it), and plans the order.
    public func planCheckout(_ d: CheckoutDetails, cart: StoredCart?, cityCode: String, lookup: Lookup,
                             now: (year: Int, month: Int), unixTime: Int64) throws(Refusal) -> CheckoutPlan {
        let address = d.deliveryAddress.trimmingCharacters
        let holder = d.card.holderName.trimmingCharacters
        let card: CardSummary
        switch CardCheck.validate(d.card, now: now) {
        case .success(let c): card = c
        case .failure(let refusal): throw refusal
        }
        guard !holder.isEmpty else { throw Refusal(.invalidArgument, "The card holder's name is empty.") }
        guard !address.isEmpty else { throw Refusal(.invalidArgument, "The delivery address is empty.") }
        guard d.expectedVersion != 0 else {
            throw Refusal(.invalidArgument, "Checkout needs the version of the cart the customer confirmed.")
        }
        guard let cart, !cart.lines.isEmpty else {
            throw Refusal(.failedPrecondition, "The cart is empty; there is nothing to check out.")
        }
        guard cart.version == d.expectedVersion else {
            throw Refusal(.aborted, "The cart is at version \(cart.version), not \(d.expectedVersion); fetch it, confirm it, and check out again.")
        }
        let shown = try view(cart, storeUID: d.storeUID, lookup)
        let changed = shown.lines.filter(\.priceChanged)
        if !changed.isEmpty {
            let names = changed.map { "\($0.name) (\(Self.format($0.previousPrice)) → \(Self.format($0.unitPrice)))" }
                .joined(separator: ", ")
            throw Refusal(.failedPrecondition, "Prices changed since the cart was last shown: \(names); fetch the cart, then check out again.")
        }
        var soldOut: [String] = []
        for line in shown.lines {
            guard let p = lookup(line.productUID) else { throw Refusal(.failedPrecondition, "\(line.name) is no longer sold.") }
            guard p.stock >= line.quantity else {
                throw Refusal(.failedPrecondition, p.stock == 0
                    ? "\(line.name) is out of stock; remove it and check out again."
                    : "Only \(p.stock) of \(line.name) are left, and the cart holds \(line.quantity).")
            }
            if p.stock == line.quantity { soldOut.append(line.productUID) }
        }
        let order = Order(
            number: "", storeUID: d.storeUID, cityCode: cityCode,
            lines: shown.lines.map { OrderLine(productUID: $0.productUID, name: $0.name, unitPrice: $0.unitPrice,
                                               quantity: $0.quantity, lineTotal: $0.lineTotal) },
            total: shown.subtotal, cardBrand: card.brand, cardLast4: card.last4, createdAtUnix: unixTime,
            deliveryAddress: address, holderName: holder)
        return CheckoutPlan(order: order, soldOut: soldOut)
    }

    static func format(_ m: Money?) -> String {
        guard let m else { return "?" }
        let sign = m.minorUnits < 0 ? "-" : ""
        let v = m.minorUnits.magnitude
        let cents = v % 100
        return "\(sign)\(v / 100).\(cents < 10 ? "0" : "")\(cents) \(m.currency)"
    }
}

/// A shown cart's running totals, in checked arithmetic, and its one currency.
struct ShownTotals {
    var subtotal: Int64 = 0
    var items: UInt32 = 0
    var currency: String?

    /// Adds a line; returns its total (the price times the quantity).
    mutating func add(_ price: Money, _ quantity: UInt32) throws(Refusal) -> Int64 {
        try add(price.minorUnits, price.currency, quantity)
    }

    @inline(__always)
    mutating func add(_ minorUnits: Int64, _ lineCurrency: String, _ quantity: UInt32) throws(Refusal) -> Int64 {
        try admit(lineCurrency)
        return try add(minorUnits, quantity)
    }

    /// A line in `lineCurrency` may join the lines added so far.
    @inline(__always)
    mutating func admit(_ lineCurrency: String) throws(Refusal) {
        if currency == nil { currency = lineCurrency }
        guard currency == lineCurrency else {
            throw Refusal(.failedPrecondition, "The cart mixes currencies (\(currency ?? "") and \(lineCurrency)).")
        }
    }

    /// Adds a line whose currency was admitted; returns its total.
    @inline(__always)
    mutating func add(_ minorUnits: Int64, _ quantity: UInt32) throws(Refusal) -> Int64 {
        let (total, overflow) = minorUnits.multipliedReportingOverflow(by: Int64(quantity))
        let (sum, overflow2) = subtotal.addingReportingOverflow(total)
        guard !overflow, !overflow2 else { throw Refusal(.failedPrecondition, "The cart's total is too large to compute.") }
        subtotal = sum
        let (count, overflow3) = items.addingReportingOverflow(quantity)
        guard !overflow3 else {
            throw Refusal(.failedPrecondition, "The cart would hold more than \(UInt32.max) items, more than a cart can count.")
        }
        items = count
        return total
    }
}

func clip(_ s: String) -> String { s.count <= 64 ? s : String(s.prefix(64)) + "…" }

/// One line of a cart as shown: the product as the catalog has it now,
/// and what the stored line says (the quantity, the price the customer saw).
/// Its fields are read once from the product, so the writer's two passes
/// read stored properties only.
public struct ShownLine: Sendable, CartLineFields {
    public let productUID: String
    public let name: String
    public let unitPriceMinorUnits: Int64
    public let currency: String
    public let quantity: UInt32
    /// The price times the quantity.
    public let total: Int64
    public let seenPriceMinorUnits: Int64
    public let outOfStock: Bool

    init(record r: borrowing CartLineRecord, product p: borrowing ProductRecord, total: Int64) {
        productUID = p.uid
        name = p.name
        let price = p.price
        unitPriceMinorUnits = price.minorUnits
        currency = price.currency
        quantity = r.quantity
        self.total = total
        seenPriceMinorUnits = r.seenPriceMinorUnits
        outOfStock = p.stock == 0
    }

    public var unitPriceCurrency: String { currency }
    public var lineTotalMinorUnits: Int64 { total }
    public var lineTotalCurrency: String { currency }
    public var priceChanged: Bool { seenPriceMinorUnits != unitPriceMinorUnits }
    public var previousPriceMinorUnits: Int64? { priceChanged ? seenPriceMinorUnits : nil }
    public var previousPriceCurrency: String { currency }
}

extension CartLine {
    init(_ l: ShownLine) {
        self.init(productUID: l.productUID, name: l.name, unitPrice: Money(minorUnits: l.unitPriceMinorUnits, currency: l.currency),
                  quantity: l.quantity, lineTotal: Money(minorUnits: l.total, currency: l.currency), priceChanged: l.priceChanged,
                  previousPrice: l.previousPriceMinorUnits.map { Money(minorUnits: $0, currency: l.currency) },
                  outOfStock: l.outOfStock)
    }
}

/// A cart as `CartRules.shown` shows it.
public struct ShownCart: Sendable {
    public var storeUID: String
    public var lines: [ShownLine]
    public var subtotal: Money
    public var itemCount: UInt32
    public var currency: String
    public var version: UInt64

    /// The CartResponse body: the bytes `BodyEncoder.cart(_:)` writes for
    /// this cart's `view`, without building it.
    public var body: [UInt8] {
        BodyEncoder.cart(storeUID: storeUID, lines: lines, subtotal: subtotal, itemCount: itemCount,
                         currency: currency, version: version)
    }

    /// The whole OK response frame with `body`, for request `id` of
    /// method `field`, in one allocation.
    public func frame(id: UInt64, field: MethodField) -> [UInt8] {
        BodyEncoder.cartFrame(id: id, field: field, storeUID: storeUID, lines: lines, subtotal: subtotal,
                              itemCount: itemCount, currency: currency, version: version)
    }
}
