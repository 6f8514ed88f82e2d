@testable import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// The cart rules as a model: a cart is a dictionary of product → quantity
/// under CartLimits, and every refusal is written out plainly with the
/// status and the words the rules give it. The property tests run random
/// sequences of cart changes against both the rules and this model.
struct CartModel {
    struct Product {
        var storeUID: String
        var priceMinorUnits: Int64
        var stock: UInt32
    }

    enum Step: CustomStringConvertible {
        case add(String, UInt32), set(String, UInt32), remove(String), clear
        var description: String {
            switch self {
            case .add(let uid, let q): "add \(uid) ×\(q)"
            case .set(let uid, let q): "set \(uid) to \(q)"
            case .remove(let uid): "remove \(uid)"
            case .clear: "clear"
            }
        }
    }

    /// Why a step is refused: its status, and words its message holds.
    enum Refusal: CaseIterable {
        case quantityOutOfRange, lineOverLimit, tooManyLines, unknownProduct, otherStore, outOfStock, emptyUID, notInCart
        var code: StatusCode {
            switch self {
            case .quantityOutOfRange, .unknownProduct, .otherStore, .emptyUID: .invalidArgument
            case .lineOverLimit, .tooManyLines, .outOfStock: .failedPrecondition
            case .notInCart: .notFound
            }
        }
        func words(_ limits: CartLimits) -> String {
            switch self {
            case .quantityOutOfRange: "The quantity must be"
            case .lineOverLimit: "a line holds at most \(limits.maximumQuantity)"
            case .tooManyLines: "the most it may hold"
            case .unknownProduct: "No product has the uid"
            case .otherStore: "not by this cart's store"
            case .outOfStock: "is out of stock"
            case .emptyUID: "The product uid is empty"
            case .notInCart: "is not in the cart"
            }
        }
    }

    let limits: CartLimits
    let storeUID: String
    var products: [String: Product]
    var quantities: [String: UInt32] = [:]

    /// Applies `step`: nil when it is accepted (the model changed), else
    /// why it is refused (the model is as it was).
    mutating func apply(_ step: Step) -> Refusal? {
        switch step {
        case .add(let uid, let q):
            guard q >= 1 && q <= limits.maximumQuantity else { return .quantityOutOfRange }
            if let refusal = orderable(uid) { return refusal }
            if let held = quantities[uid] {
                guard held + q <= limits.maximumQuantity else { return .lineOverLimit }
                quantities[uid] = held + q
            } else {
                guard quantities.count < limits.maximumLines else { return .tooManyLines }
                quantities[uid] = q
            }
        case .set(let uid, let q):
            guard !uid.isEmpty else { return .emptyUID }
            guard q <= limits.maximumQuantity else { return .quantityOutOfRange }
            if q == 0 {
                quantities[uid] = nil
            } else if let held = quantities[uid] {
                // Lowering is always allowed; raising needs the product in stock.
                if q > held, let refusal = orderable(uid) { return refusal }
                quantities[uid] = q
            } else {
                if let refusal = orderable(uid) { return refusal }
                guard quantities.count < limits.maximumLines else { return .tooManyLines }
                quantities[uid] = q
            }
        case .remove(let uid):
            guard !uid.isEmpty else { return .emptyUID }
            guard quantities.removeValue(forKey: uid) != nil else { return .notInCart }
        case .clear:
            quantities = [:]
        }
        return nil
    }

    private func orderable(_ uid: String) -> Refusal? {
        guard !uid.isEmpty else { return .emptyUID }
        guard let p = products[uid] else { return .unknownProduct }
        guard p.storeUID == storeUID else { return .otherStore }
        return p.stock == 0 ? .outOfStock : nil
    }

    /// The product a rule's lookup finds.
    func record(_ uid: String) -> ProductRecord? {
        products[uid].map { ProductRecord(uid: uid, storeUID: $0.storeUID, name: "Product \(uid)",
                                          price: Money(minorUnits: $0.priceMinorUnits, currency: "RUB"), stock: $0.stock) }
    }

    /// A random step over `uids` (the cart's store's products first), with
    /// now and then an unknown uid, another store's product or an empty uid,
    /// and quantities that sometimes break the limits.
    static func randomStep(_ g: inout SplitMix64, storeProducts uids: [String], otherStore: [String]) -> Step {
        let uid: String
        switch g.next() % 100 {
        case 0..<90: uid = uids[Int(g.next() % UInt64(uids.count))]
        case 90..<94: uid = "ghost-\(g.next() % 8)"
        case 94..<97: uid = otherStore[Int(g.next() % UInt64(otherStore.count))]
        default: uid = ""
        }
        switch g.next() % 1000 {
        case 0..<700:
            return .add(uid, g.next() % 20 == 0 ? UInt32(g.next() % 130) : UInt32(1 + g.next() % 30))
        case 700..<900:
            return .set(uid, g.next() % 10 == 0 ? 0 : UInt32(g.next() % 110))
        case 900..<999:
            return .remove(uid)
        default:
            return .clear
        }
    }
}

extension CartModel.Refusal {
    /// Whether `status` is this refusal.
    func matches(_ status: Status, _ limits: CartLimits) -> Bool {
        status.code == code && status.message.contains(words(limits))
    }
}

/// Random sequences of adds, set-quantities, removes and clears against the
/// model: the cart equals the model after every step, and every refusal is
/// the model's. The sequences are seeded, so a failure repeats.
@Suite("cart rules against a model")
struct CartPropertyTests {
    /// The pure rules: CartRules with the default limits, on products made
    /// up for the test (enough for a cart to reach its most lines), some of
    /// them going out of stock and back as the sequence runs.
    @Test(arguments: [UInt64(1), 2, 3])
    func theRulesAgreeWithTheModel(seed: UInt64) throws {
        let rules = CartRules()
        let limits = rules.limits
        #expect(limits.maximumQuantity == 99 && limits.maximumLines == 200)
        var products: [String: CartModel.Product] = [:]
        let uids = (0..<400).map { "p\($0)" }
        for (i, uid) in uids.enumerated() {
            products[uid] = .init(storeUID: "S1", priceMinorUnits: Int64(50 + i * 37 % 900), stock: i % 17 == 0 ? 0 : 5)
        }
        let otherStore = (0..<4).map { "q\($0)" }
        for uid in otherStore { products[uid] = .init(storeUID: "S2", priceMinorUnits: 100, stock: 5) }
        var model = CartModel(limits: limits, storeUID: "S1", products: products)
        var cart = StoredCart()
        var g = SplitMix64(seed: seed)
        var refused: [CartModel.Refusal: Int] = [:]
        var accepted = 0, mostLines = 0
        for step in 0..<3000 {
            if g.next() % 100 == 0 {
                // A product sells out, or comes back.
                let uid = uids[Int(g.next() % UInt64(uids.count))]
                model.products[uid]!.stock = model.products[uid]!.stock == 0 ? 5 : 0
            }
            let change = CartModel.randomStep(&g, storeProducts: uids, otherStore: otherStore)
            let lookup: CartRules.Lookup = { model.record($0) }
            let result: Result<StoredCart, Refusal>
            do {
                result = .success(try {
                    switch change {
                    case .add(let uid, let q): try rules.add(cart, product: uid, quantity: q, storeUID: "S1", lookup)
                    case .set(let uid, let q): try rules.setQuantity(cart, product: uid, quantity: q, storeUID: "S1", lookup)
                    case .remove(let uid): try rules.remove(cart, product: uid)
                    case .clear: rules.clear(cart)
                    }
                }())
            } catch let refusal as Refusal {
                result = .failure(refusal)
            }
            let expected = model.apply(change)
            switch (result, expected) {
            case (.success(let next), nil):
                cart = next
                accepted += 1
            case (.failure(let refusal), let reason?):
                #expect(reason.matches(refusal.status, limits), "step \(step), \(change): refused \(refusal.status), the model says \(reason)")
                refused[reason, default: 0] += 1
            case (.success, let reason?):
                Issue.record("step \(step), \(change): accepted, the model refuses it (\(reason))")
            case (.failure(let refusal), nil):
                Issue.record("step \(step), \(change): refused \(refusal.status), the model accepts it")
            }
            try Self.expectCart(cart.lines.map { ($0.productUID, $0.quantity) }, model, "step \(step), \(change)")
            #expect(cart.lines.allSatisfy { $0.seenPriceMinorUnits == model.products[$0.productUID]?.priceMinorUnits },
                    "step \(step): a line's price is not its product's when it was added")
            mostLines = max(mostLines, cart.lines.count)
        }
        // The sequence reached every rule, the limits included.
        #expect(mostLines == limits.maximumLines)
        for reason in CartModel.Refusal.allCases { #expect(refused[reason, default: 0] > 0, "never refused: \(reason)") }
        #expect(accepted > 1000, "\(accepted) changes accepted")
    }

    /// The same through a shard (on a store in memory): each change is a
    /// request that goes through the session, version and idempotency
    /// checks, the product lookups and the records; the answer's cart equals
    /// the model and its version counts the accepted changes. At the end
    /// the records, replayed, rebuild the model's cart.
    @Test func aShardAgreesWithTheModel() throws {
        let directory = try ScratchDirectory()
        let log = FlakyCustomerStore()
        // Twelve lines at most, so that a few hundred requests fill the cart.
        let limits = CartLimits(maximumQuantity: 99, maximumLines: 12)
        let (customers, storeUID, inStock) = try oneShardShop(directory, log, rules: CartRules(limits: limits))
        let shelved = { (store: Store) in store.departments.flatMap(\.shelves).flatMap(\.products) }
        let here = shelved(try #require(sample.stores.first { $0.uid == storeUID }))
        let other = try #require(sample.stores.first { $0.uid != storeUID })
        let soldOut = here.filter(\.outOfStock).prefix(2)
        let uids = Array(inStock.prefix(16)) + soldOut.map(\.uid)
        let elsewhere = shelved(other).prefix(2).map(\.uid)
        try #require(uids.count == 18 && elsewhere.count == 2)
        var products: [String: CartModel.Product] = [:]
        for p in here where uids.contains(p.uid) {
            products[p.uid] = .init(storeUID: storeUID, priceMinorUnits: p.price.minorUnits, stock: p.outOfStock ? 0 : 1)
        }
        for p in shelved(other) where elsewhere.contains(p.uid) {
            products[p.uid] = .init(storeUID: other.uid, priceMinorUnits: p.price.minorUnits, stock: p.outOfStock ? 0 : 1)
        }
        var model = CartModel(limits: limits, storeUID: storeUID, products: products)
        var version: UInt64 = 0

        guard case .ok(_, let opened) = customers.answerNow(Request(id: 1, method: .openSession)),
              case .openSession(let token) = try decode(.openSession, opened) else { throw SetupError("no session") }
        var g = SplitMix64(seed: 34)
        var refused: [CartModel.Refusal: Int] = [:]
        var stale = 0, replayed = 0
        var lastKeyed: (Request, CommerceOutcome)?
        for step in 0..<800 {
            if let (request, outcome) = lastKeyed, g.next() % 20 == 0 {
                // A retry with the same idempotency key gets the same answer, and changes nothing.
                #expect(customers.answerNow(request) == outcome, "step \(step): the retry's answer")
                replayed += 1
                continue
            }
            let change = CartModel.randomStep(&g, storeProducts: uids, otherStore: elsewhere)
            let key = g.next() % 10 == 0 ? "k\(step)" : ""
            let wrongVersion = g.next() % 25 == 0
            let m = CartMutation(session: token, storeUID: storeUID, idempotencyKey: key,
                                 expectedVersion: wrongVersion ? version + 1 + g.next() % 3 : (g.next() % 4 == 0 ? version : 0))
            let (field, method): (MethodField, RequestMethod) = switch change {
            case .add(let uid, let q): (.addItem, .addItem(m, productUID: uid, quantity: q))
            case .set(let uid, let q): (.setQuantity, .setQuantity(m, productUID: uid, quantity: q))
            case .remove(let uid): (.removeItem, .removeItem(m, productUID: uid))
            case .clear: (.clearCart, .clearCart(m))
            }
            let request = Request(id: UInt64(step + 1), method: method)
            let outcome = customers.answerNow(request)
            if wrongVersion {
                // The version is checked before the rule: nothing changes.
                guard case .failed(let status) = outcome else { Issue.record("step \(step), \(change): a stale version was accepted"); continue }
                #expect(status.code == .aborted, "step \(step): \(status)")
                stale += 1
                continue
            }
            let expected = model.apply(change)
            switch (outcome, expected) {
            case (.ok(let answered, let body), nil):
                version += 1
                #expect(answered == field)
                guard case .cart(let cart) = try decode(field, body) else { Issue.record("step \(step): no cart in the answer"); continue }
                #expect(cart.version == version, "step \(step), \(change)")
                try Self.expectCart(cart.lines.map { ($0.productUID, $0.quantity) }, model, "step \(step), \(change)")
                if !key.isEmpty { lastKeyed = (request, outcome) }
            case (.failed(let status), let reason?):
                #expect(reason.matches(status, limits), "step \(step), \(change): refused \(status), the model says \(reason)")
                refused[reason, default: 0] += 1
            case (.ok, let reason?):
                Issue.record("step \(step), \(change): accepted, the model refuses it (\(reason))")
            case (.failed(let status), nil):
                Issue.record("step \(step), \(change): refused \(status), the model accepts it")
            }
        }
        for reason in CartModel.Refusal.allCases { #expect(refused[reason, default: 0] > 0, "never refused: \(reason)") }
        #expect(stale > 20 && replayed > 20, "\(stale) stale versions, \(replayed) retries")

        // What the shard recorded rebuilds the same cart.
        var replayedState = CustomerState()
        for r in log.records { replayedState.apply(r) }
        let rebuilt = replayedState.sessions[SessionKey(token: token)]?.carts[storeUID] ?? StoredCart()
        #expect(rebuilt.version == version)
        try Self.expectCart(rebuilt.lines.map { ($0.productUID, $0.quantity) }, model, "replayed")
    }

    /// Checks a cart's lines hold the model's quantities, each product once.
    static func expectCart(_ lines: [(String, UInt32)], _ model: CartModel, _ when: String,
                           sourceLocation: SourceLocation = #_sourceLocation) throws {
        let held = Dictionary(lines, uniquingKeysWith: { a, _ in a })
        #expect(held.count == lines.count, "\(when): a product on two lines", sourceLocation: sourceLocation)
        #expect(held == model.quantities, "\(when): the cart is not the model's", sourceLocation: sourceLocation)
    }
}
