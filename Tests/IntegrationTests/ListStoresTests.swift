import Foundation
import GroserClient
import Testing

/// ListStores against a real groserd: the client's sync and async calls and
/// `groser-client stores`, which agree with ListCities about every city.
@Suite("ListStores", .serialized)
struct ListStoresIntegrationTests {
    let daemon: Daemon
    init() throws { daemon = try Daemon() }

    @Test func everyCitysStoresAreItsListCitiesStoresWithOneDefault() throws {
        let client = daemon.client()
        for city in try client.listCities().cities {
            let list = try client.stores(of: .code(city.code))
            #expect(list.cityUID == city.uid)
            #expect(list.stores.map(\.summary) == city.stores.sorted { $0.uid < $1.uid })
            #expect(list.stores.filter(\.isDefault).map(\.summary.uid) == [city.defaultStoreUID])
            for s in list.stores {
                #expect(s.storeVersion == (try client.store(.storeUID(s.summary.uid))).storeVersion)
            }
            #expect(try client.stores(of: .uid(city.uid)) == list)
        }
        #expect(throws: GroserError.self) { try client.stores(of: .code("NOPE")) }
    }

    @Test func theAsyncCallAnswersAsTheBlockingOne() async throws {
        let client = daemon.client()
        let spb: StoreList = try await client.stores(of: .code("SPB"))
        #expect(spb.stores.count >= 1)
        #expect(try await client.stores(of: .uid(spb.cityUID)) == spb)
    }

    @Test func theStoresCommandPrintsATableAndJSON() throws {
        let configHome = daemon.directory + "/config"
        let human = try runClient(["stores", "--city", "SPB"], socket: daemon.socketPath, configHome: configHome)
        #expect(human.status == 0, "\(human.err)")
        let lines = human.out.split(separator: "\n")
        #expect(lines.first?.hasPrefix("UID") == true && lines.contains { $0.contains("store-spb-1") && $0.contains("yes") })
        let json = try runClient(["stores", "--city", "spb", "--json"], socket: daemon.socketPath, configHome: configHome)
        #expect(json.status == 0, "\(json.err)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        let stores = try #require(object["stores"] as? [[String: Any]])
        #expect(stores.contains { ($0["summary"] as? [String: Any])?["uid"] as? String == "store-spb-1" && $0["isDefault"] as? Bool == true })
        let missing = try runClient(["stores", "--city", "NOPE"], socket: daemon.socketPath, configHome: configHome)
        #expect(missing.status == 64 + 5 && missing.err.contains("No city has the code"))
    }
}
