@testable import GroserServer
import GroserStorage
import GroserWire
import Synchronization
import Testing

/// The shard's product cache hands out slots that cart lines keep: a slot
/// stays good until a catalog change may have changed its product, and a
/// line holding an invalid slot must look again and find the new price.
@Suite("product cache slots")
struct ProductCacheTests {
    /// A store of products whose prices a test changes; counts its reads.
    final class Source: @unchecked Sendable {
        let prices = Mutex<[String: Int64]>(["milk": 100, "bread": 50])
        let reads = Atomic<Int>(0)
        func read(_ uid: String) -> (product: ProductRecord, shelfUID: String)? {
            reads.add(1, ordering: .relaxed)
            guard let price = prices.withLock({ $0[uid] }) else { return nil }
            return (ProductRecord(uid: uid, storeUID: "s1", name: uid == "milk" ? "Milk" : "Bread", price: Money(minorUnits: price, currency: "RUB"), stock: 5),
                    uid == "milk" ? "dairy" : "bakery")
        }
    }

    @Test func aChangeInvalidatesTheSlotsOfItsShelvesOnly() throws {
        let source = Source()
        var cache = ProductCache(source: { uid in source.read(uid) })
        let milk = try #require(try cache.slot("milk"))
        let bread = try #require(try cache.slot("bread"))
        #expect(try cache.slot("milk") === milk, "a second lookup is the same slot, not a read")
        #expect(source.reads.load(ordering: .relaxed) == 2)
        #expect(EncodedCartLineHeadTests.decode(milk.head) == ["milk", "Milk", "100 RUB"])

        source.prices.withLock { $0["milk"] = 120 }
        cache.apply(CatalogChange(catalogVersion: 2, stores: [StoreChange(storeUID: "s1", storeVersion: 2, shelfUIDs: ["dairy"], products: [])]))
        #expect(!milk.isValid, "the changed shelf's slot is invalid")
        #expect(bread.isValid, "another shelf's slot stays good")
        let fresh = try #require(try cache.slot("milk"))
        #expect(fresh !== milk && fresh.isValid && fresh.product.price.minorUnits == 120)

        // Another shard's cache (a guest's cart merged into an account's on
        // another shard carries its slots) does not own this slot.
        let other = ProductCache(source: { uid in source.read(uid) })
        #expect(cache.owns(fresh) && !other.owns(fresh), "a slot belongs to the cache that made it")

        cache.apply(CatalogChange(catalogVersion: 3, stores: [], reloaded: true))
        #expect(!fresh.isValid && !bread.isValid, "a reload invalidates every slot")
        #expect(try cache.slot("cheese") == nil, "a product the store does not have has no slot")
    }
}

/// `EncodedCartLine.head` is a CartLine's first three fields (uid, name,
/// unit price), as protobuf-c reads them.
enum EncodedCartLineHeadTests {
    /// The strings of fields 1 and 2 in `head`, in order, then field 3's
    /// Money as "minor_units currency".
    static func decode(_ head: UnsafeRawBufferPointer) -> [String] {
        var reader = WireReader(head)
        var out: [String] = []
        while !reader.atEnd {
            guard let tag = reader.varint(maxBytes: 1), let field = reader.lengthDelimited(maxLengthBytes: 3) else { return out + ["?"] }
            guard tag >> 3 == 3 else {
                out.append(String(decoding: field, as: UTF8.self))
                continue
            }
            var money = WireReader(field)
            var minor: UInt64 = 0
            var currency = ""
            while !money.atEnd {
                switch money.varint(maxBytes: 1) {
                case 8?: minor = money.varint() ?? 0
                case 18?: currency = money.lengthDelimited().map { String(decoding: $0, as: UTF8.self) } ?? "?"
                default: return out + ["?"]
                }
            }
            out.append("\(minor) \(currency)")
        }
        return out
    }
}
