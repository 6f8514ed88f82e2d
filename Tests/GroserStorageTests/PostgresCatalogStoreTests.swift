import Foundation
import GroserStorage
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
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            do {
                try hosts[i].write { (t) throws(StorageError) in
                    guard let p = try t.product(product.uid), p.stock >= 1 else { throw StorageError("out of stock") }
                    // Hold the row a moment, so the other host's checkout runs meanwhile.
                    usleep(100_000)
                    try t.decrementStock(productUID: product.uid, by: 1)
                }
                outcomes.append("sold")
            } catch {
                outcomes.append("\(error)")
            }
        }
        #expect(outcomes.values.sorted() == ["out of stock", "sold"])
        #expect(try stock(db.connect(), product.uid) == 0)
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
