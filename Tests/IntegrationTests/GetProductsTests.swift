import Foundation
import GroserClient
import Testing

/// GetProducts against a real groserd: the client's sync and async calls and
/// `groser-client products`, which agree with GetShelf about every product.
@Suite("GetProducts", .serialized)
struct GetProductsIntegrationTests {
    let daemon: Daemon
    init() throws { daemon = try Daemon() }

    /// A shelf's products, asked for by uid in reverse with one the store
    /// does not sell, come back as GetShelf sent them, in the order asked.
    @Test func aShelfsProductsComeBackAsGetShelfSendsThem() throws {
        let client = daemon.client()
        let store = try client.store(.storeUID("store-spb-1"))
        let shelf = try client.shelf(try #require(store.store.departments.first?.shelves.first?.uid))
        let asked = shelf.shelf.products.reversed().map(\.uid) + ["not-sold-here"]
        let v = try client.products(asked, in: "store-spb-1")
        #expect(v.products == Array(shelf.shelf.products.reversed()))
        #expect(v.missingUIDs == ["not-sold-here"])
        #expect(v.storeVersion == store.storeVersion)
        #expect(throws: GroserError.self) { try client.products(["x"], in: "store-nope") }
    }

    @Test func theAsyncCallAnswersAsTheBlockingOne() async throws {
        let client = daemon.client()
        let store: StoreCatalog = try await client.store(.storeUID("store-spb-1"), includeProducts: true)
        let uid = try #require(store.store.departments.first?.shelves.first?.products.first?.uid)
        let async: GetProductsResponse = try await client.products([uid], in: "store-spb-1")
        let blocking: GetProductsResponse = try client.products([uid], in: "store-spb-1", timeout: 5.0)
        #expect(async == blocking)
        #expect(async.products.map(\.uid) == [uid])
    }

    @Test func theProductsCommandPrintsATableAndJSON() throws {
        let configHome = daemon.directory + "/config"
        let client = daemon.client()
        let products = try client.store(.storeUID("store-spb-1"), includeProducts: true).store.departments[0].shelves[0].products
        let uids = products.prefix(2).map(\.uid).joined(separator: ",") + ",nope"
        let human = try runClient(["products", "--store", "store-spb-1", uids], socket: daemon.socketPath, configHome: configHome)
        #expect(human.status == 0, "\(human.err)")
        #expect(human.out.hasPrefix("2 of 3 products found at store-spb-1"))
        #expect(human.out.contains(products[0].uid) && human.out.contains("Not sold here: nope"))
        let json = try runClient(["products", "--store", "store-spb-1", uids, "--json"], socket: daemon.socketPath, configHome: configHome)
        #expect(json.status == 0, "\(json.err)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        #expect((object["products"] as? [[String: Any]])?.compactMap { $0["uid"] as? String } == products.prefix(2).map(\.uid))
        #expect(object["missingUids"] as? [String] == ["nope"])
        let missing = try runClient(["products", "--store", "store-nope", "a"], socket: daemon.socketPath, configHome: configHome)
        #expect(missing.status == 64 + 5 && missing.err.contains("No store has the uid"))
    }
}
