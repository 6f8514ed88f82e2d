import GroserSystem
import GroserWire
import Synchronization

/// The embedded store: one SQLite database file in WAL mode. On first open
/// of an empty database it creates the schema and loads the built-in sample
/// catalog in one transaction.
public final class SQLiteCatalogStore: CatalogStore {
    /// The database file's name inside the data directory.
    public static let fileName = "groser.sqlite3"
    static let schemaVersion: Int64 = 4

    let connection: SerializedConnection
    /// The database file's path.
    public let path: String

    /// Opens (creating when missing) the database at `path`.
    /// - Parameter seedSampleCatalog: load the sample catalog into an empty database.
    public init(path: String, seedSampleCatalog: Bool = true) throws(StorageError) {
        self.path = path
        // The database holds addresses, order details and session keys: it
        // is created 0600 (SQLite gives its -wal and -shm files the same
        // mode), and files of an older groserd are narrowed to 0600.
        if !Files.exists(path) {
            do { try Files.createIfMissing(path, mode: 0o600) } catch {
                throw StorageError("cannot create the database \(path): \(error)")
            }
        }
        // SQLite would open a file it cannot write read-only, and every
        // later write would fail: refuse now, with the reason.
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        for (what, file) in [("database", path), ("data directory", directory.isEmpty ? "/" : directory)] {
            if let denial = Files.writeDenial(file) {
                throw StorageError("the \(what) \(file) cannot be written (\(denial)); groserd needs to write it: check its mode, owner and file system")
            }
        }
        let db = try SQLiteConnection(path: path)
        // WAL with synchronous=FULL: a commit is on disk before it returns,
        // so an acknowledged write survives a crash of the daemon.
        try db.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
        try Self.migrate(db)
        if seedSampleCatalog, try Self.isEmpty(db) {
            try Self.insert(SampleCatalog.make(), into: db)
        }
        try db.checkWritable(path)
        for file in Self.files(of: path) where Files.exists(file) {
            do {
                if try Files.mode(file) & 0o077 != 0 { try Files.changeMode(file, to: 0o600) }
            } catch {
                throw StorageError("cannot make \(file) private (mode 0600): \(error)")
            }
        }
        guard let identity = Files.identity(path) else {
            throw StorageError("the database \(path) vanished as it was opened")
        }
        self.identity = identity
        connection = SerializedConnection(db)
    }

    /// The database file and the files SQLite keeps beside it.
    public static func files(of path: String) -> [String] { [path, path + "-wal", path + "-shm", path + "-journal"] }

    /// The file opened at start. When `path` names another file (or none),
    /// the database was deleted or replaced while groserd ran: writes to the
    /// open file would be lost at the next start, so none is taken.
    let identity: FileIdentity
    let lost = Atomic<Bool>(false)

    /// Throws, from the first time it is noticed on, when the database file
    /// is no longer the one opened.
    func checkStillInPlace() throws(StorageError) {
        if !lost.load(ordering: .relaxed) {
            guard Files.identity(path) != identity else { return }
            lost.store(true, ordering: .relaxed)
        }
        throw StorageError("the database file \(path) was deleted or replaced while groserd ran; "
                           + "groserd takes no more writes (a restart opens the file that is there now)")
    }

    /// Opens `groser.sqlite3` in `directory`.
    public convenience init(directory: String, seedSampleCatalog: Bool = true) throws(StorageError) {
        try self.init(path: directory + "/" + Self.fileName, seedSampleCatalog: seedSampleCatalog)
    }

    /// Brings the schema to `schemaVersion`, one step at a time, each in a transaction.
    private static func migrate(_ db: SQLiteConnection) throws(StorageError) {
        let stmt = try db.prepare("PRAGMA user_version")
        _ = try stmt.step()
        var version = stmt.int(0)
        // A statement left mid-run would keep DROP TABLE from running.
        stmt.reset()
        guard version <= schemaVersion else {
            throw StorageError("the database has schema version \(version), newer than this groserd's \(schemaVersion)")
        }
        while version < schemaVersion {
            let from = version
            try db.transaction { () throws(StorageError) in
                switch from {
                case 0: try createCatalogTables(db)
                case 1: try migrateToCommerce(db)
                case 2: try migrateToHashedSessions(db)
                case 3:
                    // The catalog version at which each product last changed,
                    // so a change re-encodes only the shelves it touched.
                    try db.execute("""
                        ALTER TABLE products ADD COLUMN changed_version INTEGER NOT NULL DEFAULT 0;
                        CREATE INDEX products_by_change ON products(changed_version);
                        ALTER TABLE products ADD COLUMN barcode TEXT NOT NULL DEFAULT '';
                        CREATE INDEX departments_by_store ON departments(store_uid, position);
                        CREATE INDEX shelves_by_department ON shelves(department_uid, position);
                        """)
                default: break
                }
                try db.execute("PRAGMA user_version = \(from + 1)")
            }
            version += 1
        }
    }

    private static func createCatalogTables(_ db: SQLiteConnection) throws(StorageError) {
        try db.execute(SharedSchema.catalog(.sqlite) + """
        CREATE TABLE products(
            uid TEXT PRIMARY KEY, shelf_uid TEXT NOT NULL REFERENCES shelves(uid),
            name TEXT NOT NULL, brand TEXT NOT NULL, unit TEXT NOT NULL, unit_size INTEGER NOT NULL,
            price_minor INTEGER NOT NULL CHECK (price_minor >= 0), currency TEXT NOT NULL,
            image_url TEXT NOT NULL, stock INTEGER NOT NULL CHECK (stock >= 0),
            often_out_of_stock INTEGER NOT NULL);
        CREATE INDEX products_by_shelf ON products(shelf_uid, name);
        """)
    }

    private static func isEmpty(_ db: SQLiteConnection) throws(StorageError) -> Bool {
        let stmt = try db.prepare("SELECT count(*) FROM cities")
        _ = try stmt.step()
        return stmt.int(0) == 0
    }

    /// The stock a sample product starts with when it is in stock.
    static let sampleStock: Int64 = 100

    static func insert(_ catalog: Catalog, into db: SQLiteConnection) throws(StorageError) {
        try db.transaction { () throws(StorageError) in
            let city = try db.prepare("INSERT INTO cities VALUES (?, ?, ?, ?)")
            for c in catalog.cities {
                try city.bind(.text(c.uid), .text(c.code), .text(c.name), .text(c.defaultStoreUID)).run()
            }
            let store = try db.prepare("INSERT INTO stores VALUES (?, ?, ?, ?, ?, ?)")
            let dept = try db.prepare("INSERT INTO departments VALUES (?, ?, ?, ?)")
            let shelf = try db.prepare("INSERT INTO shelves VALUES (?, ?, ?, ?)")
            let product = try db.prepare("""
                INSERT INTO products(uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                                     stock, often_out_of_stock) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for (si, s) in catalog.stores.enumerated() {
                let sum = s.summary
                try store.bind(.text(sum.uid), .text(sum.cityUID), .integer(Int64(si)), .text(sum.name),
                               .text(sum.chain), .text(sum.address)).run()
                for (di, d) in s.departments.enumerated() {
                    try dept.bind(.text(d.uid), .text(s.uid), .integer(Int64(di)), .text(d.name)).run()
                    for (hi, h) in d.shelves.enumerated() {
                        try shelf.bind(.text(h.uid), .text(d.uid), .integer(Int64(hi)), .text(h.name)).run()
                        for p in h.products {
                            try product.bind(
                                .text(p.uid), .text(h.uid), .text(p.name), .text(p.brand), .text(p.unit),
                                .integer(Int64(p.unitSize)), .integer(p.price.minorUnits), .text(p.price.currency),
                                .text(p.imageURL), .integer(p.outOfStock ? 0 : sampleStock),
                                .integer(p.oftenOutOfStock ? 1 : 0)
                            ).run()
                        }
                    }
                }
            }
        }
    }

    /// A product from a row of `uid, shelf_uid, name, brand, unit, unit_size,
    /// price_minor, currency, image_url, stock, often_out_of_stock, barcode`.
    static func product(_ p: SQLiteStatement) -> Product {
        Product(uid: p.text(0), name: p.text(2), brand: p.text(3), unit: p.text(4),
                unitSize: UInt32(clamping: p.int(5)), price: Money(minorUnits: p.int(6), currency: p.text(7)),
                imageURL: p.text(8), outOfStock: p.int(9) == 0, oftenOutOfStock: p.int(10) != 0,
                shelfUID: p.text(1), barcode: p.text(11))
    }

    /// The catalog version `db` holds.
    static func version(_ db: SQLiteConnection) throws(StorageError) -> UInt64 {
        let v = try db.cached("SELECT value FROM meta WHERE key = 'catalog_version'")
        defer { v.reset() }
        guard try v.step() else { throw StorageError("the database has no catalog version") }
        return UInt64(v.int(0))
    }

    /// Runs `body` in one read transaction on `db`, given the catalog
    /// version it reads at; the cached statements are reset after it.
    static func reading<T>(_ db: SQLiteConnection, _ body: (UInt64) throws(StorageError) -> T) throws(StorageError) -> T {
        try db.execute("BEGIN")
        defer {
            db.resetCached()
            try? db.execute("COMMIT")
        }
        return try body(try version(db))
    }

    public func catalogVersion() throws(StorageError) -> UInt64 {
        try connection.withLock { (db) throws(StorageError) -> UInt64 in try Self.version(db) }
    }

    public func loadChangedShelves(since version: UInt64) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]]) {
        try connection.withLock { (db) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]]) in
            try Self.reading(db) { (now) throws(StorageError) -> (version: UInt64, shelves: [String: [Product]]) in
                // The changed products by their index, then each shelf by its
                // own. Left to itself SQLite answered DISTINCT shelf_uid by walking
                // products_by_shelf over every product (docs/BENCHMARKS.md,
                // tools/bench-scale).
                let changed = try db.cached("SELECT shelf_uid FROM products INDEXED BY products_by_change WHERE changed_version > ?")
                    .bind(.integer(Int64(version)))
                var uids: [String] = []
                var seen: Set<String> = []
                while try changed.step() {
                    let uid = changed.text(0)
                    if seen.insert(uid).inserted { uids.append(uid) }
                }
                let p = try db.cached("""
                    SELECT uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                           stock, often_out_of_stock, barcode FROM products WHERE shelf_uid = ?
                    """)
                var shelves: [String: [Product]] = [:]
                for uid in uids {
                    p.bind(.text(uid))
                    var products: [Product] = []
                    while try p.step() { products.append(Self.product(p)) }
                    shelves[uid] = products
                }
                return (now, shelves)
            }
        }
    }

    public func loadCatalog(_ visit: (CatalogPart) throws(StorageError) -> Void) throws(StorageError) {
        try connection.withLock { (db) throws(StorageError) in
            try Self.reading(db) { (version) throws(StorageError) in
                var summaries: [StoreSummary] = []
                var summariesByCity: [String: [StoreSummary]] = [:]
                let s = try db.prepare("SELECT uid, city_uid, name, chain, address FROM stores ORDER BY position")
                while try s.step() {
                    let summary = StoreSummary(uid: s.text(0), name: s.text(2), chain: s.text(3), address: s.text(4), cityUID: s.text(1))
                    summaries.append(summary)
                    summariesByCity[summary.cityUID, default: []].append(summary)
                }
                var cities: [City] = []
                let c = try db.prepare("SELECT uid, code, name, default_store_uid FROM cities ORDER BY code")
                while try c.step() {
                    cities.append(City(uid: c.text(0), code: c.text(1), name: c.text(2),
                                       stores: summariesByCity[c.text(0)] ?? [], defaultStoreUID: c.text(3)))
                }
                try visit(.cities(cities, version: version))
                let d = try db.prepare("SELECT uid, name FROM departments WHERE store_uid = ? ORDER BY position")
                let h = try db.prepare("SELECT uid, name FROM shelves WHERE department_uid = ? ORDER BY position")
                let p = try db.prepare("""
                    SELECT uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                           stock, often_out_of_stock, barcode FROM products WHERE shelf_uid = ? ORDER BY name
                    """)
                for summary in summaries {
                    var departments: [Department] = []
                    d.bind(.text(summary.uid))
                    var departmentRows: [(String, String)] = []
                    while try d.step() { departmentRows.append((d.text(0), d.text(1))) }
                    for (duid, dname) in departmentRows {
                        var shelves: [Shelf] = []
                        h.bind(.text(duid))
                        var shelfRows: [(String, String)] = []
                        while try h.step() { shelfRows.append((h.text(0), h.text(1))) }
                        for (huid, hname) in shelfRows {
                            var products: [Product] = []
                            p.bind(.text(huid))
                            while try p.step() { products.append(Self.product(p)) }
                            shelves.append(Shelf(uid: huid, name: hname, productCount: UInt32(products.count), products: products))
                        }
                        departments.append(Department(uid: duid, name: dname, shelves: shelves))
                    }
                    try visit(.store(Store(summary: summary, departments: departments)))
                }
            }
        }
    }
}
