import Foundation
import GroserClient
import GroserSystem
import Testing

/// SearchProducts through a real groserd on its sample catalog.
@Suite("search", .serialized)
struct SearchTests {
    @Test func aShopperFindsMilkHowEverItIsTyped() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        for query in ["молока", "Молоко", "малоко", "vjkjrj", "молок"] {
            let v = try client.search(query, in: .cityCode("SPB"), pageSize: 3)
            #expect(v.hits.count == 3, "\(query)")
            #expect(v.hits.allSatisfy { $0.product.name.hasPrefix("Молоко") }, "\(query): \(v.hits.map(\.product.name))")
            #expect(v.storeUID == "store-spb-1")
        }
        let switched = try client.search("vjkjrj", in: .cityCode("SPB"))
        #expect(switched.layoutSwitched && switched.queryUsed == "молоко")
        // The hit says where the product is, and marks what matched.
        let hit = try client.search("молоко 3,2", in: .storeUID("store-spb-1"), pageSize: 1).hits[0]
        #expect(hit.matchedWords == 2 && hit.shelfName == "Молоко и кефир" && hit.departmentName == "Молочные продукты")
        let bytes = Array(hit.product.name.utf8)
        let marked = hit.highlights.map { String(decoding: bytes[Int($0.start)..<Int($0.start + $0.length)], as: UTF8.self) }
        #expect(marked == ["Молоко", "3,2"], "\(hit.product.name)")
    }

    @Test func aBarcodeImportedWithTheCatalogFindsItsProduct() throws {
        let daemon = try Daemon(extraArguments: ["--empty-catalog"])
        let file = try generatedCatalog(cities: 1, storesPerCity: 1, productsPerStore: 300, in: daemon.directory)
        #expect(try runClient(["admin", "import", file], socket: daemon.socketPath).status == 0)
        // The generator gives most products a barcode: take the last one in the file.
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        let record = try #require(lines.last { $0.contains("\"barcode\"") })
        let json = try #require(try JSONSerialization.jsonObject(with: Data(record.utf8)) as? [String: Any])
        let barcode = try #require(json["barcode"] as? String)
        let uid = try #require(json["uid"] as? String)
        let client = daemon.client()
        let store = try #require(try client.listCities().cities.first?.defaultStoreUID)
        let hits = try client.search(barcode, in: .storeUID(store), pageSize: 3).hits
        #expect(hits.first?.product.uid == uid, "\(barcode): \(hits.map(\.product.uid))")
        // And after a restart, from the stored catalog.
        #expect(daemon.terminate() == 0)
        try daemon.start()
        #expect(try daemon.client().search(barcode, in: .storeUID(store), pageSize: 3).hits.first?.product.uid == uid)
    }

    @Test func pagesHoldEveryHitOnceAndTokensAreChecked() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        let whole = try client.search("сыр", in: .cityCode("MSK"), pageSize: 100)
        #expect(whole.totalEstimate > 10)
        var paged: [String] = []
        var token = ""
        repeat {
            let page = try client.search("сыр", in: .cityCode("MSK"), pageSize: 4, pageToken: token)
            #expect(page.hits.count <= 4)
            paged += page.hits.map(\.product.uid)
            token = page.nextPageToken
        } while !token.isEmpty && paged.count < 500
        #expect(paged == whole.hits.map(\.product.uid))
        #expect(Set(paged).count == paged.count, "no product twice")
        // A token is bound to its query and store.
        let first = try client.search("сыр", in: .cityCode("MSK"), pageSize: 4)
        #expect(throws: GroserError.self) { try client.search("кефир", in: .cityCode("MSK"), pageToken: first.nextPageToken) }
        do {
            _ = try client.search("сыр", in: .cityCode("SPB"), pageToken: first.nextPageToken)
            Issue.record("a token of another store was taken")
        } catch {
            #expect(error.status?.code == .invalidArgument, "\(error)")
        }
    }

    @Test func filtersKeepWhatTheyName() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        let all = try client.search("сок", in: .cityCode("SPB"), pageSize: 100)
        let inStock = try client.search("сок", in: .cityCode("SPB"), pageSize: 100, inStockOnly: true)
        #expect(inStock.hits.allSatisfy { !$0.product.outOfStock })
        #expect(inStock.totalEstimate == UInt32(all.hits.filter { !$0.product.outOfStock }.count))
        let shelf = all.hits[0].product.shelfUID
        let onShelf = try client.search("сок", in: .cityCode("SPB"), shelfUID: shelf)
        #expect(!onShelf.hits.isEmpty && onShelf.hits.allSatisfy { $0.product.shelfUID == shelf })
        let department = all.hits[0].departmentUID
        let inDepartment = try client.search("сок", in: .cityCode("SPB"), departmentUID: department)
        #expect(!inDepartment.hits.isEmpty && inDepartment.hits.allSatisfy { $0.departmentUID == department })
        // Grouped by shelf: each shelf's hits together.
        let grouped = try client.search("молоко", in: .cityCode("SPB"), pageSize: 30, groupByShelf: true)
        var seen: [String] = []
        for h in grouped.hits where seen.last != h.product.shelfUID {
            #expect(!seen.contains(h.product.shelfUID), "shelf \(h.product.shelfUID) comes back after another")
            seen.append(h.product.shelfUID)
        }
    }

    @Test func aPriceOrStockChangeShowsInTheNextSearch() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        let before = try client.search("пельмени", in: .cityCode("SPB"), pageSize: 1).hits[0].product
        _ = try client.setProduct(ProductUpdate(productUID: before.uid, priceMinorUnits: before.price.minorUnits + 1000, stock: 0))
        let after = try client.search("пельмени", in: .cityCode("SPB"), pageSize: 50)
        let same = after.hits.first { $0.product.uid == before.uid }
        #expect(same?.product.price.minorUnits == before.price.minorUnits + 1000)
        #expect(same?.product.outOfStock == true)
        // Out of stock now: after every in-stock pelmeni, and gone with in_stock_only.
        #expect(after.hits[0].product.uid != before.uid)
        let inStock = try client.search("пельмени", in: .cityCode("SPB"), pageSize: 50, inStockOnly: true)
        #expect(!inStock.hits.contains { $0.product.uid == before.uid })
    }

    @Test func badSearchesGetAStatusAndOneSentence() throws {
        let daemon = try Daemon()
        let client = daemon.client()
        func refusal(_ request: SearchRequest) -> Status? {
            do {
                _ = try client.search(request)
                return nil
            } catch {
                return error.status
            }
        }
        let unknown = refusal(SearchRequest(selector: .storeUID("store-nowhere"), query: "сыр"))
        #expect(unknown?.code == .notFound && unknown?.message.contains("store-nowhere") == true)
        #expect(refusal(SearchRequest(selector: .cityCode("XXX"), query: "сыр"))?.code == .notFound)
        let empty = refusal(SearchRequest(selector: .cityCode("SPB"), query: "   "))
        #expect(empty?.code == .invalidArgument && empty?.message.contains("empty") == true)
        let long = refusal(SearchRequest(selector: .cityCode("SPB"), query: String(repeating: "молоко ", count: 143)))
        #expect(long?.code == .invalidArgument && long?.message.contains("1001 characters") == true, "\(String(describing: long))")
        #expect(refusal(SearchRequest(selector: .cityCode("SPB"), query: "%%%"))?.code == .invalidArgument)
        #expect(refusal(SearchRequest(selector: nil, query: "сыр"))?.code == .invalidArgument)
        #expect(refusal(SearchRequest(selector: .cityCode("SPB"), query: "сыр", departmentUID: "d", shelfUID: "s"))?.code == .invalidArgument)
        #expect(refusal(SearchRequest(selector: .cityCode("SPB"), query: "сыр", shelfUID: "shf-msk-1-01-1"))?.code == .invalidArgument)
        #expect(refusal(SearchRequest(selector: .cityCode("SPB"), query: "сыр", pageToken: "p1.forged"))?.code == .invalidArgument)
        // The connection is still good.
        #expect(try client.search("сыр", in: .cityCode("SPB")).hits.count > 0)
    }

    @Test func theCLIMarksTheMatchedWords() throws {
        let daemon = try Daemon()
        let r = try runClient(["search", "молоко 3,2", "--city", "SPB", "--limit", "2"], socket: daemon.socketPath)
        #expect(r.status == 0, "\(r.err)")
        // Not a terminal: brackets.
        #expect(r.out.contains("[Молоко]") && r.out.contains("[3,2]%"), "\(r.out)")
        #expect(r.out.split(separator: "\n").count == 3, "\(r.out)")
        let json = try runClient(["--json", "search", "сыр", "--store", "store-msk-1", "--in-stock"], socket: daemon.socketPath)
        #expect(json.status == 0 && json.out.contains("\"highlights\""), "\(json.err)")
        let unknown = try runClient(["search", "сыр", "--store", "nope"], socket: daemon.socketPath)
        #expect(unknown.status == 64 + 5)
    }
}
