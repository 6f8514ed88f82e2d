@testable import GroserServer
import GroserWire
import Testing

/// The watcher's merge rule, without a socket: changes merge into one
/// pending frame, the latest state of each product wins, versions say what
/// was skipped, and too many products turn into reload.
@Suite("a watcher's pending changes")
struct WatcherTests {
    private func change(_ version: UInt64, _ products: [(String, Int64)], reload: Bool = false) -> StoreChangeRecord {
        StoreChangeRecord(storeUID: "s", version: version, catalogVersion: version, reload: reload,
                          shelfUIDs: products.isEmpty ? [] : ["shelf"],
                          products: products.map { ProductChange(uid: $0.0, shelfUID: "shelf", price: Money(minorUnits: $0.1, currency: "RUB"), outOfStock: false) })
    }

    private func frame(_ w: inout Watcher) throws -> WatchEvent {
        var out: [UInt8] = []
        w.emit(into: &out)
        let r = try Response.decode(out.dropFirst(Framing.headerSize))
        #expect(r.continues && r.id == 9)
        guard case .watch(let e) = r.body else { throw WireDecodingError("not a watch frame") }
        return e
    }

    @Test func oneChangeIsSentAsEncodedWithTheWatchersPreviousVersion() throws {
        var w = Watcher(id: 9, storeUID: "s", version: 4)
        let merged = w.take(change(6, [("a", 100)]))
        #expect(!merged)
        let e = try frame(&w)
        #expect(e.previousVersion == 4 && e.storeVersion == 6 && e.products.map(\.uid) == ["a"])
        #expect(!w.hasPending && w.sentVersion == 6)
    }

    @Test func changesMergeAndTheLatestPriceWins() throws {
        var w = Watcher(id: 9, storeUID: "s", version: 4)
        w.take(change(5, [("a", 100), ("b", 200)]))
        let merged = w.take(change(7, [("a", 150)]))
        #expect(merged)
        let old = w.take(change(7, [("c", 1)]))
        #expect(!old, "a version already held is ignored")
        let other = StoreChangeRecord(storeUID: "t", version: 8, catalogVersion: 8, reload: false, shelfUIDs: [], products: [])
        let elsewhere = w.take(other)
        #expect(!elsewhere, "another store's change is ignored")
        let e = try frame(&w)
        #expect(e.previousVersion == 4 && e.storeVersion == 7)
        #expect(e.products.map { "\($0.uid)=\($0.price.minorUnits)" } == ["a=150", "b=200"])
    }

    @Test func tooManyProductsOrAReloadMeanReload() throws {
        var w = Watcher(id: 9, storeUID: "s", version: 1)
        w.take(change(2, (0..<600).map { ("p\($0)", 1) }))
        w.take(change(3, (600..<1200).map { ("p\($0)", 1) }))
        let e = try frame(&w)
        #expect(e.reload && e.products.isEmpty && e.storeVersion == 3)
        w.take(change(4, [("a", 1)]))
        w.take(change(5, [], reload: true))
        #expect(try frame(&w).reload)
        w.mustReload(version: 5, catalogVersion: 5)
        #expect(!w.hasPending, "an overflow at a version already sent changes nothing")
        w.mustReload(version: 9, catalogVersion: 9)
        let r = try frame(&w)
        #expect(r.reload && r.previousVersion == 5 && r.storeVersion == 9)
    }
}
