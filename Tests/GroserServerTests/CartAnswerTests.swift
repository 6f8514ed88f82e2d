@testable import GroserServer
import GroserStorage
import GroserWire
import Testing

/// A cart mutation's answer is written straight from the stored lines and
/// their products (`CartRules.shown`, `ShownCart.body`), not from the
/// `Cart` that `view` builds: both must give the customer the same bytes,
/// and refuse the same carts. (`BodyEncoder.cart` of a `Cart` is checked
/// against protobuf-c in CartBodyWriterTests.)
@Suite("cart answers")
struct CartAnswerTests {
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func pick<T>(_ values: [T]) -> T { values[Int(next() % UInt64(values.count))] }
    }

    static let names = ["Молоко «Домик в деревне» 3,2% — 🥛", "Bread", "牛奶 北海道 1L", String(repeating: "x", count: 200)]
    static let prices: [Int64] = [0, 1, 127, 128, 8990, 1 << 40, Int64.max]
    static let quantities: [UInt32] = [1, 2, 127, 128, 99, UInt32.max / 2]

    @Test func theAnswerWrittenFromTheStoredLinesIsTheViewsBytes() {
        let rules = CartRules()
        var refusedAlike = 0, answered = 0
        for seed in UInt64(0)..<3000 {
            var g = Generator(state: seed)
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
            let viewed: Result<Cart, Refusal> = Result { () throws(Refusal) in try rules.view(cart, storeUID: "s1", lookup) }
            let shown: Result<ShownCart, Refusal> = Result { () throws(Refusal) in try rules.shown(cart, storeUID: "s1", lookup) }
            switch (viewed, shown) {
            case (.success(let v), .success(let s)):
                answered += 1
                #expect(s.body == BodyEncoder.cart(v), "seed \(seed): \(v)")
                if s.body != BodyEncoder.cart(v) { return }
                // A running shard sends the whole frame, written around the
                // body in one allocation: the frame okFrame makes of the body.
                let id: UInt64 = g.pick([0, 1, 127, 128, 1 << 35, UInt64.max])
                let field: MethodField = g.pick([.addItem, .setQuantity, .removeItem, .clearCart])
                #expect(s.frame(id: id, field: field) == ResponseFrameWriter.okFrame(id: id, field: field, body: s.body),
                        "seed \(seed), id \(id)")
            case (.failure(let a), .failure(let b)):
                refusedAlike += 1
                #expect(a.status == b.status, "seed \(seed)")
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
