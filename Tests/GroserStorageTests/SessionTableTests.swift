@testable import GroserStorage
import GroserSystem
import Testing

/// The packed containers of a shard's sessions (`SessionTable`, and each
/// session's `StoreCarts` and rare facts) must behave exactly as the
/// dictionaries they replaced: random sequences of every change they take,
/// checked after each step against a dictionary doing the same.
@Suite("session table")
struct SessionTableTests {
    /// Few distinct keys, so that adds, replacements and removals of one key
    /// all happen, and runs in the index collide and shift back.
    static func key(_ n: UInt64) -> SessionKey { SessionKey(token: "t\(n)") }

    static func state(_ g: inout SplitMix64) -> SessionState {
        var s = SessionState(createdAtUnix: Int64(g.next() % 1000))
        if g.next() % 2 == 0 { s.carts["s\(g.next() % 3)"] = StoredCart(version: g.next() % 9) }
        if g.next() % 4 == 0 { s.answers["k"] = StoredAnswer(IdempotentAnswer(fingerprint: "f", field: 1, body: [1]), atUnix: 5) }
        return s
    }

    @Test func randomChangesMatchADictionary() {
        var g = SplitMix64(seed: 34)
        for round in 0..<20 {
            var table = SessionTable()
            var model: [SessionKey: SessionState] = [:]
            let keys = (0..<UInt64(8 + round * 40)).map(Self.key)
            for step in 0..<3000 {
                let k = keys[Int(g.next() % UInt64(keys.count))]
                switch g.next() % 7 {
                case 0:
                    let s = Self.state(&g)
                    #expect(table.updateValue(s, forKey: k) == model.updateValue(s, forKey: k))
                case 1:
                    #expect(table.removeValue(forKey: k) == model.removeValue(forKey: k))
                case 2:
                    let s: SessionState? = g.next() % 2 == 0 ? nil : Self.state(&g)
                    table[k] = s
                    model[k] = s
                case 3:
                    table[k]?.lastActiveUnix = Int64(step)
                    model[k]?.lastActiveUnix = Int64(step)
                case 4:
                    table[k, default: SessionState(createdAtUnix: 7)].carts["s1", default: StoredCart()].version += 1
                    model[k, default: SessionState(createdAtUnix: 7)].carts["s1", default: StoredCart()].version += 1
                case 5:
                    if let i = table.position(of: k) {
                        #expect(table.key(at: i) == k)
                        table[at: i].answers["k"] = nil
                        model[k]?.answers["k"] = nil
                    } else {
                        #expect(model[k] == nil)
                    }
                default:
                    table.removeAll { key, s in key == k && s.carts.isEmpty }
                    if model[k]?.carts.isEmpty == true { model[k] = nil }
                }
                #expect(table.count == model.count)
                #expect(table[k] == model[k], "round \(round) step \(step)")
            }
            #expect(table.mapValues { $0 } == model)
            #expect(Dictionary(uniqueKeysWithValues: table.map { ($0.key, $0.value) }) == model)
            for k in keys { #expect(table[k] == model[k]) }
        }
    }

    @Test func storeCartsMatchADictionary() {
        var g = SplitMix64(seed: 35)
        var carts = StoreCarts()
        var model: [String: StoredCart] = [:]
        for step in 0..<5000 {
            let store = "s\(g.next() % 5)"
            switch g.next() % 4 {
            case 0:
                let c = StoredCart(version: UInt64(step))
                #expect(carts.updateValue(c, forKey: store) == model.updateValue(c, forKey: store))
            case 1:
                #expect(carts.removeValue(forKey: store) == model.removeValue(forKey: store))
            case 2:
                carts[store, default: StoredCart()].lines.append(CartLineRecord(productUID: "p", quantity: 1, seenPriceMinorUnits: 1))
                model[store, default: StoredCart()].lines.append(CartLineRecord(productUID: "p", quantity: 1, seenPriceMinorUnits: 1))
            default:
                if let i = carts.index(forKey: store) { carts[at: i].version += 2 }
                model[store]?.version += 2
            }
            #expect(carts.count == model.count && carts.isEmpty == model.isEmpty)
            #expect(carts.dictionary == model, "step \(step)")
            #expect(carts == StoreCarts(model.map { (key: $0.key, value: $0.value) }), "equality ignores order")
        }
    }

    @Test func aCopyOfASessionSharesItsRareFactsUntilOneChanges() {
        var a = SessionState(createdAtUnix: 1)
        a.answers["x"] = StoredAnswer(IdempotentAnswer(fingerprint: "f", field: 1, body: []), atUnix: 1)
        var b = a
        b.answers["y"] = StoredAnswer(IdempotentAnswer(fingerprint: "g", field: 2, body: []), atUnix: 2)
        b.owner = Self.key(1)
        #expect(a.answers.keys.sorted() == ["x"] && a.owner == nil)
        #expect(b.answers.keys.sorted() == ["x", "y"] && b.owner == Self.key(1))
        #expect(a != b)
        b.answers["y"] = nil
        b.owner = nil
        #expect(a == b, "a session whose rare facts are back to what they were equals the original")
    }
}
