import Foundation
import GroserClient
import GroserSystem
import Testing

/// tools/gen-catalog's output for a small catalog, in a temporary file.
func generatedCatalog(cities: Int, storesPerCity: Int, productsPerStore: Int, seed: Int = 7, in directory: String) throws -> String {
    let path = directory + "/gen-\(cities)-\(storesPerCity)-\(productsPerStore)-\(seed).jsonl"
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = ["python3", repositoryRoot + "/tools/gen-catalog", "--cities", String(cities), "--stores-per-city", String(storesPerCity),
                   "--products-per-store", String(productsPerStore), "--seed", String(seed), "--output", path]
    p.standardError = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw TestFailure("tools/gen-catalog failed") }
    return path
}

/// `admin import` and `admin export` through the real binaries.
@Suite("catalog import and export", .serialized)
struct CatalogImportTests {
    @Test func exportThenImportIntoAnEmptyDaemonGivesTheIdenticalFile() throws {
        let daemon = try Daemon(extraArguments: ["--empty-catalog"])
        let file = try generatedCatalog(cities: 2, storesPerCity: 2, productsPerStore: 400, in: daemon.directory)
        let imported = try runClient(["admin", "import", file], socket: daemon.socketPath)
        #expect(imported.status == 0, "\(imported.err)")
        #expect(imported.out.contains("1600 products in 4 stores"), "\(imported.out)")
        let exported = try runClient(["admin", "export"], socket: daemon.socketPath)
        #expect(exported.status == 0, "\(exported.err)")
        let original = try String(contentsOfFile: file, encoding: .utf8)
        #expect(exported.out == original, "export differs from the imported file")
        // And what shoppers see is that catalog.
        let client = daemon.client()
        let cities = try client.listCities().cities.map(\.code)
        #expect(cities == ["MSK", "SPB"])
        let store = try client.storeWithProducts(.cityCode("SPB"))
        #expect(store.store.departments.flatMap(\.shelves).flatMap(\.products).count == 400)
        // Exporting again after a restart gives the same bytes.
        #expect(daemon.terminate() == 0)
        try daemon.start()
        #expect(try runClient(["admin", "export"], socket: daemon.socketPath).out == original)
    }

    @Test func aFileWithOneBadLineChangesNothingAndNamesTheLine() throws {
        let daemon = try Daemon()
        let file = try generatedCatalog(cities: 1, storesPerCity: 1, productsPerStore: 300, in: daemon.directory)
        var lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let before = try runClient(["admin", "export"], socket: daemon.socketPath).out
        let version = try daemon.client().serverInfo().catalogVersion

        // A syntax-level fault: found by groser-client before anything is sent.
        let index = try #require(lines.lastIndex { $0.contains("\"type\":\"product\"") })
        var broken = lines
        broken[index] = broken[index].replacingOccurrences(of: "\"stock\":", with: "\"stok\":")
        let bad = daemon.directory + "/bad.jsonl"
        try broken.joined(separator: "\n").write(toFile: bad, atomically: true, encoding: .utf8)
        let r1 = try runClient(["admin", "import", bad], socket: daemon.socketPath)
        #expect(r1.status == 67, "\(r1.err)")
        #expect(r1.err.contains("bad.jsonl:\(index + 1):") && r1.err.contains("stok") && r1.err.contains("nothing was imported"), "\(r1.err)")

        // A fault only groserd can see (a shelf that exists nowhere), on a
        // late line: everything before it was sent, and none of it applied.
        lines[index] = lines[index].replacingOccurrences(of: "\"shelf_uid\":\"", with: "\"shelf_uid\":\"nope-")
        try lines.joined(separator: "\n").write(toFile: bad, atomically: true, encoding: .utf8)
        let r2 = try runClient(["admin", "import", bad], socket: daemon.socketPath)
        #expect(r2.status == 67, "\(r2.err)")
        #expect(r2.err.contains("line \(index + 1)") && r2.err.contains("nope-"), "\(r2.err)")

        #expect(try daemon.client().serverInfo().catalogVersion == version, "the catalog version did not move")
        #expect(try runClient(["admin", "export"], socket: daemon.socketPath).out == before, "the catalog is as it was")
        // A cut file (no end record) is refused too.
        try lines.prefix(50).joined(separator: "\n").appending("\n").write(toFile: bad, atomically: true, encoding: .utf8)
        let r3 = try runClient(["admin", "import", bad], socket: daemon.socketPath)
        #expect(r3.status == 67 && r3.err.contains("truncated"), "\(r3.err)")
    }

    /// A U+202E in a product name would show a shopper's line reversed
    /// (the price included); a zero-width space makes two names look the
    /// same. The import refuses them, naming the line, the field and the
    /// character, and applies nothing.
    @Test func bidirectionalControlsAndInvisibleCharactersInNamesAreRefused() throws {
        let daemon = try Daemon()
        let file = try generatedCatalog(cities: 1, storesPerCity: 1, productsPerStore: 50, in: daemon.directory)
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let index = try #require(lines.lastIndex { $0.contains("\"type\":\"product\"") })
        let before = try runClient(["admin", "export"], socket: daemon.socketPath).out
        // Raw in the file, as a JSON escape, and in a brand: each is refused.
        for (hidden, field) in [("\u{202E}", "name"), ("\\u2066", "name"), ("\u{200B}", "name"), ("\\ufeff", "brand"), ("\u{2028}", "name")] {
            var broken = lines
            broken[index] = broken[index].replacingOccurrences(of: "\"\(field)\":\"", with: "\"\(field)\":\"Milk 1 l \(hidden)")
            #expect(broken[index] != lines[index])
            let bad = daemon.directory + "/hidden.jsonl"
            try broken.joined(separator: "\n").write(toFile: bad, atomically: true, encoding: .utf8)
            let r = try runClient(["admin", "import", bad], socket: daemon.socketPath)
            #expect(r.status == 67, "\(hidden): \(r.err)")
            #expect(r.err.contains("line \(index + 1)") && r.err.contains("\(field) holds U+")
                    && r.err.contains("invisible formatting character"), "\(r.err)")
        }
        #expect(try runClient(["admin", "export"], socket: daemon.socketPath).out == before, "the catalog is as it was")
    }

    @Test func replaceRemovesWhatTheFileDoesNotNameAndTheCartsThatHeldIt() throws {
        let daemon = try Daemon(extraArguments: ["--empty-catalog"])
        let client = daemon.client()
        let file = try generatedCatalog(cities: 1, storesPerCity: 1, productsPerStore: 200, in: daemon.directory)
        #expect(try runClient(["admin", "import", file], socket: daemon.socketPath).status == 0)
        let store = try client.storeWithProducts(.cityCode("MSK"))
        let products = store.store.departments.flatMap(\.shelves).flatMap(\.products).filter { !$0.outOfStock }
        let session = try client.openSession()
        let doomed = products[0]
        let cart = try client.addItem(CartMutation(session: session, storeUID: store.store.uid), productUID: doomed.uid)
        _ = try client.addItem(CartMutation(session: session, storeUID: store.store.uid), productUID: products[1].uid)
        // The same file without one product, imported with --replace.
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init)
        var kept = lines.filter { !$0.contains("\"uid\":\"\(doomed.uid)\"") }
        kept[kept.count - 1] = "{\"type\":\"end\",\"records\":\(kept.count - 2)}"
        let smaller = daemon.directory + "/smaller.jsonl"
        try (kept.joined(separator: "\n") + "\n").write(toFile: smaller, atomically: true, encoding: .utf8)
        let r = try runClient(["admin", "import", smaller, "--replace"], socket: daemon.socketPath)
        #expect(r.status == 0 && r.out.contains("1 removed"), "\(r.out) \(r.err)")
        let after = try client.storeWithProducts(.cityCode("MSK")).store.departments.flatMap(\.shelves).flatMap(\.products)
        #expect(after.count == 199 && !after.contains { $0.uid == doomed.uid })
        let c = try client.cart(session: session, storeUID: store.store.uid)
        #expect(c.lines.map(\.productUID) == [products[1].uid], "the removed product's line went")
        #expect(c.version > cart.version + 1, "and the cart moved to a new version")
    }

    @Test func cartWritesAreAnsweredWhileALargeImportIsApplied() throws {
        let daemon = try Daemon()
        // The import's transaction holds SQLite's write lock while it applies:
        // a cart write may wait that long (seconds under a sanitizer).
        let client = daemon.client(timeout: 60)
        let spb = try client.store(.cityCode("SPB"), includeProducts: true)
        let product = try #require(spb.store.departments.flatMap(\.shelves).flatMap(\.products).first { !$0.outOfStock })
        let session = try client.openSession()
        // 100,000 products for a new store, sent through the library.
        let importer = daemon.client(timeout: 600)
        var chunk: [NumberedRecord] = [
            NumberedRecord(line: 2, record: .store(StoreSummary(uid: "store-big", name: "Big", chain: "Big", address: "Москва, 1", cityUID: "city-msk"))),
            NumberedRecord(line: 3, record: .department(CatalogDepartment(uid: "dep-big", storeUID: "store-big", name: "Всё"))),
        ]
        for s in 0..<100 {
            chunk.append(NumberedRecord(line: UInt32(4 + s), record: .shelf(CatalogShelf(uid: "shelf-big-\(s)", departmentUID: "dep-big", name: "Полка \(s)"))))
        }
        var importID: UInt64 = 0
        var line: UInt32 = 200
        for i in 0..<100_000 {
            line += 1
            let p = Product(uid: "prd-big-\(i)", name: "Товар \(i)", brand: "Бренд", unit: "g", unitSize: 500,
                            price: Money(minorUnits: Int64(1000 + i % 500), currency: "RUB"), imageURL: "/img/\(i).jpg",
                            outOfStock: false, oftenOutOfStock: false, shelfUID: "shelf-big-\(i % 100)")
            chunk.append(NumberedRecord(line: line, record: .product(CatalogProduct(product: p, stock: 10))))
            if chunk.count == 2000 {
                importID = try importer.importCatalog(ImportChunk(importID: importID, records: chunk)).importID
                chunk = []
            }
        }
        let committed = Locked<ImportResult?>(nil)
        let started = Date()
        let last = ImportChunk(importID: importID, records: chunk, commit: true)
        let thread = try OSThread(name: "test-import") {
            let r = try? importer.importCatalog(last)
            committed.withLock { $0 = r }
        }
        // Cart writes go on while the commit is being applied and encoded.
        var answered = 0
        var slowest = 0.0
        while committed.withLock({ $0 }) == nil && Date().timeIntervalSince(started) < 120 {
            let t = Date()
            _ = try client.setQuantity(CartMutation(session: session, storeUID: spb.store.uid), productUID: product.uid,
                                       quantity: UInt32(answered % 5 + 1))
            slowest = max(slowest, Date().timeIntervalSince(t))
            answered += 1
        }
        thread.join()
        let result = try #require(committed.withLock { $0 }, "the import did not commit")
        #expect(result.committed && result.products == 100_000)
        #expect(answered >= 3, "only \(answered) cart writes were answered while the import was applied")
        #expect(slowest < 40, "a cart write waited \(slowest) s")
        let big = try client.store(.storeUID("store-big"))
        #expect(big.store.departments.first?.shelves.reduce(0) { $0 + Int($1.productCount) } == 100_000)
    }
}
