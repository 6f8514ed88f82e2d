@testable import GroserServer
import GroserStorage
import GroserWire
import GroserSystem
import Testing

/// A cart mutation's answer is written straight from the stored lines and
/// their products (`CartRules.shown`, `ShownCart.body`; and from the lines'
/// product slots, `CartRules.showEncoded` and `EncodedCartWriter`), not from a `Cart`:
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
            // and its answer is written from them (`showEncoded`).
            var slotted = cart
            for i in slotted.lines.indices { slotted.lines[i].slot = catalog[slotted.lines[i].productUID].map { ProductSlot($0) } }
            var encoded: [EncodedCartLine] = []
            let encodedTotals = Result { () throws(Refusal) in try rules.showEncoded(slotted, into: &encoded) }
            switch (viewed, shown) {
            case (.success(let v), .success(let s)):
                answered += 1
                guard case .success(let totals) = encodedTotals else {
                    Issue.record("seed \(seed): showEncoded refused \(encodedTotals)")
                    return
                }
                #expect(totals.shown == v.lines.count && totals.subtotal == v.subtotal && totals.itemCount == v.itemCount)
                let encodedBody = encoded.withUnsafeBufferPointer { lines in
                    BodyEncoder.cart(storeUID: "s1", lines: lines, subtotalMinorUnits: totals.subtotal.minorUnits,
                                     itemCount: totals.itemCount, currency: totals.subtotal.currency, version: cart.version)
                }
                #expect(encodedBody == BodyEncoder.cart(v), "seed \(seed): the encoded lines' body, \(v)")
                let frameID: UInt64 = g.pick([1, 128, UInt64.max])
                var frames: [UInt8] = [7]
                encoded.withUnsafeBufferPointer { lines in
                    BodyEncoder.appendCartFrame(to: &frames, id: frameID, field: .addItem, storeUID: "s1", lines: lines,
                                                subtotalMinorUnits: totals.subtotal.minorUnits, itemCount: totals.itemCount,
                                                currency: totals.subtotal.currency, version: cart.version)
                }
                #expect(frames == [7] + ResponseFrameWriter.okFrame(id: frameID, field: .addItem, body: BodyEncoder.cart(v)),
                        "seed \(seed): the frame appended after what the buffer held")
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
                guard case .failure(let c) = encodedTotals else {
                    Issue.record("seed \(seed): showEncoded answered a cart the view refuses")
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
}
