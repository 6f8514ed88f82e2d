import CPostgres
import GroserSystem
import GroserWire

/// The shared store: the catalog, orders and checkout's idempotency answers
/// in one PostgreSQL database that several groserd hosts use at once. On
/// first open of an empty database it creates the schema and loads the
/// sample catalog, once across hosts (under an advisory lock).
///
/// One connection, used a call at a time (a lock): catalog loads, and
/// `write`'s transactions. A connection found lost at the start of a call
/// is made again once; when PostgreSQL cannot be reached the error is
/// `isUnavailable` and says "PostgreSQL is unavailable: …".
public final class PostgresCatalogStore: CatalogStore, CommerceStore, @unchecked Sendable {
    // @unchecked: the connection is only used inside `connection.withLock`.

    /// The conninfo (keywords or a postgres:// URI) the store was opened with.
    public let conninfo: String
    /// The channel `bumpCatalogVersion` notifies, with the new version as
    /// its payload, when its transaction commits.
    public static let notificationChannel = "groser_catalog"

    /// `conninfo` with a connect timeout, so that an unreachable server
    /// fails a call instead of hanging it.
    let connectInfo: String
    /// Nil after the connection was found lost: the next call reconnects.
    private let connection: Locked<PostgresConnection?>
    /// Told of each call's first round trip (timed: `start` in
    /// `withConnection`), of failures and of reconnects, for Stats.
    public let health: StoreHealth

    /// Connects, migrates the schema (PostgresSchema) and, when
    /// `seedSampleCatalog` and the database has no city, loads
    /// `SampleCatalog.make()`.
    public init(conninfo: String, seedSampleCatalog: Bool = true,
                health: StoreHealth = StoreHealth(.postgresql)) throws(StorageError) {
        self.conninfo = conninfo
        self.health = health
        connectInfo = Self.withConnectionDefaults(conninfo)
        let c = try Self.connect(connectInfo)
        try PostgresSchema.withMigrationLock(c) { () throws(StorageError) in
            try PostgresSchema.migrate(c)
            if seedSampleCatalog, try Self.isEmpty(c) {
                try Self.insert(SampleCatalog.make(), into: c)
            }
        }
        connection = Locked(c)
    }

    /// What groserd adds to a conninfo that does not set it: a connection
    /// attempt gives up after 5 s, and over TCP a peer that vanished
    /// without closing (a host lost, a network cut) is noticed within about
    /// a minute (keepalives after 30 s idle, every 10 s, 3 unanswered), and
    /// a write it never acknowledges fails after 60 s, instead of holding a
    /// batch until the kernel gives up (minutes to hours). Unix sockets
    /// ignore the TCP settings.
    static let connectionDefaults: [(keyword: String, value: String)] = [
        ("connect_timeout", "5"), ("keepalives_idle", "30"), ("keepalives_interval", "10"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "60000"),
    ]

    /// `conninfo` with `connectionDefaults` added where it sets none of
    /// them: as keywords, or as URI query parameters.
    public static func withConnectionDefaults(_ conninfo: String) -> String {
        var error: UnsafeMutablePointer<CChar>?
        var given: Set<String> = []
        if let options = PQconninfoParse(conninfo, &error) {
            defer { PQconninfoFree(options) }
            var o = options
            while let keyword = o.pointee.keyword {
                if o.pointee.val != nil { given.insert(String(cString: keyword)) }
                o += 1
            }
        } else {
            // Not a conninfo libpq can read: connecting will say why.
            if let error { PQfreemem(error) }
            return conninfo
        }
        let missing = connectionDefaults.filter { !given.contains($0.keyword) }.map { "\($0.keyword)=\($0.value)" }
        guard !missing.isEmpty else { return conninfo }
        if conninfo.hasPrefix("postgres://") || conninfo.hasPrefix("postgresql://") {
            return conninfo + (conninfo.contains("?") ? "&" : "?") + missing.joined(separator: "&")
        }
        return conninfo + (conninfo.isEmpty ? "" : " ") + missing.joined(separator: " ")
    }

    private static func connect(_ conninfo: String) throws(StorageError) -> PostgresConnection {
        try postgres { () throws(PostgresError) in try PostgresConnection(conninfo) }
    }

    /// Runs `start` then `body` on the store's connection, holding its lock.
    /// `start` sends the call's first statement (a BEGIN, or a lone query):
    /// when it finds the connection lost (PostgreSQL restarted, a network
    /// cut) nothing has happened yet, so the store connects again, once, and
    /// repeats it. A connection lost later is dropped, and the error is
    /// `isUnavailable`; the next call reconnects. When `body` throws inside
    /// a transaction, the transaction is rolled back.
    ///
    /// `health` hears of it: `start`'s round trip is timed (Stats'
    /// `store_round_trip`: the follower's version read each second is one),
    /// a connection made again is a reconnect (the store connected first in
    /// `init`), and an `isUnavailable` error a failure.
    func withConnection<S, T>(
        start: (PostgresConnection) throws(PostgresError) -> S,
        _ body: (PostgresConnection, S) throws(StorageError) -> T
    ) throws(StorageError) -> T {
        do throws(StorageError) {
            return try connection.withLock { (slot: inout PostgresConnection?) throws(StorageError) -> T in
                let reused = slot != nil
                var c: PostgresConnection
                if let open = slot { c = open } else { c = try reconnect() }
                slot = c
                var sent = monotonicNanoseconds()
                let started: S
                do throws(PostgresError) {
                    started = try start(c)
                } catch {
                    guard reused, error.isConnectionFailure else { throw Self.end(c, &slot, StorageError(error)) }
                    c.close()
                    slot = nil
                    c = try reconnect()
                    slot = c
                    sent = monotonicNanoseconds()
                    do throws(PostgresError) {
                        started = try start(c)
                    } catch {
                        throw Self.end(c, &slot, StorageError(error))
                    }
                }
                health.roundTrip(nanoseconds: monotonicNanoseconds() &- sent)
                do throws(StorageError) {
                    return try body(c, started)
                } catch {
                    throw Self.end(c, &slot, error)
                }
            }
        } catch {
            if error.isUnavailable { health.failed(Self.reason(error)) }
            throw error
        }
    }

    /// A connection made again after the last one was lost.
    private func reconnect() throws(StorageError) -> PostgresConnection {
        let c = try Self.connect(connectInfo)
        health.reconnected()
        return c
    }

    /// A failure's reason for Stats, without the "PostgreSQL is unavailable: " all of them start with.
    static func reason(_ error: StorageError) -> String {
        let prefix = "PostgreSQL is unavailable: "
        return error.description.hasPrefix(prefix) ? String(error.description.dropFirst(prefix.count)) : error.description
    }

    /// After `error`: drops a lost connection, rolls back an open
    /// transaction, and returns the error to throw.
    private static func end(_ c: PostgresConnection, _ slot: inout PostgresConnection?, _ error: StorageError) -> StorageError {
        if c.isBroken || error.isUnavailable {
            c.close()
            slot = nil
            if !error.isUnavailable {
                return StorageError("PostgreSQL is unavailable: the connection was lost (\(error))", kind: .unavailable)
            }
        } else if c.isInTransaction {
            try? c.executeScript("ROLLBACK")
        }
        return error
    }

    // MARK: Seeding

    private static func isEmpty(_ c: PostgresConnection) throws(StorageError) -> Bool {
        try postgres { () throws(PostgresError) in
            try c.execute("SELECT EXISTS (SELECT 1 FROM cities) AS any")[0, "any"] == "f"
        }
    }

    /// The stock a sample product starts with when it is in stock.
    static let sampleStock: Int64 = SQLiteCatalogStore.sampleStock

    /// Inserts `catalog` in one transaction and one round trip: a statement
    /// per table, its rows as arrays (unnest).
    static func insert(_ catalog: Catalog, into c: PostgresConnection) throws(StorageError) {
        var stores: [[String]] = Array(repeating: [], count: 6)
        var departments: [[String]] = Array(repeating: [], count: 4)
        var shelves: [[String]] = Array(repeating: [], count: 4)
        var products: [[String]] = Array(repeating: [], count: 12)
        for (si, s) in catalog.stores.enumerated() {
            let sum = s.summary
            for (i, v) in [sum.uid, sum.cityUID, String(si), sum.name, sum.chain, sum.address].enumerated() { stores[i].append(v) }
            for (di, d) in s.departments.enumerated() {
                for (i, v) in [d.uid, s.uid, String(di), d.name].enumerated() { departments[i].append(v) }
                for (hi, h) in d.shelves.enumerated() {
                    for (i, v) in [h.uid, d.uid, String(hi), h.name].enumerated() { shelves[i].append(v) }
                    for p in h.products {
                        let row = [p.uid, h.uid, p.name, p.brand, p.unit, String(p.unitSize), String(p.price.minorUnits),
                                   p.price.currency, p.imageURL, String(p.outOfStock ? 0 : sampleStock),
                                   p.oftenOutOfStock ? "t" : "f", p.barcode]
                        for (i, v) in row.enumerated() { products[i].append(v) }
                    }
                }
            }
        }
        let cities = [catalog.cities.map(\.uid), catalog.cities.map(\.code), catalog.cities.map(\.name), catalog.cities.map(\.defaultStoreUID)]
        let statements = [
            PostgresStatement("""
                INSERT INTO cities(uid, code, name, default_store_uid)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                """, cities.map { PostgresText.array($0) }),
            PostgresStatement("""
                INSERT INTO stores(uid, city_uid, position, name, chain, address)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[])
                """, stores.map { PostgresText.array($0) }),
            PostgresStatement("""
                INSERT INTO departments(uid, store_uid, position, name)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[])
                """, departments.map { PostgresText.array($0) }),
            PostgresStatement("""
                INSERT INTO shelves(uid, department_uid, position, name)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[])
                """, shelves.map { PostgresText.array($0) }),
            PostgresStatement("""
                INSERT INTO products(uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                                     stock, often_out_of_stock, barcode)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[],
                                         $7::bigint[], $8::text[], $9::text[], $10::bigint[], $11::boolean[], $12::text[])
                """, products.map { PostgresText.array($0) }),
        ]
        try postgres { () throws(PostgresError) in _ = try c.batch(statements) }
    }

    // MARK: Reading the catalog

    /// The columns `product(_:)` reads, in its order.
    static let productColumns = """
        p.uid, p.shelf_uid, p.name, p.brand, p.unit, p.unit_size, p.price_minor, p.currency, p.image_url,
        p.stock, p.often_out_of_stock, p.barcode
        """

    /// A product from a row of `productColumns`.
    static func product(_ r: [String?]) -> Product {
        Product(uid: r[0] ?? "", name: r[2] ?? "", brand: r[3] ?? "", unit: r[4] ?? "",
                unitSize: UInt32(clamping: Int64(r[5] ?? "") ?? 0),
                price: Money(minorUnits: Int64(r[6] ?? "") ?? 0, currency: r[7] ?? ""),
                imageURL: r[8] ?? "", outOfStock: stock(r) == 0, oftenOutOfStock: r[10] == "t",
                shelfUID: r[1] ?? "", barcode: r[11] ?? "")
    }

    /// The stock of a row of `productColumns`.
    static func stock(_ r: [String?]) -> UInt32 { UInt32(clamping: Int64(r[9] ?? "") ?? 0) }

    static let snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    static let versionQuery = "SELECT value FROM meta WHERE key = 'catalog_version'"

    static func version(_ rows: PostgresRows) throws(StorageError) -> UInt64 {
        guard let v = rows.rows.first?[0].flatMap({ UInt64($0) }) else { throw StorageError("the database has no catalog version") }
        return v
    }

    public func catalogVersion() throws(StorageError) -> UInt64 {
        try withConnection(start: { (c) throws(PostgresError) in try c.execute(Self.versionQuery) }) { (_, rows) throws(StorageError) in
            try Self.version(rows)
        }
    }

    public func loadChangedShelves(since version: UInt64) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]]) {
        try withConnection(start: { (c) throws(PostgresError) in try c.executeScript(Self.snapshot) }) {
            (c, _) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]]) in
            let results = try postgres { () throws(PostgresError) in
                try c.batch([
                    PostgresStatement(Self.versionQuery),
                    PostgresStatement("""
                        SELECT \(Self.productColumns) FROM products p
                        WHERE p.shelf_uid IN (SELECT shelf_uid FROM products WHERE changed_version > $1)
                        ORDER BY p.shelf_uid, p.name, p.uid
                        """, [String(version)]),
                ])
            }
            try postgres { () throws(PostgresError) in try c.executeScript("COMMIT") }
            var shelves: [String: [Product]] = [:]
            for r in results[1].rows {
                let p = Self.product(r)
                shelves[p.shelfUID, default: []].append(p)
            }
            return (try Self.version(results[0]), shelves)
        }
    }

    public func loadCatalog(_ visit: (CatalogPart) throws(StorageError) -> Void) throws(StorageError) {
        try withConnection(start: { (c) throws(PostgresError) in try c.executeScript(Self.snapshot) }) { (c, _) throws(StorageError) in
            let top = try postgres { () throws(PostgresError) in
                try c.batch([
                    PostgresStatement(Self.versionQuery),
                    PostgresStatement("SELECT uid, city_uid, name, chain, address FROM stores ORDER BY position, uid"),
                    PostgresStatement("SELECT uid, code, name, default_store_uid FROM cities ORDER BY code"),
                ])
            }
            let version = try Self.version(top[0])
            var summaries: [StoreSummary] = []
            var summariesByCity: [String: [StoreSummary]] = [:]
            for r in top[1].rows {
                let s = StoreSummary(uid: r[0] ?? "", name: r[2] ?? "", chain: r[3] ?? "", address: r[4] ?? "", cityUID: r[1] ?? "")
                summaries.append(s)
                summariesByCity[s.cityUID, default: []].append(s)
            }
            let cities = top[2].rows.map { r in
                City(uid: r[0] ?? "", code: r[1] ?? "", name: r[2] ?? "", stores: summariesByCity[r[0] ?? ""] ?? [],
                     defaultStoreUID: r[3] ?? "")
            }
            try visit(.cities(cities, version: version))
            // A round trip a store: its departments, shelves and products.
            for summary in summaries {
                let parts = try postgres { () throws(PostgresError) in
                    try c.batch([
                        PostgresStatement("SELECT uid, name FROM departments WHERE store_uid = $1 ORDER BY position, uid", [summary.uid]),
                        PostgresStatement("""
                            SELECT h.uid, h.department_uid, h.name FROM shelves h
                            JOIN departments d ON d.uid = h.department_uid
                            WHERE d.store_uid = $1 ORDER BY h.position, h.uid
                            """, [summary.uid]),
                        PostgresStatement("""
                            SELECT \(Self.productColumns) FROM products p
                            JOIN shelves h ON h.uid = p.shelf_uid JOIN departments d ON d.uid = h.department_uid
                            WHERE d.store_uid = $1 ORDER BY p.name, p.uid
                            """, [summary.uid]),
                    ])
                }
                var products: [String: [Product]] = [:]
                for r in parts[2].rows {
                    let p = Self.product(r)
                    products[p.shelfUID, default: []].append(p)
                }
                var shelves: [String: [Shelf]] = [:]
                for r in parts[1].rows {
                    let (uid, department) = (r[0] ?? "", r[1] ?? "")
                    let onShelf = products[uid] ?? []
                    shelves[department, default: []].append(
                        Shelf(uid: uid, name: r[2] ?? "", productCount: UInt32(onShelf.count), products: onShelf))
                }
                let departments = parts[0].rows.map { r in
                    Department(uid: r[0] ?? "", name: r[1] ?? "", shelves: shelves[r[0] ?? ""] ?? [])
                }
                try visit(.store(Store(summary: summary, departments: departments)))
            }
            try postgres { () throws(PostgresError) in try c.executeScript("COMMIT") }
        }
    }

    // MARK: Writing

    /// Runs `body` in one transaction on the store's connection (READ
    /// COMMITTED; checkout's reads of a product lock its row) and commits
    /// it; rolls back when `body` throws. A connection lost during COMMIT
    /// leaves the outcome unknown: the error is `isUnavailable`.
    /// A product as carts need it, with its shelf (as SQLiteCatalogStore's
    /// `productFacts`): read outside any write transaction, without a lock.
    public func productFacts(_ uid: String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)? {
        try withConnection(start: { (c) throws(PostgresError) in
            try c.execute("""
                SELECT p.uid, d.store_uid, p.name, p.price_minor, p.currency, p.stock, p.shelf_uid FROM products p
                JOIN shelves h ON h.uid = p.shelf_uid JOIN departments d ON d.uid = h.department_uid
                WHERE p.uid = $1
                """, [uid])
        }) { (_, rows) throws(StorageError) -> (product: ProductRecord, shelfUID: String)? in
            guard let r = rows.rows.first else { return nil }
            return (ProductRecord(uid: r[0] ?? "", storeUID: r[1] ?? "", name: r[2] ?? "",
                                  price: Money(minorUnits: Int64(r[3] ?? "") ?? 0, currency: r[4] ?? ""),
                                  stock: UInt32(clamping: Int64(r[5] ?? "") ?? 0)),
                    r[6] ?? "")
        }
    }

    public func write<T>(_ body: (any CommerceTransaction) throws(StorageError) -> T) throws(StorageError) -> T {
        try withConnection(start: { (c) throws(PostgresError) in try c.executeScript("BEGIN") }) { (c, _) throws(StorageError) -> T in
            let result = try body(PostgresCommerceTransaction(connection: c))
            try postgres { () throws(PostgresError) in try c.executeScript("COMMIT") }
            return result
        }
    }
}
