import GroserStorage
import GroserSystem
import GroserWire

/// The answer of one commerce request.
public enum CommerceOutcome: Sendable, Hashable {
    case ok(MethodField, [UInt8])
    case failed(Status)
}

/// Limits a cart obeys.
public struct CartLimits: Sendable {
    /// The most units of one product in a cart.
    public var maximumQuantity: UInt32 = 99
    /// The most lines in a cart.
    public var maximumLines = 200
    public init(maximumQuantity: UInt32 = 99, maximumLines: Int = 200) {
        self.maximumQuantity = maximumQuantity
        self.maximumLines = maximumLines
    }
}

/// A request's failure as a status: thrown inside the rules, caught once
/// and sent as the response's status.
public struct Refusal: Error, Sendable, Hashable {
    public var status: Status
    public init(_ code: StatusCode, _ message: String) { status = Status(code, message) }
}

/// Who sent a request, from the socket's peer credentials.
public struct Caller: Sendable, Hashable {
    public var uid: UInt32?
    public var gid: UInt32?
    public init(uid: UInt32?, gid: UInt32? = nil) {
        self.uid = uid
        self.gid = gid
    }
}

/// The rules of carts, checkout and catalog updates, run inside a write
/// transaction. Storage only stores; everything a customer can get wrong is
/// decided here.
public struct CommerceService: Sendable {
    public var limits: CartLimits
    /// Users who may change the catalog besides root.
    public var adminUIDs: Set<UInt32>
    /// Members of this group may change the catalog too.
    public var adminGroup: UInt32?
    /// Group membership, from the system's databases unless a test says otherwise.
    public var isMember: @Sendable (_ uid: UInt32, _ gid: UInt32, _ group: UInt32) -> Bool = Accounts.isMember
    public var imageBaseURL: String
    /// The currency of an empty cart.
    public var defaultCurrency = "RUB"
    /// The clock, as (year, month), for card expiry.
    public var yearMonth: @Sendable () -> (year: Int, month: Int)
    public var unixTime: @Sendable () -> Int64

    public init(limits: CartLimits = CartLimits(), adminUIDs: Set<UInt32>, adminGroup: UInt32? = nil, imageBaseURL: String,
                yearMonth: @escaping @Sendable () -> (year: Int, month: Int) = localYearMonth,
                unixTime: @escaping @Sendable () -> Int64 = wallClockSeconds) {
        self.limits = limits
        self.adminUIDs = adminUIDs
        self.adminGroup = adminGroup
        self.imageBaseURL = imageBaseURL
        self.yearMonth = yearMonth
        self.unixTime = unixTime
    }

    /// True for the methods this service answers.
    public static func handles(_ method: RequestMethod) -> Bool {
        switch method {
        case .openSession, .getCart, .addItem, .setQuantity, .removeItem, .clearCart, .checkout, .listOrders, .setProduct,
             .importCatalog, .exportCatalog:
            return true
        default:
            return false
        }
    }

    /// Runs one request in its own savepoint: a refused request leaves no
    /// partial change behind, whatever else the transaction holds.
    /// `catalogChanged` is true when the catalog's version moved. Throws only
    /// when the savepoint itself fails (the transaction is then unusable).
    public func execute(_ method: RequestMethod, caller: Caller,
                        in tx: any CommerceTransaction) throws(StorageError) -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        try tx.savepoint()
        let result: (outcome: CommerceOutcome, catalogChanged: Bool)
        do {
            result = try run(method, caller: caller, tx)
        } catch let refusal as Refusal {
            result = (.failed(refusal.status), false)
        } catch let error as StorageError {
            result = (.failed(Status(.internal, "The store failed: \(error.description).")), false)
        } catch {
            result = (.failed(Status(.internal, "Unexpected error: \(error).")), false)
        }
        if case .failed = result.outcome {
            try tx.rollbackToSavepoint()
            return (result.outcome, false)
        }
        try tx.releaseSavepoint()
        return result
    }

    private func run(_ method: RequestMethod, caller: Caller, _ tx: any CommerceTransaction) throws -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        if let refusal = FieldLimits.violation(in: method) { throw refusal }
        switch method {
        case .openSession:
            let token: String
            do { token = try KernelRandom.hex(16) } catch {
                throw Refusal(.unavailable, "The kernel gave no random bytes for a session token: \(error).")
            }
            try tx.createSession(SessionKey(token: token), createdAtUnix: unixTime())
            return (.ok(.openSession, BodyEncoder.openSession(token)), false)

        case .getCart(let session, let storeUID):
            let key = try checkSession(session, tx)
            try checkStore(storeUID, tx)
            guard var record = try tx.cart(session: key, storeUID: storeUID) else {
                return (.ok(.getCart, BodyEncoder.cart(emptyCart(storeUID))), false)
            }
            let cart = try build(record, storeUID: storeUID, tx)
            // Showing the cart shows the new prices: from now on they are
            // the ones the customer saw, and checkout may charge them.
            if cart.lines.contains(where: \.priceChanged) {
                for line in cart.lines where line.priceChanged {
                    try tx.setLine(cartID: record.id, CartLineRecord(productUID: line.productUID, quantity: line.quantity,
                                                                     seenPriceMinorUnits: line.unitPrice.minorUnits))
                }
                record.version += 1
                try tx.setCartVersion(cartID: record.id, record.version)
                var shown = cart
                shown.version = record.version
                return (.ok(.getCart, BodyEncoder.cart(shown)), false)
            }
            return (.ok(.getCart, BodyEncoder.cart(cart)), false)

        case .addItem(let m, let product, let quantity):
            return try mutate(.addItem, m, fingerprint: "add|\(product)|\(quantity)", tx) { record in
                guard (1...limits.maximumQuantity).contains(quantity) else {
                    throw Refusal(.invalidArgument, "The quantity must be 1 to \(limits.maximumQuantity), not \(quantity).")
                }
                let p = try orderable(product, storeUID: m.storeUID, tx)
                if let line = record.lines.first(where: { $0.productUID == product }) {
                    let (total, overflow) = line.quantity.addingReportingOverflow(quantity)
                    guard !overflow, total <= limits.maximumQuantity else {
                        throw Refusal(.failedPrecondition, "That would make \(UInt64(line.quantity) + UInt64(quantity)) of \(p.name); a line holds at most \(limits.maximumQuantity).")
                    }
                    try tx.setLine(cartID: record.id, CartLineRecord(productUID: product, quantity: total,
                                                                     seenPriceMinorUnits: line.seenPriceMinorUnits))
                } else {
                    try addLine(p, quantity: quantity, record, tx)
                }
            }

        case .setQuantity(let m, let product, let quantity):
            return try mutate(.setQuantity, m, fingerprint: "set|\(product)|\(quantity)", tx) { record in
                try requireProductUID(product)
                guard quantity <= limits.maximumQuantity else {
                    throw Refusal(.invalidArgument, "The quantity must be 0 to \(limits.maximumQuantity), not \(quantity).")
                }
                let line = record.lines.first(where: { $0.productUID == product })
                if quantity == 0 {
                    if line != nil { try tx.deleteLine(cartID: record.id, productUID: product) }
                    return
                }
                if let line {
                    if quantity > line.quantity { _ = try orderable(product, storeUID: m.storeUID, tx) }
                    try tx.setLine(cartID: record.id, CartLineRecord(productUID: product, quantity: quantity,
                                                                     seenPriceMinorUnits: line.seenPriceMinorUnits))
                } else {
                    try addLine(try orderable(product, storeUID: m.storeUID, tx), quantity: quantity, record, tx)
                }
            }

        case .removeItem(let m, let product):
            return try mutate(.removeItem, m, fingerprint: "remove|\(product)", tx) { record in
                try requireProductUID(product)
                guard record.lines.contains(where: { $0.productUID == product }) else {
                    throw Refusal(.notFound, "The product \"\(clip(product))\" is not in the cart.")
                }
                try tx.deleteLine(cartID: record.id, productUID: product)
            }

        case .clearCart(let m):
            return try mutate(.clearCart, m, fingerprint: "clear", tx) { record in
                try tx.deleteAllLines(cartID: record.id)
            }

        case .checkout(let d):
            return try checkout(d, tx)

        case .listOrders(let session):
            let key = try checkSession(session, tx)
            return (.ok(.listOrders, BodyEncoder.listOrders(try tx.orders(session: key))), false)

        case .setProduct(let update):
            return try setProduct(update, caller: caller, tx)

        default:
            throw Refusal(.unimplemented, "The commerce service does not answer this method.")
        }
    }

    // MARK: Mutations

    /// The shared path of every cart mutation: session and store checks,
    /// idempotency, the version check, the change, the new version, the answer.
    private func mutate(_ field: MethodField, _ m: CartMutation, fingerprint: String, _ tx: any CommerceTransaction,
                        change: (CartRecord) throws -> Void) throws -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        let session = try checkSession(m.session, tx)
        try checkStore(m.storeUID, tx)
        let print = "\(field.methodName)|\(m.storeUID)|\(m.expectedVersion)|\(fingerprint)"
        if let replay = try replay(session: session, key: m.idempotencyKey, fingerprint: print, tx) {
            return (replay, false)
        }
        var record = try tx.cart(session: session, storeUID: m.storeUID)
            ?? tx.createCart(session: session, storeUID: m.storeUID)
        if m.expectedVersion != 0 && m.expectedVersion != record.version {
            throw Refusal(.aborted, "The cart is at version \(record.version), not \(m.expectedVersion); fetch it and try again.")
        }
        try change(record)
        record.version += 1
        try tx.setCartVersion(cartID: record.id, record.version)
        guard let updated = try tx.cart(session: session, storeUID: m.storeUID) else {
            throw Refusal(.internal, "The cart vanished while it was being changed.")
        }
        let body = BodyEncoder.cart(try build(updated, storeUID: m.storeUID, tx))
        try remember(session: session, key: m.idempotencyKey, fingerprint: print, field: field, body: body, tx)
        return (.ok(field, body), false)
    }

    private func addLine(_ p: ProductRecord, quantity: UInt32, _ record: CartRecord, _ tx: any CommerceTransaction) throws {
        guard record.lines.count < limits.maximumLines else {
            throw Refusal(.failedPrecondition, "The cart already has \(record.lines.count) lines, the most it may hold.")
        }
        try tx.setLine(cartID: record.id, CartLineRecord(productUID: p.uid, quantity: quantity,
                                                         seenPriceMinorUnits: p.price.minorUnits))
    }

    /// Every cart method refuses an empty product uid alike, also
    /// where the product need not exist (SetQuantity 0, RemoveItem).
    private func requireProductUID(_ uid: String) throws {
        guard !uid.isEmpty else { throw Refusal(.invalidArgument, "The product uid is empty.") }
    }

    /// The product, when it exists in this store and is in stock.
    private func orderable(_ uid: String, storeUID: String, _ tx: any CommerceTransaction) throws -> ProductRecord {
        try requireProductUID(uid)
        guard let p = try tx.product(uid) else {
            throw Refusal(.invalidArgument, "No product has the uid \"\(clip(uid))\".")
        }
        guard p.storeUID == storeUID else {
            throw Refusal(.invalidArgument, "\(p.name) (\(uid)) is sold by store \(p.storeUID), not by this cart's store \(storeUID).")
        }
        guard p.stock > 0 else { throw Refusal(.failedPrecondition, "\(p.name) is out of stock.") }
        return p
    }

    // MARK: Checkout

    private func checkout(_ d: CheckoutDetails, _ tx: any CommerceTransaction) throws -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        let session = try checkSession(d.session, tx)
        try checkStore(d.storeUID, tx)
        let cityCode = try tx.storeCityCode(d.storeUID) ?? ""
        let address = d.deliveryAddress.trimmingCharacters
        let holder = d.card.holderName.trimmingCharacters
        // A retry finds its order before anything else is checked (the card
        // may have expired since). The fingerprint is stored, so it keeps
        // the card's last four digits only.
        let last4 = String(d.card.number.filter(\.isNumber).suffix(4))
        let print = "Checkout|\(d.storeUID)|\(d.expectedVersion)|\(address)|\(last4)|\(d.card.expiryMonth)/\(d.card.expiryYear)|\(holder)"
        if let replay = try replay(session: session, key: d.idempotencyKey, fingerprint: print, tx) {
            return (replay, false)
        }
        let card: CardSummary
        switch CardCheck.validate(d.card, now: yearMonth()) {
        case .success(let c): card = c
        case .failure(let refusal): throw refusal
        }
        guard !holder.isEmpty else { throw Refusal(.invalidArgument, "The card holder's name is empty.") }
        guard !address.isEmpty else { throw Refusal(.invalidArgument, "The delivery address is empty.") }
        guard d.expectedVersion != 0 else {
            throw Refusal(.invalidArgument, "Checkout needs the version of the cart the customer confirmed.")
        }
        guard let record = try tx.cart(session: session, storeUID: d.storeUID), !record.lines.isEmpty else {
            throw Refusal(.failedPrecondition, "The cart is empty; there is nothing to check out.")
        }
        guard record.version == d.expectedVersion else {
            throw Refusal(.aborted, "The cart is at version \(record.version), not \(d.expectedVersion); fetch it, confirm it, and check out again.")
        }
        let cart = try build(record, storeUID: d.storeUID, tx)
        let changed = cart.lines.filter(\.priceChanged)
        if !changed.isEmpty {
            let names = changed.map { line in
                "\(line.name) (\(formatMoney(line.previousPrice)) → \(formatMoney(line.unitPrice)))"
            }.joined(separator: ", ")
            throw Refusal(.failedPrecondition, "Prices changed since the cart was last shown: \(names); fetch the cart, then check out again.")
        }
        var soldOut: [String] = []
        for line in cart.lines {
            guard let p = try tx.product(line.productUID) else {
                throw Refusal(.failedPrecondition, "\(line.name) is no longer sold.")
            }
            guard p.stock >= line.quantity else {
                throw Refusal(.failedPrecondition, p.stock == 0
                    ? "\(line.name) is out of stock; remove it and check out again."
                    : "Only \(p.stock) of \(line.name) are left, and the cart holds \(line.quantity).")
            }
            try tx.decrementStock(productUID: line.productUID, by: line.quantity)
            if p.stock == line.quantity { soldOut.append(line.productUID) }
        }
        let order = try tx.insertOrder(Order(
            number: "", storeUID: d.storeUID, cityCode: cityCode,
            lines: cart.lines.map { OrderLine(productUID: $0.productUID, name: $0.name, unitPrice: $0.unitPrice,
                                              quantity: $0.quantity, lineTotal: $0.lineTotal) },
            total: cart.subtotal, cardBrand: card.brand, cardLast4: card.last4, createdAtUnix: unixTime(),
            deliveryAddress: address, holderName: holder), session: session)
        try tx.deleteAllLines(cartID: record.id)
        try tx.setCartVersion(cartID: record.id, record.version + 1)
        // A product that sold out changes what the catalog shows.
        if !soldOut.isEmpty { _ = try tx.bumpCatalogVersion(touching: soldOut) }
        let body = BodyEncoder.checkout(order)
        try remember(session: session, key: d.idempotencyKey, fingerprint: print, field: .checkout, body: body, tx)
        return (.ok(.checkout, body), !soldOut.isEmpty)
    }

    // MARK: Operators

    private func setProduct(_ u: ProductUpdate, caller: Caller, _ tx: any CommerceTransaction) throws -> (outcome: CommerceOutcome, catalogChanged: Bool) {
        guard isOperator(caller) else {
            throw Refusal(.permissionDenied, "Only groserd's own user, root or an admin group member may change the catalog.")
        }
        guard u.priceMinorUnits != nil || u.stock != nil else {
            throw Refusal(.invalidArgument, "SetProduct needs a new price, a new stock, or both.")
        }
        if let price = u.priceMinorUnits, price < 0 {
            throw Refusal(.invalidArgument, "A price cannot be negative.")
        }
        guard try tx.product(u.productUID) != nil else {
            throw Refusal(.notFound, "No product has the uid \"\(clip(u.productUID))\".")
        }
        try tx.updateProduct(u)
        let version = try tx.bumpCatalogVersion(touching: [u.productUID])
        guard let (product, stock) = try tx.catalogProduct(u.productUID) else {
            throw Refusal(.internal, "The product vanished while it was being changed.")
        }
        var served = product
        served.imageURL = ImageURL.absolute(product.imageURL, base: imageBaseURL)
        let body = BodyEncoder.setProduct(ProductUpdateResult(product: served, stock: stock, catalogVersion: version))
        return (.ok(.setProduct, body), true)
    }

    // MARK: Shared checks

    /// Root, groserd's own user and members of the admin group may change
    /// the catalog (SetProduct, imports).
    public func isOperator(_ caller: Caller) -> Bool {
        guard let uid = caller.uid else { return false }
        return uid == 0 || adminUIDs.contains(uid) || adminGroup.map({ isMember(uid, caller.gid ?? UInt32.max, $0) }) == true
    }

    /// The session's storage key, when the token names a session.
    @discardableResult
    private func checkSession(_ session: String, _ tx: any CommerceTransaction) throws -> SessionKey {
        guard !session.isEmpty else {
            throw Refusal(.unauthenticated, "The request carries no session; open one with OpenSession.")
        }
        let key = SessionKey(token: session)
        guard try tx.sessionExists(key) else {
            throw Refusal(.unauthenticated, "The session is unknown; open one with OpenSession.")
        }
        return key
    }

    private func checkStore(_ storeUID: String, _ tx: any CommerceTransaction) throws {
        guard !storeUID.isEmpty else { throw Refusal(.invalidArgument, "The request names no store.") }
        guard try tx.storeCityCode(storeUID) != nil else {
            throw Refusal(.notFound, "No store has the uid \"\(clip(storeUID))\".")
        }
    }

    /// The stored answer of an earlier request with this key, or nil.
    private func replay(session: SessionKey, key: String, fingerprint: String, _ tx: any CommerceTransaction) throws -> CommerceOutcome? {
        guard !key.isEmpty, let answer = try tx.idempotentAnswer(session: session, key: key) else { return nil }
        guard answer.fingerprint == fingerprint, let field = MethodField(rawValue: answer.field) else {
            throw Refusal(.failedPrecondition, "The idempotency key \"\(clip(key))\" was already used for a different request.")
        }
        return .ok(field, answer.body)
    }

    private func remember(session: SessionKey, key: String, fingerprint: String, field: MethodField, body: [UInt8],
                          _ tx: any CommerceTransaction) throws {
        guard !key.isEmpty else { return }
        try tx.saveIdempotentAnswer(session: session, key: key,
                                    IdempotentAnswer(fingerprint: fingerprint, field: field.rawValue, body: body))
    }

    private func emptyCart(_ storeUID: String) -> Cart {
        Cart(storeUID: storeUID, lines: [], subtotal: Money(minorUnits: 0, currency: defaultCurrency),
             itemCount: 0, currency: defaultCurrency, version: 0)
    }

    /// The cart as the customer sees it: current prices, changed lines
    /// marked, totals in checked arithmetic.
    private func build(_ record: CartRecord, storeUID: String, _ tx: any CommerceTransaction) throws -> Cart {
        var lines: [CartLine] = []
        var subtotal: Int64 = 0
        var items: UInt32 = 0
        var currency: String?
        for r in record.lines {
            guard let p = try tx.product(r.productUID) else { continue }
            if currency == nil { currency = p.price.currency }
            guard currency == p.price.currency else {
                throw Refusal(.failedPrecondition, "The cart mixes currencies (\(currency ?? "") and \(p.price.currency)).")
            }
            let (total, overflow) = p.price.minorUnits.multipliedReportingOverflow(by: Int64(r.quantity))
            let (sum, overflow2) = subtotal.addingReportingOverflow(total)
            guard !overflow, !overflow2 else {
                throw Refusal(.failedPrecondition, "The cart's total is too large to compute.")
            }
            subtotal = sum
            let (count, overflow3) = items.addingReportingOverflow(r.quantity)
            guard !overflow3 else {
                throw Refusal(.failedPrecondition, "The cart would hold more than \(UInt32.max) items, more than a cart can count.")
            }
            items = count
            let changed = r.seenPriceMinorUnits != p.price.minorUnits
            lines.append(CartLine(
                productUID: p.uid, name: p.name, unitPrice: p.price, quantity: r.quantity,
                lineTotal: Money(minorUnits: total, currency: p.price.currency), priceChanged: changed,
                previousPrice: changed ? Money(minorUnits: r.seenPriceMinorUnits, currency: p.price.currency) : nil,
                outOfStock: p.stock == 0))
        }
        let c = currency ?? defaultCurrency
        return Cart(storeUID: storeUID, lines: lines, subtotal: Money(minorUnits: subtotal, currency: c),
                    itemCount: items, currency: c, version: record.version)
    }

    private func formatMoney(_ m: Money?) -> String {
        guard let m else { return "?" }
        let sign = m.minorUnits < 0 ? "-" : ""
        let v = m.minorUnits.magnitude
        let cents = v % 100
        return "\(sign)\(v / 100).\(cents < 10 ? "0" : "")\(cents) \(m.currency)"
    }

    private func clip(_ s: String) -> String { s.count <= 64 ? s : String(s.prefix(64)) + "…" }
}

extension String {
    var trimmingCharacters: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
