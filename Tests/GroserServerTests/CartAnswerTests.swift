@testable import GroserServer
import GroserStorage
import GroserWire
import GroserSystem
import Testing

/// A cart mutation's answer is written straight from the stored lines and
/// their products (`CartRules.shown`, `ShownCart.body`; and from the lines'
/// product slots, `SlottedCartAnswer`), not from a `Cart`:
/// it must be the bytes of the cart a reference computation here shows
/// (which `view` must equal too), and refuse the same carts.
/// (`BodyEncoder.cart` of a `Cart` is checked against protobuf-c in
/// CartBodyWriterTests.)
@Suite("cart answers")
struct CartAnswerTests {

    static let names = ["Молоко «Домик в деревне» 3,2% — 🥛", "Bread", "牛奶 北海道 1L", String(repeating: "x", count: 200)]
    static let prices: [Int64] = [0, 1, 127, 128, 8990, 1 << 40, Int64.max]
    static let quantities: [UInt32] = [1, 2, 127, 128, 99, UInt32.max / 2]

    /// What a cart shows, computed here without CartRules (the rules as
    /// issue 10 states them): current prices, a line marked when its price
    /// changed since it was seen, lines of products no longer sold left
    /// out, totals in checked arithmetic, one currency.
    static func referenceView(_ cart: StoredCart, _ lookup: CartRules.Lookup) throws(Refusal) -> Cart {
        var lines: [CartLine] = []
        var subtotal: Int64 = 0
        var items: UInt32 = 0
        var currency: String?
        for r in cart.lines {
            guard let p = lookup(r.productUID) else { continue }
            if let c = currency, c != p.price.currency { throw Refusal(.failedPrecondition, "mixed currencies") }
            currency = p.price.currency
            let (total, o1) = p.price.minorUnits.multipliedReportingOverflow(by: Int64(r.quantity))
            let (sum, o2) = subtotal.addingReportingOverflow(total)
            let (count, o3) = items.addingReportingOverflow(r.quantity)
            if o1 || o2 || o3 { throw Refusal(.failedPrecondition, "too large") }
            subtotal = sum
            items = count
            let changed = r.seenPriceMinorUnits != p.price.minorUnits
            lines.append(CartLine(productUID: r.productUID, name: p.name, unitPrice: p.price, quantity: r.quantity,
                                  lineTotal: Money(minorUnits: total, currency: p.price.currency), priceChanged: changed,
                                  previousPrice: changed ? Money(minorUnits: r.seenPriceMinorUnits, currency: p.price.currency) : nil,
                                  outOfStock: p.stock == 0))
        }
        let c = currency ?? "RUB"
        return Cart(storeUID: "s1", lines: lines, subtotal: Money(minorUnits: subtotal, currency: c), itemCount: items,
                    currency: c, version: cart.version)
    }

    @Test func theAnswerWrittenFromTheStoredLinesIsTheViewsBytes() {
        let rules = CartRules()
        var refusedAlike = 0, answered = 0
        for seed in UInt64(0)..<3000 {
            var g = SplitMix64(seed: seed)
            // Products p0...p5; p5 is not sold (the lookup finds nothing).
            var catalog: [String: ProductRecord] = [:]
            for i in 0..<5 {
                let currency = g.next() % 40 == 0 ? "EUR" : "RUB"
                catalog["p\(i)"] = ProductRecord(uid: "p\(i)", storeUID: "s1", name: g.pick(Self.names),
                                                 price: Money(minorUnits: g.pick(Self.prices), currency: currency),
                                                 stock: g.pick([0, 1, 50]))
            }
            let lines = (0..<Int(g.next() % 5)).map { i in
                let uid = g.next() % 6 == 0 ? "p5" : "p\(i)"
                let seen = g.next() % 3 == 0 ? g.pick(Self.prices) : (catalog[uid]?.price.minorUnits ?? 0)
                return CartLineRecord(productUID: uid, quantity: g.pick(Self.quantities), seenPriceMinorUnits: seen)
            }
            let cart = StoredCart(version: g.pick([1, 2, 128, UInt64.max]), lines: lines)
            let lookup: CartRules.Lookup = { catalog[$0] }
            let viewed: Result<Cart, Refusal> = Result { () throws(Refusal) in try Self.referenceView(cart, lookup) }
            let shown: Result<ShownCart, Refusal> = Result { () throws(Refusal) in try rules.shown(cart, storeUID: "s1", lookup) }
            // A shard's lines hold their products' slots (none: not sold),
            // and its answer is written from them (`SlottedCartAnswer`).
            var slotted = cart
            for i in slotted.lines.indices { slotted.lines[i].slot = catalog[slotted.lines[i].productUID].map { ProductSlot($0) } }
            let encoded = Result { () throws(Refusal) in try SlottedCartAnswer(slotted, storeUID: "s1", defaultCurrency: rules.defaultCurrency) }
            switch (viewed, shown) {
            case (.success(let v), .success(let s)):
                answered += 1
                guard case .success(let answer) = encoded else {
                    Issue.record("seed \(seed): SlottedCartAnswer refused \(encoded)")
                    return
                }
                #expect(answer.shown == v.lines.count && answer.subtotal == v.subtotal.minorUnits && answer.currency == v.currency
                        && answer.itemCount == v.itemCount)
                #expect(answer.body(slotted) == BodyEncoder.cart(v), "seed \(seed): the slotted lines' body, \(v)")
                let frameID: UInt64 = g.pick([1, 128, UInt64.max])
                let size = answer.frameSize(id: frameID, field: .addItem)
                var frame = [UInt8](repeating: 7, count: size + 1)
                let written = frame.withUnsafeMutableBytes { answer.writeFrame(slotted, id: frameID, field: .addItem, into: $0.baseAddress! + 1) }
                #expect(written == size && frame == [7] + ResponseFrameWriter.okFrame(id: frameID, field: .addItem, body: BodyEncoder.cart(v)),
                        "seed \(seed): the frame written where it was placed")
                // The lines of products no longer sold are dropped before
                // the frame is written (a change stores the cart without them): the same bytes.
                var dropped = slotted
                dropped.lines.removeAll { $0.slot == nil }
                #expect(answer.body(dropped) == BodyEncoder.cart(v), "seed \(seed): written after the unsold lines went")
                #expect((try? rules.view(cart, storeUID: "s1", lookup)) == v, "seed \(seed): view")
                #expect(s.body == BodyEncoder.cart(v), "seed \(seed): \(v)")
                if s.body != BodyEncoder.cart(v) { return }
                // The lines a change stores: the shown ones, found without a
                // lookup of their own (the products no longer sold go).
                var kept = cart.lines
                CartRules.keepShown(&kept, s.lines)
                #expect(kept == cart.lines.filter { lookup($0.productUID) != nil }, "seed \(seed): kept lines")
                // A running shard sends the whole frame, written around the
                // body in one allocation: the frame okFrame makes of the body.
                let id: UInt64 = g.pick([0, 1, 127, 128, 1 << 35, UInt64.max])
                let field: MethodField = g.pick([.addItem, .setQuantity, .removeItem, .clearCart])
                #expect(s.frame(id: id, field: field) == ResponseFrameWriter.okFrame(id: id, field: field, body: s.body),
                        "seed \(seed), id \(id)")
            case (.failure(let a), .failure(let b)):
                refusedAlike += 1
                #expect(a.status.code == b.status.code, "seed \(seed): \(a.status) against \(b.status)")
                guard case .failure(let c) = encoded else {
                    Issue.record("seed \(seed): SlottedCartAnswer answered a cart the view refuses")
                    return
                }
                #expect(c.status.code == a.status.code, "seed \(seed): \(c.status) against \(a.status)")
            default:
                Issue.record("seed \(seed): view \(viewed), shown \(shown)")
                return
            }
        }
        // Both kinds were exercised: carts answered, and carts refused
        // (mixed currencies, totals too large).
        #expect(answered > 1000 && refusedAlike > 100, "answered \(answered), refused \(refusedAlike)")
    }

    /// A cart answered again and again through its `LineMemo` entry, with
    /// random changes between (a quantity, a line added or removed, a
    /// product's new price or stock as a new slot, a product no longer
    /// sold, the entry taken by another cart): every answer is the bytes of
    /// the cart's view, as written without the memo.
    @Test func answersThroughTheLineMemoAreTheViewsBytes() throws {
        var hits = 0
        for seed in UInt64(0)..<300 {
            var g = SplitMix64(seed: seed)
            var slots: [String: ProductSlot] = [:]
            var products: [String: ProductRecord] = [:]
            func setProduct(_ uid: String) {
                let p = ProductRecord(uid: uid, storeUID: "s1", name: g.pick(Self.names),
                                      price: Money(minorUnits: g.pick([1, 127, 128, 8990, 1 << 40]), currency: "RUB"),
                                      stock: g.pick([0, 1, 50]))
                products[uid] = p
                slots[uid] = ProductSlot(p)
            }
            for i in 0..<12 { setProduct("p\(i)") }
            var cart = StoredCart(version: 1, lines: (0..<Int(4 + g.next() % 8)).map { i in
                CartLineRecord(productUID: "p\(i)", quantity: UInt32(1 + g.next() % 200), seenPriceMinorUnits: products["p\(i)"]!.price.minorUnits)
            })
            let memo = LineMemo.Entry()
            for step in 0..<40 {
                switch g.next() % 8 {
                case 0, 1:
                    let i = Int(g.next() % UInt64(cart.lines.count))
                    cart.lines[i].quantity = UInt32(1 + g.next() % 200)
                case 2:
                    if let uid = (0..<12).map({ "p\($0)" }).first(where: { u in !cart.lines.contains { $0.productUID == u } }) {
                        cart.lines.append(CartLineRecord(productUID: uid, quantity: 1, seenPriceMinorUnits: products[uid]?.price.minorUnits ?? 0))
                    }
                case 3:
                    if cart.lines.count > 1 { cart.lines.remove(at: Int(g.next() % UInt64(cart.lines.count))) }
                case 4:
                    setProduct("p\(g.next() % 12)")
                case 5:
                    let uid = "p\(g.next() % 12)"
                    products[uid] = nil
                    slots[uid] = nil
                case 6:
                    // The price the customer saw moves (a shown price acknowledged, or an old one).
                    let i = Int(g.next() % UInt64(cart.lines.count))
                    cart.lines[i].seenPriceMinorUnits = g.pick([1, 127, 128, 8990, 1 << 40])
                default:
                    // Another cart's answer took the entry.
                    let other = ProductRecord(uid: "q", storeUID: "s2", name: "Other", price: Money(minorUnits: 5, currency: "RUB"), stock: 1)
                    let otherCart = StoredCart(version: 9, lines: [CartLineRecord(productUID: "q", quantity: 3, seenPriceMinorUnits: 5,
                                                                                  slot: ProductSlot(other))])
                    _ = try SlottedCartAnswer(otherCart, storeUID: "s2", defaultCurrency: "RUB", memo: memo).body(otherCart)
                }
                cart.version += 1
                for i in cart.lines.indices { cart.lines[i].slot = slots[cart.lines[i].productUID] }
                let view = try Self.referenceView(cart, { products[$0] })
                let plain = try SlottedCartAnswer(cart, storeUID: "s1", defaultCurrency: "RUB")
                let remembered = memo.lines.count
                let answer = try SlottedCartAnswer(cart, storeUID: "s1", defaultCurrency: "RUB", memo: memo)
                #expect(answer.bodySize == plain.bodySize, "seed \(seed) step \(step)")
                let body = answer.body(cart)
                #expect(body == BodyEncoder.cart(view) && body == plain.body(cart), "seed \(seed) step \(step): \(view)")
                #expect(memo.lines.count == view.lines.count && memo.bytes.count == (memo.lines.last?.end ?? 0),
                        "seed \(seed) step \(step): the entry holds the shown lines")
                if remembered > 0 && body.count > 0 { hits += 1 }
                // A change stores the shown lines only.
                cart.lines.removeAll { $0.slot == nil }
                if cart.lines.isEmpty { cart.lines.append(CartLineRecord(productUID: "p0", quantity: 1, seenPriceMinorUnits: 1)) }
            }
        }
        #expect(hits > 5000, "the memo was used: \(hits) answers")
    }

    /// A cart whose lines are more bytes than an entry keeps is answered
    /// without it, and leaves what the entry held alone.
    @Test func aCartTooLargeToRememberLeavesTheEntryAlone() throws {
        func cart(_ lines: Int, name: String) -> StoredCart {
            StoredCart(version: 3, lines: (0..<lines).map { i in
                let p = ProductRecord(uid: "p\(i)", storeUID: "s1", name: name, price: Money(minorUnits: 100, currency: "RUB"), stock: 5)
                return CartLineRecord(productUID: p.uid, quantity: 2, seenPriceMinorUnits: 100, slot: ProductSlot(p))
            })
        }
        let memo = LineMemo.Entry()
        let small = cart(5, name: "Bread")
        _ = try SlottedCartAnswer(small, storeUID: "s1", defaultCurrency: "RUB", memo: memo).body(small)
        let held = (memo.lines.count, memo.bytes)
        #expect(held.0 == 5)
        let large = cart(60, name: String(repeating: "x", count: 200))
        let body = try SlottedCartAnswer(large, storeUID: "s1", defaultCurrency: "RUB", memo: memo).body(large)
        #expect(body == (try SlottedCartAnswer(large, storeUID: "s1", defaultCurrency: "RUB").body(large)))
        #expect(body.count > LineMemo.entryBytes)
        #expect(memo.lines.count == held.0 && memo.bytes == held.1, "the small cart's lines are still remembered")
    }
}
