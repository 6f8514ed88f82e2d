import Foundation
import Testing

@Suite("the groser-client binary", .serialized)
struct ClientCommandTests {
    let daemon: Daemon
    let configHome: String
    init() throws {
        daemon = try Daemon()
        configHome = daemon.directory + "/config"
    }

    func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runClient(args, socket: daemon.socketPath, configHome: configHome)
    }

    @Test func citiesJSONListsAtLeastFiveCitiesInProtobufJSONNames() throws {
        let r = try run(["cities", "--json"])
        #expect(r.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        let cities = try #require(object?["cities"] as? [[String: Any]])
        #expect(cities.count >= 5)
        let spb = try #require(cities.first { $0["code"] as? String == "SPB" })
        #expect(spb["defaultStoreUid"] is String)
        #expect((spb["stores"] as? [[String: Any]])?.first?["cityUid"] as? String == spb["uid"] as? String)
        #expect(object?["catalogVersion"] as? String == "1", "64-bit integers are strings, as Protobuf's JSON mapping writes them")
    }

    @Test func getStoreSPBPrintsATreeOfDepartmentsAndShelves() throws {
        let r = try run(["get-store", "--city", "SPB"])
        #expect(r.status == 0)
        #expect(r.err.isEmpty)
        #expect(r.out.contains("Санкт-Петербург"))
        #expect(r.out.contains("├── ") && r.out.contains("│   ├── ") && r.out.contains("└── "))
        #expect(r.out.contains(" products · shf-"))
    }

    @Test func productsPrintWithRublePrices() throws {
        let r = try run(["get-store", "--city", "SPB", "--products"])
        #expect(r.status == 0)
        let priced = r.out.split(separator: "\n").filter { $0.contains(" ₽") }
        #expect(priced.count >= 500)
        #expect(priced.allSatisfy { $0.range(of: #"\d+\.\d\d ₽"#, options: .regularExpression) != nil })
    }

    @Test func anUnknownCityExits69WithOneLine() throws {
        let r = try run(["get-store", "--city", "NOPE"])
        #expect(r.status == 69)
        #expect(r.out.isEmpty)
        #expect(r.err.split(separator: "\n").count == 1)
        #expect(r.err.contains("NOT_FOUND") && r.err.contains("NOPE"))
    }

    @Test func setCityIsRememberedByGetStore() throws {
        let missing = try run(["get-store"])
        #expect(missing.status == 2, "no city given and none saved is a usage error")
        let set = try run(["set-city", "kzn"])
        #expect(set.status == 0)
        let saved = try String(contentsOfFile: configHome + "/groser/client.conf", encoding: .utf8)
        #expect(saved.contains("city=KZN"))
        let r = try run(["get-store", "--json"])
        #expect(r.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        #expect((object?["city"] as? [String: Any])?["code"] as? String == "KZN")
        let bad = try run(["set-city", "ZZZ"])
        #expect(bad.status == 69)
        #expect(try String(contentsOfFile: configHome + "/groser/client.conf", encoding: .utf8).contains("city=KZN"),
                "a refused city leaves the saved one alone")
    }

    @Test func shelfAndInfoWork() throws {
        let store = try run(["get-store", "--city", "MSK", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(store.out.utf8)) as? [String: Any]
        let departments = ((object?["store"] as? [String: Any])?["departments"] as? [[String: Any]]) ?? []
        let shelfUID = try #require(((departments.first?["shelves"] as? [[String: Any]])?.first?["uid"]) as? String)
        let shelf = try run(["shelf", shelfUID])
        #expect(shelf.status == 0)
        #expect(shelf.out.contains("PRICE") && shelf.out.contains(" ₽"))
        let info = try run(["info", "--json"])
        #expect(info.status == 0)
        #expect(info.out.contains("\"protocolVersion\": 1"))
        let noShelf = try run(["shelf", "shf-nope"])
        #expect(noShelf.status == 69)
    }

    @Test(arguments: [["bogus"], ["get-store", "--city"], ["get-store", "--city", "SPB", "--store", "x"],
                      ["shelf"], ["cities", "extra"], ["--timeout", "zero", "cities"], []])
    func usageErrorsExit2(args: [String]) throws {
        let r = try run(args)
        #expect(r.status == 2)
        #expect(!r.err.isEmpty)
    }

    @Test func everyCommandHasHelp() throws {
        for command in ["cities", "get-store", "shelf", "set-city", "info"] {
            let r = try run([command, "--help"])
            #expect(r.status == 0)
            #expect(r.out.hasPrefix("usage: groser-client \(command)"))
        }
        #expect(try run(["--help"]).out.contains("commands:"))
    }

    @Test func noDaemonExits1WithOneLine() throws {
        let r = try runClient(["cities"], socket: daemon.directory + "/nothing.sock")
        #expect(r.status == 1)
        #expect(r.err.split(separator: "\n").count == 1)
        #expect(r.err.contains("cannot connect"))
    }
}
