import Foundation
import GroserStorage
import GroserSystem
import GroserWire
import Testing

/// A database of its own on the test cluster, dropped when released.
final class TestPostgresDatabase {
    let name: String
    /// The cluster's conninfo naming this database (a later keyword wins).
    let conninfo: String

    init() throws {
        name = "groser_t_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try PostgresConnection(testPostgres!)
        try admin.executeScript("CREATE DATABASE \(name)")
        conninfo = testPostgres! + " dbname=\(name)"
    }

    /// A connection of the test's own, to look at the database from outside
    /// the store.
    func connect() throws -> PostgresConnection { try PostgresConnection(conninfo) }

    /// Ends every other connection to the database (as a PostgreSQL restart
    /// or a network cut would), waiting until they are gone.
    func terminateConnections() throws {
        let admin = try PostgresConnection(testPostgres!)
        try admin.execute("""
            SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
            WHERE datname = $1 AND pid <> pg_backend_pid()
            """, [name])
    }

    deinit {
        if let admin = try? PostgresConnection(testPostgres!) {
            try? admin.executeScript("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
    }
}

/// Strings appended from several threads.
private final class Collected: @unchecked Sendable {
    // @unchecked: `strings` is only touched with `lock` held.
    private let lock = NSLock()
    private var strings: [String] = []
    func append(_ s: String) { lock.withLock { strings.append(s) } }
    var values: [String] { lock.withLock { strings } }
}

private func count(_ c: PostgresConnection, _ table: String) throws -> Int {
    Int(try c.execute("SELECT count(*) AS n FROM \(table)")[0, "n"] ?? "") ?? -1
}

private func stock(_ c: PostgresConnection, _ uid: String) throws -> Int {
    Int(try c.execute("SELECT stock FROM products WHERE uid = $1", [uid])[0, "stock"] ?? "") ?? -1
}

private func order(_ store: String, _ lines: [(String, Int64, UInt32)], holder: String) -> Order {
    let orderLines = lines.map { l in
        OrderLine(productUID: l.0, name: "Товар \(l.0)", unitPrice: Money(minorUnits: l.1, currency: "RUB"), quantity: l.2,
                  lineTotal: Money(minorUnits: l.1 * Int64(l.2), currency: "RUB"))
    }
    return Order(number: "", storeUID: store, cityCode: "MSK", lines: orderLines,
                 total: Money(minorUnits: orderLines.reduce(0) { $0 + $1.lineTotal.minorUnits }, currency: "RUB"),
                 cardBrand: "VISA", cardLast4: "4242", createdAtUnix: 1_700_000_000, deliveryAddress: "Тверская, 1 \"кв. 5\"",
                 holderName: holder)
}

/// The PostgreSQL store against a real PostgreSQL: a fresh database per test.
@Suite("PostgresCatalogStore", .serialized, .enabled(if: testPostgres != nil, "GROSER_TEST_PG is not set: tools/test starts a cluster and sets it"))
struct PostgresCatalogStoreTests {
    let db: TestPostgresDatabase
    let store: PostgresCatalogStore

    init() throws {
        db = try TestPostgresDatabase()
        store = try PostgresCatalogStore(conninfo: db.conninfo)
    }

    /// Any one sample product: its uid, shelf and stock.
    private func someProduct() throws -> Product {
        let catalog = try store.loadCatalog().catalog
        return try #require(catalog.stores.first?.departments.first?.shelves.first?.products.first { !$0.outOfStock })
    }

    @Test func migratingAgainAndOpeningASecondStoreChangeNothing() throws {
        let before = try store.loadCatalog()
        let c = try db.connect()
        try PostgresSchema.migrate(c)
        try PostgresSchema.migrate(c)
        #expect(try c.execute("SELECT max(version) AS v, count(*) AS n FROM groser_schema").rows == [[String(PostgresSchema.version), String(PostgresSchema.version)]])
        let second = try PostgresCatalogStore(conninfo: db.conninfo)
        #expect(try count(c, "products") == before.catalog.stores.flatMap { $0.departments.flatMap { $0.shelves.flatMap(\.products) } }.count)
        #expect(try count(c, "cities") == before.catalog.cities.count)
        let after = try second.loadCatalog()
        #expect(after.catalog == before.catalog && after.version == before.version)
    }

    @Test func storesOpeningAtOnceOnAnEmptyDatabaseSeedItOnce() throws {
        let fresh = try TestPostgresDatabase()
        let errors = Collected()
        let conninfo = fresh.conninfo
        DispatchQueue.concurrentPerform(iterations: 3) { _ in
            do { _ = try PostgresCatalogStore(conninfo: conninfo) } catch { errors.append("\(error)") }
        }
        #expect(errors.values == [])
        let c = try fresh.connect()
        #expect(try count(c, "cities") == SampleCatalog.make().cities.count)
        #expect(try count(c, "groser_schema") == PostgresSchema.version)
    }

    @Test func theSampleCatalogLoadsAsFromSQLite() throws {
        let dir = try TemporaryDirectory()
        let sqlite = try SQLiteCatalogStore(directory: dir.path).loadCatalog()
        let pg = try store.loadCatalog()
        #expect(pg.version == sqlite.version)
        #expect(pg.catalog.cities == sqlite.catalog.cities)
        #expect(pg.catalog.stores.count == sqlite.catalog.stores.count)
        for (p, s) in zip(pg.catalog.stores, sqlite.catalog.stores) { #expect(p == s, "store \(s.uid)") }
        #expect(pg.catalog == sqlite.catalog)
        #expect(try store.catalogVersion() == 1)
    }

    @Test func withoutSeedingTheCatalogIsEmpty() throws {
        let fresh = try TestPostgresDatabase()
        let empty = try PostgresCatalogStore(conninfo: fresh.conninfo, seedSampleCatalog: false)
        let (catalog, version) = try empty.loadCatalog()
        #expect(catalog.cities.isEmpty && catalog.stores.isEmpty && version == 1)
    }

    @Test func aPriceChangeReportsExactlyItsShelf() throws {
        let product = try someProduct()
        let v0 = try store.catalogVersion()
        #expect(try store.loadChangedShelves(since: v0).shelves.isEmpty)
        let v1 = try store.write { (t) throws(StorageError) -> UInt64 in
            try t.updateProduct(ProductUpdate(productUID: product.uid, priceMinorUnits: 12_345, stock: 7))
            return try t.bumpCatalogVersion(touching: [product.uid])
        }
        #expect(v1 == v0 + 1)
        #expect(try store.catalogVersion() == v1)
        let changed = try store.loadChangedShelves(since: v0)
        #expect(changed.version == v1)
        #expect(Array(changed.shelves.keys) == [product.shelfUID])
        let shelf = try #require(changed.shelves[product.shelfUID])
        let reloaded = try store.loadCatalog().catalog.stores.flatMap { $0.departments.flatMap(\.shelves) }.first { $0.uid == product.shelfUID }
        #expect(shelf == reloaded?.products, "the changed shelf is the whole shelf as the catalog has it")
        #expect(shelf.first { $0.uid == product.uid }?.price.minorUnits == 12_345)
        #expect(try store.loadChangedShelves(since: v1).shelves.isEmpty)
        let read = try store.write { (t) throws(StorageError) in try t.catalogProduct(product.uid) }
        #expect(read?.0.price.minorUnits == 12_345 && read?.1 == 7)
    }

    @Test func aProductWithAQuoteInItsUIDIsMarkedToo() throws {
        // The uid list goes as a text[] literal: quotes, backslashes and commas must survive.
        let product = try someProduct()
        let odd = "p\"1\\,{x} NULL"
        let c = try db.connect()
        try c.execute("UPDATE products SET uid = $1 WHERE uid = $2", [odd, product.uid])
        let v0 = try store.catalogVersion()
        _ = try store.write { (t) throws(StorageError) in try t.bumpCatalogVersion(touching: [odd, "missing"]) }
        #expect(Array(try store.loadChangedShelves(since: v0).shelves.keys) == [product.shelfUID])
    }

    @Test func twoHostsRacingForTheLastItemSellItOnce() throws {
        let product = try someProduct()
        try store.write { (t) throws(StorageError) in try t.updateProduct(ProductUpdate(productUID: product.uid, stock: 1)) }
        let hosts = [store, try PostgresCatalogStore(conninfo: db.conninfo)]
        let outcomes = Collected()
        let overlapped = Collected()
        let conninfo = db.conninfo
        // Two threads of their own: both checkouts surely run at once.
        let threads = try (0..<2).map { i in
            try OSThread(name: "host-\(i)") {
                do {
                    try hosts[i].write { (t) throws(StorageError) in
                        guard let p = try t.product(product.uid), p.stock >= 1 else { throw StorageError("out of stock") }
                        // Hold the row until the other host's checkout is seen
                        // waiting for its lock (pg_stat_activity), not for a guessed moment.
                        if Self.waitForALockWaiter(conninfo) { overlapped.append("waited") }
                        try t.decrementStock(productUID: product.uid, by: 1)
                    }
                    outcomes.append("sold")
                } catch {
                    outcomes.append("\(error)")
                }
            }
        }
        threads.forEach { $0.join() }
        #expect(outcomes.values.sorted() == ["out of stock", "sold"])
        #expect(overlapped.values == ["waited"], "the other host's checkout never waited for the row")
        #expect(try stock(db.connect(), product.uid) == 0)
    }

    /// True once a session of the database waits for a lock (polled, up to 30 s).
    private static func waitForALockWaiter(_ conninfo: String) -> Bool {
        guard let c = try? PostgresConnection(conninfo) else { return false }
        for _ in 0..<3000 {
            let waiting = try? c.execute("""
                SELECT count(*) AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'
                """)
            if let n = waiting?[0, "n"], n != "0" { return true }
            usleep(10_000)
        }
        return false
    }

    @Test func decrementingMoreThanTheStockIsRefusedAndRolledBack() throws {
        let product = try someProduct()
        try store.write { (t) throws(StorageError) in try t.updateProduct(ProductUpdate(productUID: product.uid, stock: 1)) }
        let error = #expect(throws: StorageError.self) {
            try store.write { (t) throws(StorageError) in
                try t.updateProduct(ProductUpdate(productUID: product.uid, priceMinorUnits: 1))
                try t.decrementStock(productUID: product.uid, by: 2)
            }
        }
        #expect(error?.description == "the stock of \(product.uid) changed while the checkout ran; try again")
        let after = try store.write { (t) throws(StorageError) in try t.catalogProduct(product.uid) }
        #expect(after?.1 == 1 && after?.0.price == product.price, "the whole transaction was rolled back")
    }

    @Test func idempotencyKeysAreUniquePerSession() throws {
        let alice = SessionKey(token: "alice"), bob = SessionKey(token: "bob")
        let answer = IdempotentAnswer(fingerprint: "checkout store-msk-1", field: 7, body: [0, 1, 0x5c, 0x78, 0xff, 0])
        try store.write { (t) throws(StorageError) in try t.saveIdempotentAnswer(session: alice, key: "k1", answer) }
        #expect(try store.write { (t) throws(StorageError) in try t.idempotentAnswer(session: alice, key: "k1") } == answer)
        #expect(try store.write { (t) throws(StorageError) in try t.idempotentAnswer(session: bob, key: "k1") } == nil)
        #expect(throws: StorageError.self) {
            try store.write { (t) throws(StorageError) in
                try t.saveIdempotentAnswer(session: alice, key: "k1", IdempotentAnswer(fingerprint: "other", field: 1, body: []))
            }
        }
        #expect(try store.write { (t) throws(StorageError) in try t.idempotentAnswer(session: alice, key: "k1") } == answer)
        // A savepoint isolates the refused insert; the rest of the transaction commits.
        try store.write { (t) throws(StorageError) in
            try t.savepoint()
            do {
                try t.saveIdempotentAnswer(session: alice, key: "k1", answer)
                Issue.record("a second answer for the same key was taken")
            } catch {
                try t.rollbackToSavepoint()
            }
            try t.saveIdempotentAnswer(session: bob, key: "k1", IdempotentAnswer(fingerprint: "b", field: 2, body: []))
        }
        #expect(try store.write { (t) throws(StorageError) in try t.idempotentAnswer(session: bob, key: "k1") }?.fingerprint == "b")
    }

    @Test func ordersRoundTripWithTheirNumbers() throws {
        let alice = SessionKey(token: "alice"), bob = SessionKey(token: "bob")
        let first = order("store-msk-1", [("p1", 8990, 2), ("p2", 100, 1)], holder: "ALICE")
        let second = order("store-msk-1", [("p3", 5, 3)], holder: "BOB")
        let third = order("store-spb-1", [], holder: "ALICE")
        let placed = try store.write { (t) throws(StorageError) -> [Order] in
            [try t.insertOrder(first, session: alice), try t.insertOrder(second, session: bob), try t.insertOrder(third, session: alice)]
        }
        #expect(placed.map(\.number) == ["G-000001", "G-000002", "G-000003"])
        var expected = [first, third]
        expected[0].number = "G-000001"
        expected[1].number = "G-000003"
        let read = try store.write { (t) throws(StorageError) in try t.orders(session: alice) }
        #expect(read == expected.reversed(), "newest first, lines in order")
        #expect(try store.write { (t) throws(StorageError) in try t.orders(session: bob) }.map(\.number) == ["G-000002"])
        #expect(try store.write { (t) throws(StorageError) in try t.orders(session: SessionKey(token: "nobody")) }.isEmpty)
        // Numbers come from one sequence, whichever host inserts.
        let other = try PostgresCatalogStore(conninfo: db.conninfo)
        #expect(try other.write { (t) throws(StorageError) in try t.insertOrder(second, session: bob) }.number == "G-000004")
    }

    @Test func aListenerHearsTheNewVersionAtCommit() throws {
        let listener = try db.connect()
        try listener.listen(PostgresCatalogStore.notificationChannel)
        let product = try someProduct()
        let version = try store.write { (t) throws(StorageError) -> UInt64 in
            let v = try t.bumpCatalogVersion(touching: [product.uid])
            _ = try t.bumpCatalogVersion(touching: [])
            let early = (try? listener.notifications(timeoutMilliseconds: 200)) ?? [("error", "")]
            #expect(early.isEmpty, "nothing is delivered before the commit")
            return v
        }
        var heard: [(channel: String, payload: String)] = []
        for _ in 0..<10 where heard.count < 2 { heard += try listener.notifications(timeoutMilliseconds: 1000) }
        #expect(heard.map(\.channel) == [PostgresCatalogStore.notificationChannel, PostgresCatalogStore.notificationChannel])
        #expect(heard.map(\.payload) == [String(version), String(version + 1)])
        // A rolled-back bump notifies nobody.
        _ = try? store.write { (t) throws(StorageError) in
            _ = try t.bumpCatalogVersion(touching: [])
            throw StorageError("changed my mind")
        }
        #expect(try listener.notifications(timeoutMilliseconds: 300).isEmpty)
        #expect(try store.catalogVersion() == version + 1)
    }

    @Test func anUnreachableServerIsAReadableUnavailableError() {
        let error = #expect(throws: StorageError.self) {
            try PostgresCatalogStore(conninfo: "host=/nonexistent-groser port=1 dbname=x user=u password=secret-pw")
        }
        #expect(error?.description.hasPrefix("PostgreSQL is unavailable: ") == true, "\(String(describing: error))")
        #expect(error?.isUnavailable == true)
        #expect(error?.description.contains("secret-pw") == false)
    }

    @Test func aURIConninfoGetsItsTimeoutAndWorks() throws {
        // GROSER_TEST_PG's keywords as a URI: the store appends connect_timeout to its query.
        var keywords: [String: String] = [:]
        for pair in db.conninfo.split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { keywords[kv[0]] = kv[1] }
        }
        let host = try #require(keywords["host"]).replacingOccurrences(of: "/", with: "%2F")
        let uri = "postgresql://\(keywords["user"] ?? "postgres")@\(host):\(keywords["port"] ?? "5432")/\(db.name)?application_name=groser-test"
        let viaURI = try PostgresCatalogStore(conninfo: uri)
        #expect(viaURI.conninfo == uri)
        #expect(try viaURI.catalogVersion() == store.catalogVersion())
    }

    @Test func aLostConnectionIsMadeAgain() throws {
        let product = try someProduct()
        #expect(try store.catalogVersion() == 1)
        try db.terminateConnections()
        #expect(try store.catalogVersion() == 1, "a connection lost between calls is made again")
        try db.terminateConnections()
        let v = try store.write { (t) throws(StorageError) in try t.bumpCatalogVersion(touching: [product.uid]) }
        #expect(v == 2)
        try db.terminateConnections()
        #expect(try store.loadCatalog().version == 2)
        // Lost in the middle of a transaction: unavailable, nothing applied, and the next call works.
        let error = #expect(throws: StorageError.self) {
            try store.write { (t) throws(StorageError) in
                try t.updateProduct(ProductUpdate(productUID: product.uid, stock: 3))
                try? db.terminateConnections()
                _ = try t.bumpCatalogVersion(touching: [product.uid])
            }
        }
        #expect(error?.isUnavailable == true && error?.description.hasPrefix("PostgreSQL is unavailable: ") == true,
                "\(String(describing: error))")
        #expect(try store.write { (t) throws(StorageError) in try t.catalogProduct(product.uid) }?.1 == UInt32(100))
        #expect(try store.catalogVersion() == 2)
    }
}

/// Runs an import through `store` in chunks of `chunk` records: its
/// summary, or the problem that refused it, as text.
private func runImport(_ store: any CatalogImporting, replace: Bool = false, chunk: Int = 3, _ records: [CatalogRecord]) throws -> String {
    let session = try store.beginImport(id: 1, replace: replace)
    defer { session.discard() }
    let numbered = records.enumerated().map { NumberedRecord(line: UInt32($0.offset + 1), record: $0.element) }
    do {
        for start in stride(from: 0, to: numbered.count, by: chunk) {
            try session.add(Array(numbered[start..<min(start + chunk, numbered.count)]))
        }
        #expect(session.records == UInt64(numbered.count))
        let s = try session.commit()
        return "version \(s.catalogVersion), \(s.stores) stores, \(s.products) products, \(s.removed) removed"
    } catch {
        return "refused: \(error)"
    }
}

private func product(_ uid: String, shelf: String, name: String, price: Int64, stock: UInt32, barcode: String = "") -> CatalogRecord {
    .product(CatalogProduct(product: Product(uid: uid, name: name, brand: "Бренд", unit: "g", unitSize: 500,
                                             price: Money(minorUnits: price, currency: "RUB"), imageURL: "/img/\(uid).jpg",
                                             outOfStock: stock == 0, oftenOutOfStock: false, shelfUID: shelf),
                            stock: stock, barcode: barcode))
}

/// Catalog import and export into PostgreSQL, each checked against what
/// SQLiteCatalogStore does with the same records.
@Suite("PostgresCatalogStore import and export", .serialized, .enabled(if: testPostgres != nil, "GROSER_TEST_PG is not set: tools/test starts a cluster and sets it"))
struct PostgresCatalogImportTests {
    let db: TestPostgresDatabase
    let store: PostgresCatalogStore
    let dir: TemporaryDirectory
    let sqlite: SQLiteCatalogStore
    let sample = SampleCatalog.make()

    init() throws {
        db = try TestPostgresDatabase()
        store = try PostgresCatalogStore(conninfo: db.conninfo)
        dir = try TemporaryDirectory()
        sqlite = try SQLiteCatalogStore(directory: dir.path)
    }

    private var msk1: Store { sample.stores.first { $0.uid == "store-msk-1" }! }

    @Test func anImportShowsInTheCatalogAsInSQLite() throws {
        let existing = msk1.departments[0].shelves[0].products[0]
        let records: [CatalogRecord] = [
            .city(City(uid: "city-tst", code: "TST", name: "Тестов", stores: [], defaultStoreUID: "store-tst-1")),
            .store(StoreSummary(uid: "store-tst-1", name: "Тест", chain: "Сеть", address: "ул. \"Кавычек\", 1", cityUID: "city-tst")),
            .department(CatalogDepartment(uid: "dep-tst-1", storeUID: "store-tst-1", name: "Молоко")),
            .shelf(CatalogShelf(uid: "shf-tst-1", departmentUID: "dep-tst-1", name: "Кефир, {ряженка}")),
            product("p-tst-2", shelf: "shf-tst-1", name: "Кефир 1%", price: 9_990, stock: 0),
            product("p-tst-1", shelf: "shf-tst-1", name: "Кефир 3,2%", price: 10_990, stock: 5, barcode: "4600000000001"),
            product(existing.uid, shelf: existing.shelfUID, name: existing.name, price: 1, stock: 9),
        ]
        let listener = try db.connect()
        try listener.listen(PostgresCatalogStore.notificationChannel)
        let pg = try runImport(store, records)
        #expect(pg == "version 2, 1 stores, 3 products, 0 removed")
        #expect(pg == (try runImport(sqlite, records)))
        let loaded = try store.loadCatalog()
        #expect(loaded.version == 2)
        #expect(loaded.catalog == (try sqlite.loadCatalog().catalog))
        let shelf = loaded.catalog.stores.first { $0.uid == "store-tst-1" }?.departments.first?.shelves.first
        #expect(shelf?.products.map(\.uid) == ["p-tst-2", "p-tst-1"] && shelf?.products.first?.outOfStock == true)
        #expect(shelf?.products.last?.barcode == "4600000000001")
        // Only the shelves the import wrote to are reported changed.
        #expect(Set(try store.loadChangedShelves(since: 1).shelves.keys) == ["shf-tst-1", existing.shelfUID])
        var heard: [(channel: String, payload: String)] = []
        for _ in 0..<5 where heard.isEmpty { heard = try listener.notifications(timeoutMilliseconds: 1000) }
        #expect(heard.map(\.payload) == ["2"])
    }

    @Test func aReplacingImportRemovesWhatTheFileDoesNotNameAsInSQLite() throws {
        let city = sample.cities.first { $0.uid == "city-msk" }!
        let department = msk1.departments[0], shelf = department.shelves[0]
        var records: [CatalogRecord] = [
            .city(City(uid: city.uid, code: city.code, name: city.name + " (новая)", stores: [], defaultStoreUID: city.defaultStoreUID)),
            .store(msk1.summary),
            .department(CatalogDepartment(uid: department.uid, storeUID: msk1.uid, name: department.name)),
            .shelf(CatalogShelf(uid: shelf.uid, departmentUID: department.uid, name: shelf.name)),
        ]
        for p in shelf.products.prefix(2) { records.append(product(p.uid, shelf: shelf.uid, name: p.name, price: p.price.minorUnits, stock: 3)) }
        let removed = msk1.departments.flatMap { $0.shelves.flatMap(\.products) }.count - 2
        let pg = try runImport(store, replace: true, chunk: 100, records)
        #expect(pg == "version 2, 1 stores, 2 products, \(removed) removed")
        #expect(pg == (try runImport(sqlite, replace: true, chunk: 100, records)))
        let loaded = try store.loadCatalog().catalog
        #expect(loaded == (try sqlite.loadCatalog().catalog))
        #expect(loaded.stores.first { $0.uid == msk1.uid }?.departments.flatMap { $0.shelves.flatMap(\.products) }.count == 2)
        #expect(loaded.stores.filter { $0.uid != msk1.uid } == sample.stores.filter { $0.uid != msk1.uid }, "other stores are untouched")
    }

    @Test(arguments: [
        "a uid twice in the file", "a store of no city", "a store moving city", "a department of no store",
        "a department moving store", "a shelf of no department", "a shelf moving store", "a product of no shelf",
        "a product moving store", "a product twice", "a default store of another city",
    ])
    func aRefusedImportSaysWhatSQLiteSaysAndChangesNothing(_ kind: String) throws {
        let spb1 = sample.stores.first { $0.uid == "store-spb-1" }!
        let mskProduct = msk1.departments[0].shelves[0].products[0]
        let tst = City(uid: "city-tst", code: "TST", name: "Тестов", stores: [], defaultStoreUID: "store-tst-1")
        let records: [CatalogRecord] = switch kind {
        case "a uid twice in the file": [.city(tst), .city(tst)]
        case "a store of no city": [.store(StoreSummary(uid: "store-x", name: "X", chain: "C", address: "A", cityUID: "city-none"))]
        case "a store moving city": [.store(StoreSummary(uid: msk1.uid, name: "X", chain: "C", address: "A", cityUID: "city-spb"))]
        case "a department of no store": [.department(CatalogDepartment(uid: "dep-x", storeUID: "store-none", name: "D"))]
        case "a department moving store": [.department(CatalogDepartment(uid: msk1.departments[0].uid, storeUID: spb1.uid, name: "D"))]
        case "a shelf of no department": [.shelf(CatalogShelf(uid: "shf-x", departmentUID: "dep-none", name: "S"))]
        case "a shelf moving store": [.shelf(CatalogShelf(uid: msk1.departments[0].shelves[0].uid, departmentUID: spb1.departments[0].uid, name: "S"))]
        case "a product of no shelf": [product("p-x", shelf: "shf-none", name: "P", price: 1, stock: 1)]
        case "a product moving store": [product(mskProduct.uid, shelf: spb1.departments[0].shelves[0].uid, name: "P", price: 1, stock: 1)]
        case "a product twice": [product("p-x", shelf: mskProduct.shelfUID, name: "P", price: 1, stock: 1),
                                 product("p-y", shelf: mskProduct.shelfUID, name: "Q", price: 1, stock: 1),
                                 product("p-x", shelf: mskProduct.shelfUID, name: "R", price: 1, stock: 1)]
        default: [.city(City(uid: "city-tst", code: "TST", name: "T", stores: [], defaultStoreUID: msk1.uid))]
        }
        let pg = try runImport(store, chunk: 2, records)
        #expect(pg.hasPrefix("refused: line "), "\(pg)")
        #expect(pg == (try runImport(sqlite, chunk: 2, records)))
        #expect(try store.loadCatalog().catalog == sample)
        #expect(try store.catalogVersion() == 1)
    }

    @Test(arguments: [("", 997), ("", 10_000), ("store-spb-1", 100)])
    func theExportPagesAreSQLitesPages(storeUID: String, limit: Int) throws {
        var cursors: (ExportCursor?, ExportCursor?) = (nil, nil)
        var pages = 0
        repeat {
            let pg = try store.exportPage(storeUID: storeUID, from: cursors.0, limit: limit)
            let lite = try sqlite.exportPage(storeUID: storeUID, from: cursors.1, limit: limit)
            #expect(pg.records == lite.records && pg.next == lite.next && pg.version == lite.version, "page \(pages)")
            #expect(pg.records.count <= limit)
            cursors = (pg.next, lite.next)
            pages += 1
        } while cursors.0 != nil && pages < 1000
        #expect(pages > 1 || limit == 10_000)
    }

    @Test func exportingAnUnknownStoreOrAfterAChangeIsRefused() throws {
        let unknown = #expect(throws: StorageError.self) { try store.exportPage(storeUID: "store-none", from: nil, limit: 10) }
        #expect(unknown?.description == "no store has the uid \"store-none\"")
        let first = try store.exportPage(storeUID: "", from: nil, limit: 10)
        _ = try store.write { (t) throws(StorageError) in try t.bumpCatalogVersion(touching: []) }
        let changed = #expect(throws: StorageError.self) { try store.exportPage(storeUID: "", from: first.next, limit: 10) }
        #expect(changed?.description == "the catalog changed (version 1 → 2) since the export began; start it again")
    }
}
