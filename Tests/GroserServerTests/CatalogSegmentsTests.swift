import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Synchronization
import Testing

extension Response {
    var productPage: ProductPage? { if case .listProducts(let v) = body { v } else { nil } }
}

/// The catalog kept in segments: what a change re-encodes, store versions
/// and revalidation, paging, and answers that must fit in a frame.
@Suite("catalog segments")
struct CatalogSegmentsTests {
    /// A real SQLite store with the sample catalog and the catalog service over it.
    final class Fixture {
        let directory: ScratchDirectory
        let store: SQLiteCatalogStore
        let catalog: CatalogService
        let rules = CommerceService(adminUIDs: [0], imageBaseURL: imageBase)

        init() throws {
            directory = try ScratchDirectory()
            store = try SQLiteCatalogStore(directory: directory.path)
            catalog = try CatalogService(store: store, imageBaseURL: imageBase)
        }

        func setProduct(_ update: ProductUpdate) throws {
            let outcome = try store.write { (tx) throws(StorageError) -> CommerceOutcome in
                try rules.execute(.setProduct(update), caller: Caller(uid: 0, gid: 0), in: tx).outcome
            }
            guard case .ok = outcome else { throw SetupError("SetProduct refused: \(outcome)") }
        }

        func handler(maximumAnswerBytes: Int = Framing.defaultMaximumFrameBytes) -> RequestHandler {
            RequestHandler(catalog: catalog.current, startedAtNanoseconds: monotonicNanoseconds(), maximumAnswerBytes: maximumAnswerBytes)
        }
    }

    let spb = sample.stores.first { $0.uid == "store-spb-1" }!

    /// A store as answers show it: products by name, image URLs absolute.
    func servedStore(_ store: Store) -> Store {
        var s = withAbsoluteImages(store)
        for d in s.departments.indices {
            for h in s.departments[d].shelves.indices { s.departments[d].shelves[h].products.sort { $0.name < $1.name } }
        }
        return s
    }

    @Test func aPriceChangeReencodesOnlyItsShelfAndSharesEveryOtherSegment() throws {
        let f = try Fixture()
        let before = f.catalog.current
        let statsBefore = f.catalog.stats
        let shelf = spb.departments[1].shelves[0]
        let product = shelf.products[0]
        let changes = Mutex<[CatalogChange]>([])
        f.catalog.subscribe { change in changes.withLock { $0.append(change) } }

        try f.setProduct(ProductUpdate(productUID: product.uid, priceMinorUnits: 12_345))
        #expect(try f.catalog.refresh())

        let after = f.catalog.current
        let stats = f.catalog.stats
        #expect(stats.shelvesEncoded - statsBefore.shelvesEncoded == 1, "one shelf re-encoded, not \(stats.shelvesEncoded - statsBefore.shelvesEncoded)")
        #expect(stats.lastChangedShelves == [shelf.uid])
        #expect(stats.fullLoads == statsBefore.fullLoads && stats.incrementalChanges == 1)
        #expect(after.version == before.version + 1)
        // Every other shelf of every store is the very same segment.
        for (uid, store) in before.stores {
            for d in sample.stores.first(where: { $0.uid == uid })!.departments {
                for h in d.shelves where h.uid != shelf.uid {
                    #expect(after.shelf(h.uid) === before.shelf(h.uid), "\(h.uid) was re-encoded")
                }
            }
            if uid == spb.uid {
                #expect(after.stores[uid]!.version == after.version, "the changed store's version moves")
            } else {
                #expect(after.stores[uid] === store, "\(uid) is untouched and shared")
            }
        }
        // The change record names what was re-encoded.
        let published = changes.withLock { $0 }
        #expect(published == [CatalogChange(catalogVersion: after.version,
                                             stores: [StoreChange(storeUID: spb.uid, storeVersion: after.version, shelfUIDs: [shelf.uid],
                                                                  products: [ProductChange(uid: product.uid, shelfUID: shelf.uid,
                                                                                           price: Money(minorUnits: 12_345, currency: product.price.currency),
                                                                                           outOfStock: product.outOfStock)])])])
        // And the answers show the new price.
        let r = try call(Request(id: 1, method: .getShelf(shelfUID: shelf.uid)), handler: f.handler())
        #expect(r.shelfContents?.shelf.products.first { $0.uid == product.uid }?.price.minorUnits == 12_345)
        #expect(r.shelfContents?.storeVersion == after.version)
        let s = try call(Request(id: 2, method: .getStore(selector: .storeUID(spb.uid), includeProducts: true)), handler: f.handler())
        let products = s.storeCatalog.map { $0.store.departments.flatMap { $0.shelves }.flatMap { $0.products } } ?? []
        #expect(products.first { $0.uid == product.uid }?.price.minorUnits == 12_345)
        #expect(products.count == spb.departments.flatMap { $0.shelves }.flatMap { $0.products }.count)
    }

    @Test func theWithProductsAnswerAssembledFromSegmentsEqualsTheWholeEncoding() throws {
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        for store in sample.stores {
            let r = try call(Request(id: 3, method: .getStore(selector: .storeUID(store.uid), includeProducts: true)), handler: handler)
            let got = try #require(r.storeCatalog)
            #expect(got.store == servedStore(store), "\(store.uid)")
            #expect(got.catalogVersion == catalogVersion && got.storeVersion == catalogVersion && !got.notModified)
        }
    }

    @Test func aRevalidationWithTheCurrentVersionGetsNoBody() throws {
        let f = try Fixture()
        let h = f.handler()
        let first = try #require(try call(Request(id: 1, method: .getStore(selector: .cityCode("SPB"), includeProducts: true)), handler: h).storeCatalog)
        let again = try call(Request(id: 2, method: .getStore(selector: .cityCode("SPB"), includeProducts: true,
                                                              knownStoreVersion: first.storeVersion)), handler: h)
        let notModified = try #require(again.storeCatalog)
        #expect(notModified.notModified && notModified.storeVersion == first.storeVersion)
        #expect(notModified.store.departments.isEmpty && notModified.store.uid.isEmpty && notModified.city.uid.isEmpty)
        var frame: [UInt8] = []
        _ = h.respond(to: Request(id: 2, method: .getStore(selector: .cityCode("SPB"), includeProducts: true,
                                                           knownStoreVersion: first.storeVersion)),
                      receivedAt: monotonicNanoseconds(), into: &frame)
        #expect(frame.count < 32, "a revalidation costs a few bytes, not \(frame.count)")

        let shelfUID = spb.departments[0].shelves[0].uid
        let shelf = try #require(try call(Request(id: 3, method: .getShelf(shelfUID: shelfUID, knownStoreVersion: first.storeVersion)), handler: h).shelfContents)
        #expect(shelf.notModified && shelf.shelf.products.isEmpty && shelf.storeUID == spb.uid)

        // After a change to the store, the same known version gets the whole answer.
        try f.setProduct(ProductUpdate(productUID: spb.departments[0].shelves[0].products[0].uid, stock: 0))
        try f.catalog.refresh()
        let changed = try #require(try call(Request(id: 4, method: .getStore(selector: .cityCode("SPB"), includeProducts: false,
                                                                             knownStoreVersion: first.storeVersion)), handler: f.handler()).storeCatalog)
        #expect(!changed.notModified && changed.storeVersion > first.storeVersion && changed.store.uid == spb.uid)
        // Another store did not change: its version still revalidates.
        let msk = try #require(try call(Request(id: 5, method: .getStore(selector: .cityCode("MSK"), includeProducts: false)), handler: h).storeCatalog)
        let mskAgain = try #require(try call(Request(id: 6, method: .getStore(selector: .cityCode("MSK"), includeProducts: false,
                                                                              knownStoreVersion: msk.storeVersion)), handler: f.handler()).storeCatalog)
        #expect(mskAgain.notModified)
    }

    @Test(arguments: [1, 7, 100, 1000, 5000])
    func pagingReturnsEveryProductOnceInOrder(pageSize: Int) throws {
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        let expected = servedStore(spb).departments.flatMap { $0.shelves }.flatMap { $0.products }
        var seen: [Product] = []
        var token = ""
        var pages = 0
        repeat {
            let r = try call(Request(id: 9, method: .listProducts(ProductPageRequest(storeUID: spb.uid, pageSize: UInt32(pageSize), pageToken: token))),
                             handler: handler)
            let page = try #require(r.productPage, "\(r.status)")
            #expect(page.products.count <= min(pageSize, 1000))
            #expect(page.totalSize == UInt32(expected.count) && page.storeVersion == catalogVersion)
            seen += page.products
            token = page.nextPageToken
            pages += 1
        } while !token.isEmpty && pages < 10_000
        #expect(seen == expected)
        #expect(pages == (expected.count + min(pageSize, 1000) - 1) / min(pageSize, 1000))
    }

    @Test func pagingOneShelfAndRefusingForgedOrMovedTokens() throws {
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds())
        let shelf = spb.departments[2].shelves[1]
        let first = try #require(try call(Request(id: 1, method: .listProducts(ProductPageRequest(storeUID: spb.uid, shelfUID: shelf.uid, pageSize: 2))),
                                          handler: handler).productPage)
        #expect(first.products.map { $0.uid } == Array(servedStore(spb).departments[2].shelves[1].products.prefix(2).map { $0.uid }))
        #expect(first.totalSize == UInt32(shelf.products.count) && !first.nextPageToken.isEmpty)

        var forged = Array(first.nextPageToken)
        forged[forged.count - 3] = forged[forged.count - 3] == "A" ? "B" : "A"
        let cases: [(String, ProductPageRequest)] = [
            ("a changed byte", ProductPageRequest(storeUID: spb.uid, shelfUID: shelf.uid, pageSize: 2, pageToken: String(forged))),
            ("another shelf", ProductPageRequest(storeUID: spb.uid, shelfUID: spb.departments[0].shelves[0].uid, pageToken: first.nextPageToken)),
            ("the whole store", ProductPageRequest(storeUID: spb.uid, pageToken: first.nextPageToken)),
            ("made up", ProductPageRequest(storeUID: spb.uid, pageToken: "p1.AAAAAAAAAAEAAAAHAAAAAAAAAAAAAAAAAAAAAA")),
            ("not base64", ProductPageRequest(storeUID: spb.uid, pageToken: "p1.!!!")),
        ]
        for (label, request) in cases {
            let r = try call(Request(id: 2, method: .listProducts(request)), handler: handler)
            #expect(r.status.code == .invalidArgument && r.status.message.contains("page token"), "\(label): \(r.status)")
        }
        let noStore = try call(Request(id: 3, method: .listProducts(ProductPageRequest(storeUID: "store-nope"))), handler: handler)
        #expect(noStore.status.code == .notFound)
        let foreignShelf = try call(Request(id: 4, method: .listProducts(ProductPageRequest(
            storeUID: spb.uid, shelfUID: sample.stores.first { $0.uid != spb.uid }!.departments[0].shelves[0].uid))), handler: handler)
        #expect(foreignShelf.status.code == .invalidArgument)
    }

    @Test func aTokenSurvivesAPriceChange() throws {
        let f = try Fixture()
        let first = try #require(try call(Request(id: 1, method: .listProducts(ProductPageRequest(storeUID: spb.uid, pageSize: 50))), handler: f.handler()).productPage)
        try f.setProduct(ProductUpdate(productUID: spb.departments[0].shelves[0].products[0].uid, priceMinorUnits: 1))
        try f.catalog.refresh()
        let next = try call(Request(id: 2, method: .listProducts(ProductPageRequest(storeUID: spb.uid, pageSize: 50, pageToken: first.nextPageToken))),
                            handler: f.handler())
        let page = try #require(next.productPage, "\(next.status)")
        #expect(page.storeVersion > first.storeVersion)
        #expect(page.products.first?.uid == servedStore(spb).departments.flatMap { $0.shelves }.flatMap { $0.products }[50].uid)
    }

    @Test func anAnswerThatWouldNotFitPointsAtPaging() throws {
        let handler = RequestHandler(catalog: encodedSample, startedAtNanoseconds: monotonicNanoseconds(), maximumAnswerBytes: 20_000)
        let r = try call(Request(id: 5, method: .getStore(selector: .storeUID(spb.uid), includeProducts: true)), handler: handler)
        #expect(r.status.code == .resourceExhausted && r.status.message.contains("ListProducts"), "\(r.status)")
        let small = try call(Request(id: 6, method: .getStore(selector: .storeUID(spb.uid), includeProducts: false)), handler: handler)
        #expect(small.status.code == .ok)
        // A page is cut short to fit, and the rest comes on the next page.
        var out: [UInt8] = []
        _ = handler.respond(to: Request(id: 7, method: .listProducts(ProductPageRequest(storeUID: spb.uid, pageSize: 1000))),
                            receivedAt: monotonicNanoseconds(), into: &out)
        #expect(out.count <= 20_000 + 4)
        let page = try #require(try responses(in: out).first?.productPage)
        #expect(page.products.count < 1000 && !page.nextPageToken.isEmpty)
    }
}
