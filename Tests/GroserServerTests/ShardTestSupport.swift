@testable import GroserServer
import GroserStorage
import GroserSystem
import GroserWire
import Testing

// What the shard tests share: a shop of one shard over a store the test
// holds, and the answers' bodies decoded (CommerceServiceTests reads them too).

/// A customer store in memory whose appends fail while `failing` is set,
/// as they do on a full disk.
final class FlakyCustomerStore: CustomerStore, @unchecked Sendable {
    // @unchecked: only the test's thread calls it (the shard's thread is not started).
    var failing = false
    var records: [CustomerRecord] = []
    func load(into state: inout CustomerState) throws(StorageError) -> String { "empty" }
    func append(_ records: [CustomerRecord]) throws(StorageError) {
        if failing { throw StorageError("no space left on device") }
        self.records += records
    }
    func checkpointDue() throws(StorageError) -> Bool { false }
    func checkpoint(expire: (inout CustomerState) -> Void) throws(StorageError) -> Int { 0 }
}

/// One shard over `log`, on the sample catalog in `directory`: the service,
/// SPB's default store and its products in stock.
func oneShardShop(_ directory: ScratchDirectory, _ log: any CustomerStore, rules: CartRules = CartRules()) throws
    -> (customers: CustomerService, storeUID: String, products: [String]) {
    let catalogStore = try SQLiteCatalogStore(directory: directory.path)
    let catalog = try CatalogService(store: catalogStore, imageBaseURL: imageBase)
    let customers = try CustomerService(
        stores: [log], rules: rules, lifetimes: CustomerLifetimes(), catalog: catalog, orders: catalogStore,
        products: { (uid) throws(StorageError) in try catalogStore.productFacts(uid) }, logger: Logger(level: .error, sink: { _ in }))
    let storeUID = try #require(sample.cities.first { $0.code == "SPB" }).defaultStoreUID
    let store = try #require(sample.stores.first { $0.uid == storeUID })
    return (customers, storeUID, store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }.map(\.uid))
}

/// An encoded body read back as the client reads it: in a response frame.
func decode(_ field: MethodField, _ body: [UInt8]) throws -> ResponseBody {
    var frame: [UInt8] = []
    ResponseFrameWriter.appendOK(id: 1, field: field, body: body, to: &frame)
    let response = try Response.decode(frame.dropFirst(4))
    #expect(response.id == 1 && response.status == .ok)
    return response.body
}
