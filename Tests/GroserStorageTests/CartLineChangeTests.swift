@testable import GroserStorage
import GroserSystem
import Testing

/// A cart change that touched one line is logged as that line
/// (`CartLineChange`, kind 10), not as the whole cart: `between` must find
/// it for every one-line change, and whatever it finds must turn the old
/// cart into exactly the new one, in the log and after recovery too.
@Suite("cart line changes")
struct CartLineChangeTests {
    static let products = (0..<12).map { "p\($0)" }

    static func randomCart(_ g: inout SplitMix64) -> StoredCart {
        var uids = products
        var lines: [CartLineRecord] = []
        for _ in 0..<Int(g.next() % 7) {
            let uid = uids.remove(at: Int(g.next() % UInt64(uids.count)))
            lines.append(CartLineRecord(productUID: uid, quantity: UInt32(1 + g.next() % 5), seenPriceMinorUnits: Int64(g.next() % 4)))
        }
        return StoredCart(version: g.next() % 100, lines: lines)
    }

    static func applied(_ old: StoredCart?, _ change: CartLineChange) -> StoredCart {
        var c = old ?? StoredCart()
        c.apply(change)
        return c
    }

    @Test func everyOneLineChangeIsFoundAndGivesTheNewCart() {
        var found = [0, 0, 0]
        for seed in UInt64(0)..<5000 {
            var g = SplitMix64(seed: seed)
            let old = Self.randomCart(&g)
            var new = old
            new.version = old.version + 1
            let kind = Int(g.next() % 3)
            switch kind {
            case 0:
                guard !old.lines.isEmpty else { continue }
                let i = Int(g.next() % UInt64(old.lines.count))
                // A new quantity or a new seen price (or both), in place.
                new.lines[i].quantity = UInt32(1 + g.next() % 9)
                new.lines[i].seenPriceMinorUnits = g.next() % 2 == 0 ? 99 : old.lines[i].seenPriceMinorUnits
                guard new.lines[i] != old.lines[i] else { continue }
            case 1:
                guard let uid = Self.products.first(where: { p in !old.lines.contains { $0.productUID == p } }) else { continue }
                new.lines.append(CartLineRecord(productUID: uid, quantity: 2, seenPriceMinorUnits: 7))
            default:
                guard !old.lines.isEmpty else { continue }
                new.lines.remove(at: Int(g.next() % UInt64(old.lines.count)))
            }
            // A cart that did not exist yet counts as an empty one at version 0.
            let before: StoredCart? = old.lines.isEmpty && g.next() % 2 == 0 ? nil : old
            if before == nil { new.version = 1 }
            let change = CartLineChange.between(before, new)
            #expect(change != nil, "seed \(seed): \(old) -> \(new)")
            guard let change else { continue }
            #expect(Self.applied(before, change) == new, "seed \(seed)")
            #expect(change.version == new.version)
            found[kind] += 1
        }
        #expect(found.allSatisfy { $0 > 500 }, "each kind of change was tried: \(found)")
    }

    @Test func aChangeThatSkipsAVersionIsTheWholeCart() {
        let old = StoredCart(version: 4, lines: [CartLineRecord(productUID: "a", quantity: 1, seenPriceMinorUnits: 5)])
        var new = old
        new.lines[0].quantity = 2
        new.version = 6
        #expect(CartLineChange.between(old, new) == nil)
        new.version = 5
        #expect(CartLineChange.between(old, new) == CartLineChange(version: 5, productUID: "a", quantity: 2, seenPriceMinorUnits: 5))
        #expect(CartLineChange.between(nil, StoredCart(version: 2, lines: old.lines)) == nil, "a new cart starts at version 1")
    }

    @Test func anyOtherChangeIsTheWholeCartOrALineThatGivesItExactly() {
        var whole = 0
        for seed in UInt64(0)..<5000 {
            var g = SplitMix64(seed: seed)
            let old = Self.randomCart(&g)
            var new: StoredCart
            switch g.next() % 5 {
            case 0: new = old  // only the version moves
            case 1: new = Self.randomCart(&g)  // anything
            case 2: new = StoredCart(version: old.version, lines: old.lines.reversed())  // the order
            case 3: new = StoredCart(version: old.version, lines: [])  // cleared
            default:  // two lines changed
                new = old
                for i in new.lines.indices.prefix(2) { new.lines[i].quantity += 1 }
            }
            new.version = old.version + 1
            if let change = CartLineChange.between(old, new) {
                #expect(Self.applied(old, change) == new, "seed \(seed): \(old) -> \(new) by \(change)")
            } else {
                whole += 1
            }
        }
        #expect(whole > 1000, "most of these are logged whole: \(whole)")
    }

    /// A log cut by `--repair` in its middle loses a record: the line
    /// changes after it do not follow their cart's version, and are skipped
    /// (the cart stays as it last really was) until a whole cart comes.
    @Test func aLineChangeThatDoesNotFollowItsCartsVersionIsSkipped() {
        let key = SessionKey(token: "t")
        var state = CustomerState()
        let one = StoredCart(version: 1, lines: [CartLineRecord(productUID: "a", quantity: 1, seenPriceMinorUnits: 5)])
        state.apply(.cart(key, storeUID: "s", one, atUnix: 1))
        // Version 2 was lost: 3 and 4 are skipped, not applied to version 1.
        state.apply(.cartLine(key, storeUID: "s", CartLineChange(version: 3, productUID: "b", quantity: 1, seenPriceMinorUnits: 7), atUnix: 3))
        state.apply(.cartLine(key, storeUID: "s", CartLineChange(version: 4, productUID: "a", quantity: 0, seenPriceMinorUnits: 0), atUnix: 4))
        #expect(state.sessions[key]?.carts["s"] == one)
        #expect(state.skippedLineChanges == 2)
        // A line change of a cart that does not exist must be its first version.
        state.apply(.cartLine(key, storeUID: "other", CartLineChange(version: 2, productUID: "a", quantity: 1, seenPriceMinorUnits: 5), atUnix: 5))
        #expect(state.sessions[key]?.carts["other"] == nil)
        // A whole cart puts it right; line changes follow it again.
        let five = StoredCart(version: 5, lines: [CartLineRecord(productUID: "b", quantity: 2, seenPriceMinorUnits: 7)])
        state.apply(.cart(key, storeUID: "s", five, atUnix: 6))
        state.apply(.cartLine(key, storeUID: "s", CartLineChange(version: 6, productUID: "b", quantity: 3, seenPriceMinorUnits: 7), atUnix: 7))
        #expect(state.sessions[key]?.carts["s"]?.lines.map(\.quantity) == [3])
        #expect(state.skippedLineChanges == 3)
    }

    /// A shard's way of logging (a line when `between` finds one, else the
    /// whole cart), through a real log whose segments rotate and are
    /// compacted midway: recovery gives the carts the shard held.
    @Test func aLogOfLineChangesRecoversTheCartsThroughCompaction() throws {
        let dir = try TemporaryDirectory()
        let log = CustomerLog(directory: dir.path, segmentBytes: 2048)
        var scratch = CustomerState()
        _ = try log.recover(into: &scratch)
        var live = CustomerState()
        var g = SplitMix64(seed: 42)
        var lines = 0
        let keys = (0..<6).map { SessionKey(token: "session-\($0)") }
        for step in 0..<3000 {
            let key = keys[Int(g.next() % 6)], store = g.next() % 3 == 0 ? "s2" : "s1"
            let old = live.sessions[key]?.carts[store]
            var new = old ?? StoredCart()
            new.version += 1
            let uid = Self.products[Int(g.next() % UInt64(Self.products.count))]
            let at = new.lines.firstIndex { $0.productUID == uid }
            switch (g.next() % 10, at) {
            case (0, _): new.lines = []  // cleared (a checkout)
            case (1...3, let i?): new.lines.remove(at: i)
            case (_, let i?): new.lines[i].quantity += 1
            case (_, nil): new.lines.append(CartLineRecord(productUID: uid, quantity: 1, seenPriceMinorUnits: Int64(step)))
            }
            let record: CustomerRecord
            if let change = CartLineChange.between(old, new) {
                record = .cartLine(key, storeUID: store, change, atUnix: Int64(step))
                lines += 1
            } else {
                record = .cart(key, storeUID: store, new, atUnix: Int64(step))
            }
            try log.append([record])
            live.apply(record)
            #expect(live.sessions[key]?.carts[store] == new, "step \(step)")
            if try log.checkpointDue(), step % 7 == 0 { _ = try log.compact { _ in } }
        }
        #expect(lines > 2000, "most changes are logged as a line: \(lines)")
        var recovered = CustomerState()
        _ = try CustomerLog(directory: dir.path).recover(into: &recovered)
        #expect(recovered.sessions == live.sessions)
        _ = try log.compact { _ in }
        var fromSnapshot = CustomerState()
        _ = try CustomerLog(directory: dir.path).recover(into: &fromSnapshot)
        #expect(fromSnapshot.sessions.mapValues(\.carts) == live.sessions.mapValues(\.carts))
    }
}
