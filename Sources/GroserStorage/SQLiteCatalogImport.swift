import GroserSystem
import GroserWire

/// One catalog import (docs/CATALOG.md §7): records are checked as they
/// arrive and staged in a file of their own, so the live database is not
/// touched, nor locked, until `commit` applies them all in one transaction.
/// A refused record, an abort or a failed commit leaves the catalog as it
/// was. Value rules (lengths, characters, units) are the caller's; what
/// needs the data (uniqueness, references, ownership) CatalogImportValidator
/// checks.
public final class SQLiteCatalogImport {
    public let id: UInt64
    public let replace: Bool
    private let stagingPath: String
    private let mainPath: String
    private let staging: SQLiteConnection
    /// Reads the staging file and (never writing) the live catalog for the
    /// validator.
    private let lookup: Lookup
    public private(set) var records: UInt64 = 0
    private var position: Int64 = 0

    public init(store: SQLiteCatalogStore, id: UInt64, replace: Bool) throws(StorageError) {
        self.id = id
        self.replace = replace
        mainPath = store.path
        let directory = store.path.lastIndex(of: "/").map { String(store.path[..<$0]) } ?? "."
        stagingPath = directory + "/import-\(id).sqlite3"
        for f in SQLiteCatalogStore.files(of: stagingPath) { try? Files.remove(f) }
        do { try Files.createIfMissing(stagingPath, mode: 0o600) } catch {
            throw StorageError("cannot create the import's staging file \(stagingPath): \(error)")
        }
        staging = try SQLiteConnection(path: stagingPath)
        lookup = Lookup(staging: staging, live: try SQLiteConnection(path: store.path))
        try staging.execute("""
            PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
            CREATE TABLE cities(uid TEXT PRIMARY KEY, code TEXT NOT NULL, name TEXT NOT NULL,
                default_store_uid TEXT NOT NULL, line INTEGER NOT NULL);
            CREATE TABLE stores(uid TEXT PRIMARY KEY, city_uid TEXT NOT NULL, name TEXT NOT NULL, chain TEXT NOT NULL,
                address TEXT NOT NULL, line INTEGER NOT NULL, pos INTEGER NOT NULL);
            CREATE TABLE departments(uid TEXT PRIMARY KEY, store_uid TEXT NOT NULL, name TEXT NOT NULL,
                line INTEGER NOT NULL, pos INTEGER NOT NULL);
            CREATE TABLE shelves(uid TEXT PRIMARY KEY, department_uid TEXT NOT NULL, store_uid TEXT NOT NULL,
                name TEXT NOT NULL, line INTEGER NOT NULL, pos INTEGER NOT NULL);
            CREATE TABLE products(uid TEXT PRIMARY KEY, shelf_uid TEXT NOT NULL, store_uid TEXT NOT NULL,
                name TEXT NOT NULL, brand TEXT NOT NULL, unit TEXT NOT NULL, unit_size INTEGER NOT NULL,
                price_minor INTEGER NOT NULL, currency TEXT NOT NULL, image_url TEXT NOT NULL, stock INTEGER NOT NULL,
                often_out_of_stock INTEGER NOT NULL, barcode TEXT NOT NULL, line INTEGER NOT NULL);
            BEGIN;
            """)
    }

    deinit { discard() }

    /// Removes the staging file; the import is over.
    public func discard() {
        for f in SQLiteCatalogStore.files(of: stagingPath) { try? Files.remove(f) }
    }

    // MARK: Records

    /// Stages one record, or refuses it with its line.
    public func add(_ r: NumberedRecord) throws(ImportProblem) {
        do {
            try stage(r)
        } catch let problem as ImportProblem {
            throw problem
        } catch {
            throw ImportProblem(line: r.line, "the import could not be staged: \(error)")
        }
        records += 1
    }

    private func stage(_ r: NumberedRecord) throws {
        position += 1
        let owner = try CatalogImportValidator.check(r, lookup)
        let line = Int64(r.line)
        switch r.record {
        case .city(let c):
            try staging.cached("INSERT INTO cities VALUES (?, ?, ?, ?, ?)")
                .bind(.text(c.uid), .text(c.code), .text(c.name), .text(c.defaultStoreUID), .integer(line)).run()
        case .store(let s):
            try staging.cached("INSERT INTO stores VALUES (?, ?, ?, ?, ?, ?, ?)")
                .bind(.text(s.uid), .text(s.cityUID), .text(s.name), .text(s.chain), .text(s.address), .integer(line), .integer(position)).run()
        case .department(let d):
            try staging.cached("INSERT INTO departments VALUES (?, ?, ?, ?, ?)")
                .bind(.text(d.uid), .text(d.storeUID), .text(d.name), .integer(line), .integer(position)).run()
        case .shelf(let h):
            try staging.cached("INSERT INTO shelves VALUES (?, ?, ?, ?, ?, ?)")
                .bind(.text(h.uid), .text(h.departmentUID), .text(owner ?? ""), .text(h.name), .integer(line), .integer(position)).run()
        case .product(let v):
            let p = v.product
            try staging.cached("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                .bind(.text(p.uid), .text(p.shelfUID), .text(owner ?? ""), .text(p.name), .text(p.brand), .text(p.unit),
                      .integer(Int64(p.unitSize)), .integer(p.price.minorUnits), .text(p.price.currency), .text(p.imageURL),
                      .integer(Int64(v.stock)), .integer(p.oftenOutOfStock ? 1 : 0), .text(v.barcode), .integer(line)).run()
        }
    }

    /// The validator's questions, asked of the staging file and the live
    /// database.
    private struct Lookup: CatalogImportLookup {
        let staging: SQLiteConnection
        let live: SQLiteConnection

        func lineInFile(_ kind: Kind, _ uid: String) throws(StorageError) -> UInt32? {
            let s = try staging.cached("SELECT line FROM \(kind.table) WHERE uid = ?").bind(.text(uid))
            defer { s.reset() }
            return try s.step() ? UInt32(clamping: s.int(0)) : nil
        }

        func exists(_ kind: Kind, _ uid: String) throws(StorageError) -> Bool {
            let s = try staging.cached("SELECT 1 FROM \(kind.table) WHERE uid = ?").bind(.text(uid))
            defer { s.reset() }
            if try s.step() { return true }
            return try liveValue("SELECT uid FROM \(kind.table) WHERE uid = ?", uid) != nil
        }

        func store(of kind: Kind, _ uid: String) throws(StorageError) -> String? {
            let s = try staging.cached("SELECT store_uid FROM \(kind.table) WHERE uid = ?").bind(.text(uid))
            defer { s.reset() }
            if try s.step() { return s.text(0) }
            return try ownerInCatalog(kind, uid)
        }

        func ownerInCatalog(_ kind: Kind, _ uid: String) throws(StorageError) -> String? {
            switch kind {
            case .city: nil
            case .store: try liveValue("SELECT city_uid FROM stores WHERE uid = ?", uid)
            case .department: try liveValue("SELECT store_uid FROM departments WHERE uid = ?", uid)
            case .shelf:
                try liveValue("SELECT d.store_uid FROM shelves h JOIN departments d ON d.uid = h.department_uid WHERE h.uid = ?", uid)
            case .product:
                try liveValue("""
                    SELECT d.store_uid FROM products p JOIN shelves h ON h.uid = p.shelf_uid
                    JOIN departments d ON d.uid = h.department_uid WHERE p.uid = ?
                    """, uid)
            }
        }

        /// The first column of `sql`'s first row in the live database.
        func liveValue(_ sql: String, _ key: String) throws(StorageError) -> String? {
            let s = try live.cached(sql).bind(.text(key))
            defer { s.reset() }
            return try s.step() ? s.text(0) : nil
        }
    }

    // MARK: Commit

    /// Applies every staged record to the live database in one transaction
    /// (docs/CATALOG.md §7.3, §7.4), then removes the staging file.
    public func commit() throws(ImportProblem) -> ImportSummary {
        do {
            try staging.execute("COMMIT")
            // Every staged city's default store must be one of its stores.
            let c = try staging.prepare("SELECT uid, default_store_uid, line FROM cities")
            while try c.step() {
                let (city, store, line) = (c.text(0), c.text(1), UInt32(clamping: c.int(2)))
                let staged = try staging.prepare("SELECT city_uid FROM stores WHERE uid = ?").bind(.text(store))
                let owner = try staged.step() ? staged.text(0) : try lookup.liveValue("SELECT city_uid FROM stores WHERE uid = ?", store)
                guard owner == city else {
                    throw ImportProblem(line: line, "city \(city): default_store_uid \(store) is not a store of this city in the file or the catalog")
                }
            }
            let summary = try apply()
            discard()
            return summary
        } catch let problem as ImportProblem {
            throw problem
        } catch {
            throw ImportProblem(line: 0, "the import could not be applied: \(error); nothing was changed")
        }
    }

    private func apply() throws -> ImportSummary {
        let db = try SQLiteConnection(path: mainPath)
        try db.execute("PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;")
        try db.execute("ATTACH DATABASE '\(stagingPath.replacingQuote)' AS s")
        return try db.transaction { () throws(StorageError) -> ImportSummary in
            try db.execute("""
                INSERT INTO cities(uid, code, name, default_store_uid)
                    SELECT uid, code, name, default_store_uid FROM s.cities WHERE true
                    ON CONFLICT(uid) DO UPDATE SET code = excluded.code, name = excluded.name,
                        default_store_uid = excluded.default_store_uid;
                INSERT INTO stores(uid, city_uid, position, name, chain, address)
                    SELECT uid, city_uid, (SELECT coalesce(max(position), 0) FROM main.stores) + pos, name, chain, address
                    FROM s.stores WHERE true
                    ON CONFLICT(uid) DO UPDATE SET name = excluded.name, chain = excluded.chain, address = excluded.address;
                """)
            let keepOrReplacePosition = replace ? "position = excluded.position," : ""
            try db.execute("""
                INSERT INTO departments(uid, store_uid, position, name)
                    SELECT uid, store_uid, (SELECT coalesce(max(position), 0) FROM main.departments) + pos, name
                    FROM s.departments WHERE true
                    ON CONFLICT(uid) DO UPDATE SET \(keepOrReplacePosition) name = excluded.name;
                INSERT INTO shelves(uid, department_uid, position, name)
                    SELECT uid, department_uid, (SELECT coalesce(max(position), 0) FROM main.shelves) + pos, name
                    FROM s.shelves WHERE true
                    ON CONFLICT(uid) DO UPDATE SET \(keepOrReplacePosition) department_uid = excluded.department_uid,
                        name = excluded.name;
                UPDATE meta SET value = value + 1 WHERE key = 'catalog_version';
                """)
            let v = try db.prepare("SELECT value FROM meta WHERE key = 'catalog_version'")
            _ = try v.step()
            let version = v.int(0)
            v.reset()
            try db.execute("""
                INSERT INTO products(uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                                     stock, often_out_of_stock, changed_version, barcode)
                    SELECT uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                           stock, often_out_of_stock, \(version), barcode FROM s.products WHERE true
                    ON CONFLICT(uid) DO UPDATE SET shelf_uid = excluded.shelf_uid, name = excluded.name,
                        brand = excluded.brand, unit = excluded.unit, unit_size = excluded.unit_size,
                        price_minor = excluded.price_minor, currency = excluded.currency, image_url = excluded.image_url,
                        stock = excluded.stock, often_out_of_stock = excluded.often_out_of_stock,
                        changed_version = excluded.changed_version, barcode = excluded.barcode;
                """)
            var removed: Int64 = 0
            if replace {
                // In every covered store: what the file does not name goes,
                // and carts that held a removed product move to a new version.
                try db.execute("""
                    CREATE TEMP TABLE gone AS
                        SELECT p.uid FROM products p JOIN shelves h ON h.uid = p.shelf_uid
                        JOIN departments d ON d.uid = h.department_uid
                        WHERE d.store_uid IN (SELECT uid FROM s.stores) AND p.uid NOT IN (SELECT uid FROM s.products);
                    UPDATE carts SET version = version + 1
                        WHERE id IN (SELECT cart_id FROM cart_lines WHERE product_uid IN (SELECT uid FROM gone));
                    DELETE FROM cart_lines WHERE product_uid IN (SELECT uid FROM gone);
                    DELETE FROM products WHERE uid IN (SELECT uid FROM gone);
                    DELETE FROM shelves WHERE uid IN (
                        SELECT h.uid FROM shelves h JOIN departments d ON d.uid = h.department_uid
                        WHERE d.store_uid IN (SELECT uid FROM s.stores) AND h.uid NOT IN (SELECT uid FROM s.shelves));
                    DELETE FROM departments WHERE store_uid IN (SELECT uid FROM s.stores)
                        AND uid NOT IN (SELECT uid FROM s.departments);
                    """)
                let n = try db.prepare("SELECT count(*) FROM gone")
                _ = try n.step()
                removed = n.int(0)
                n.reset()
                try db.execute("DROP TABLE gone")
            }
            let counts = try db.prepare("SELECT (SELECT count(*) FROM s.stores), (SELECT count(*) FROM s.products)")
            _ = try counts.step()
            let summary = ImportSummary(catalogVersion: UInt64(version), stores: Int(counts.int(0)),
                                        products: Int(counts.int(1)), removed: Int(removed))
            counts.reset()
            return summary
        }
    }
}

extension String {
    /// For a path inside an SQL string literal.
    var replacingQuote: String { split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''") }
}

private extension CatalogImportValidator.Kind {
    /// The table of records of this kind, in the staging file and the
    /// live database alike.
    var table: String {
        switch self {
        case .city: "cities"
        case .store: "stores"
        case .department: "departments"
        case .shelf: "shelves"
        case .product: "products"
        }
    }
}
