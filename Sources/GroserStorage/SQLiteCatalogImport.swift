import GroserSystem
import GroserWire

/// Why an import record was refused: its line and one readable sentence.
public struct ImportProblem: Error, Sendable, CustomStringConvertible {
    public var line: UInt32
    public var reason: String
    public init(line: UInt32, _ reason: String) {
        self.line = line
        self.reason = reason
    }
    public var description: String { line > 0 ? "line \(line): \(reason)" : reason }
}

/// What a committed import did.
public struct ImportSummary: Sendable, Hashable {
    public var catalogVersion: UInt64
    public var stores: Int
    public var products: Int
    public var removed: Int
}

/// One catalog import (docs/CATALOG.md §7): records are checked as they
/// arrive and staged in a file of their own, so the live database is not
/// touched, nor locked, until `commit` applies them all in one transaction.
/// A refused record, an abort or a failed commit leaves the catalog as it
/// was. Value rules (lengths, characters, units) are the caller's; this
/// checks what needs the data: uniqueness, references and ownership.
public final class SQLiteCatalogImport {
    public let id: UInt64
    public let replace: Bool
    private let stagingPath: String
    private let mainPath: String
    private let staging: SQLiteConnection
    /// Reads the live catalog for references; never writes.
    private let live: SQLiteConnection
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
        live = try SQLiteConnection(path: store.path)
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
        let line = Int64(r.line)
        switch r.record {
        case .city(let c):
            try unique("cities", "city", c.uid, r.line)
            try staging.cached("INSERT INTO cities VALUES (?, ?, ?, ?, ?)")
                .bind(.text(c.uid), .text(c.code), .text(c.name), .text(c.defaultStoreUID), .integer(line)).run()
        case .store(let s):
            try unique("stores", "store", s.uid, r.line)
            guard try exists("cities", s.cityUID) else {
                throw ImportProblem(line: r.line, "store \(s.uid): city_uid \(s.cityUID) names no city in the file so far or the catalog; parents must come before their children")
            }
            if let owner = try liveValue("SELECT city_uid FROM stores WHERE uid = ?", s.uid), owner != s.cityUID {
                throw ImportProblem(line: r.line, "store \(s.uid) belongs to \(owner); a store cannot move to another city")
            }
            try staging.cached("INSERT INTO stores VALUES (?, ?, ?, ?, ?, ?, ?)")
                .bind(.text(s.uid), .text(s.cityUID), .text(s.name), .text(s.chain), .text(s.address), .integer(line), .integer(position)).run()
        case .department(let d):
            try unique("departments", "department", d.uid, r.line)
            guard try exists("stores", d.storeUID) else {
                throw ImportProblem(line: r.line, "department \(d.uid): store_uid \(d.storeUID) names no store in the file so far or the catalog; parents must come before their children")
            }
            if let owner = try liveValue("SELECT store_uid FROM departments WHERE uid = ?", d.uid), owner != d.storeUID {
                throw ImportProblem(line: r.line, "department \(d.uid) belongs to \(owner); a department cannot move to another store")
            }
            try staging.cached("INSERT INTO departments VALUES (?, ?, ?, ?, ?)")
                .bind(.text(d.uid), .text(d.storeUID), .text(d.name), .integer(line), .integer(position)).run()
        case .shelf(let h):
            try unique("shelves", "shelf", h.uid, r.line)
            guard let store = try storeOfDepartment(h.departmentUID) else {
                throw ImportProblem(line: r.line, "shelf \(h.uid): department_uid \(h.departmentUID) names no department in the file so far or the catalog; parents must come before their children")
            }
            if let owner = try liveValue("""
                SELECT d.store_uid FROM shelves h JOIN departments d ON d.uid = h.department_uid WHERE h.uid = ?
                """, h.uid), owner != store {
                throw ImportProblem(line: r.line, "shelf \(h.uid) belongs to store \(owner); a shelf cannot move to another store")
            }
            try staging.cached("INSERT INTO shelves VALUES (?, ?, ?, ?, ?, ?)")
                .bind(.text(h.uid), .text(h.departmentUID), .text(store), .text(h.name), .integer(line), .integer(position)).run()
        case .product(let v):
            let p = v.product
            try unique("products", "product", p.uid, r.line)
            guard let store = try storeOfShelf(p.shelfUID) else {
                throw ImportProblem(line: r.line, "product \(p.uid): shelf_uid \(p.shelfUID) names no shelf in the file so far or the catalog; parents must come before their children")
            }
            if let owner = try liveValue("""
                SELECT d.store_uid FROM products p JOIN shelves h ON h.uid = p.shelf_uid
                JOIN departments d ON d.uid = h.department_uid WHERE p.uid = ?
                """, p.uid), owner != store {
                throw ImportProblem(line: r.line, "product \(p.uid) is sold by store \(owner); a product cannot move to another store")
            }
            try staging.cached("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                .bind(.text(p.uid), .text(p.shelfUID), .text(store), .text(p.name), .text(p.brand), .text(p.unit),
                      .integer(Int64(p.unitSize)), .integer(p.price.minorUnits), .text(p.price.currency), .text(p.imageURL),
                      .integer(Int64(v.stock)), .integer(p.oftenOutOfStock ? 1 : 0), .text(v.barcode), .integer(line)).run()
        }
    }

    private func unique(_ table: String, _ kind: String, _ uid: String, _ line: UInt32) throws {
        let s = try staging.cached("SELECT line FROM \(table) WHERE uid = ?").bind(.text(uid))
        if try s.step() {
            let first = s.int(0)
            s.reset()
            throw ImportProblem(line: line, "\(kind) uid \(uid) is already on line \(first)")
        }
    }

    private func exists(_ table: String, _ uid: String) throws -> Bool {
        let s = try staging.cached("SELECT 1 FROM \(table) WHERE uid = ?").bind(.text(uid))
        defer { s.reset() }
        if try s.step() { return true }
        return try liveValue("SELECT uid FROM \(table) WHERE uid = ?", uid) != nil
    }

    private func storeOfDepartment(_ uid: String) throws -> String? {
        let s = try staging.cached("SELECT store_uid FROM departments WHERE uid = ?").bind(.text(uid))
        defer { s.reset() }
        if try s.step() { return s.text(0) }
        return try liveValue("SELECT store_uid FROM departments WHERE uid = ?", uid)
    }

    private func storeOfShelf(_ uid: String) throws -> String? {
        let s = try staging.cached("SELECT store_uid FROM shelves WHERE uid = ?").bind(.text(uid))
        defer { s.reset() }
        if try s.step() { return s.text(0) }
        return try liveValue("SELECT d.store_uid FROM shelves h JOIN departments d ON d.uid = h.department_uid WHERE h.uid = ?", uid)
    }

    private func liveValue(_ sql: String, _ key: String) throws -> String? {
        let s = try live.cached(sql).bind(.text(key))
        defer { s.reset() }
        return try s.step() ? s.text(0) : nil
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
                let owner = try staged.step() ? staged.text(0) : try liveValue("SELECT city_uid FROM stores WHERE uid = ?", store)
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

/// Where an export page starts: indexes into the canonical order
/// (docs/CATALOG.md §8) and the catalog version it was made at.
public struct ExportCursor: Sendable, Hashable {
    public var version: UInt64
    /// Index of the next record among all the canonical records.
    public var record: Int
    public init(version: UInt64, record: Int) {
        self.version = version
        self.record = record
    }
}

extension SQLiteCatalogStore {
    /// Up to `limit` records of the catalog (or of one store, with its city)
    /// in the canonical order, from `cursor`; the cursor of the next page, or
    /// nil after the last. Throws when the catalog changed since `cursor`.
    public func exportPage(storeUID: String, from cursor: ExportCursor?, limit: Int)
        throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64) {
        try connection.withLock { (db) throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64) in
            try db.execute("BEGIN")
            defer {
                db.resetCached()
                try? db.execute("COMMIT")
            }
            let v = try db.cached("SELECT value FROM meta WHERE key = 'catalog_version'")
            guard try v.step() else { throw StorageError("the database has no catalog version") }
            let version = UInt64(v.int(0))
            if let cursor, cursor.version != version {
                throw StorageError("the catalog changed (version \(cursor.version) → \(version)) since the export began; start it again")
            }
            // The skeleton in canonical order: one entry per record, products
            // of a shelf as one entry with their count.
            enum Entry { case record(CatalogRecord); case products(shelf: String, count: Int) }
            var entries: [Entry] = []
            let c = try db.prepare("SELECT uid, code, name, default_store_uid FROM cities ORDER BY code")
            var cities: [City] = []
            while try c.step() { cities.append(City(uid: c.text(0), code: c.text(1), name: c.text(2), stores: [], defaultStoreUID: c.text(3))) }
            let s = try db.prepare("SELECT uid, name, chain, address FROM stores WHERE city_uid = ? ORDER BY position")
            let d = try db.prepare("SELECT uid, name FROM departments WHERE store_uid = ? ORDER BY position")
            let h = try db.prepare("SELECT h.uid, h.name, (SELECT count(*) FROM products WHERE shelf_uid = h.uid) FROM shelves h WHERE department_uid = ? ORDER BY position")
            for city in cities {
                var stores: [StoreSummary] = []
                s.bind(.text(city.uid))
                while try s.step() {
                    stores.append(StoreSummary(uid: s.text(0), name: s.text(1), chain: s.text(2), address: s.text(3), cityUID: city.uid))
                }
                if !storeUID.isEmpty && !stores.contains(where: { $0.uid == storeUID }) { continue }
                entries.append(.record(.city(city)))
                for store in stores where storeUID.isEmpty || store.uid == storeUID {
                    entries.append(.record(.store(store)))
                    d.bind(.text(store.uid))
                    var departments: [(String, String)] = []
                    while try d.step() { departments.append((d.text(0), d.text(1))) }
                    for (duid, dname) in departments {
                        entries.append(.record(.department(CatalogDepartment(uid: duid, storeUID: store.uid, name: dname))))
                        h.bind(.text(duid))
                        var shelves: [(String, String, Int)] = []
                        while try h.step() { shelves.append((h.text(0), h.text(1), Int(h.int(2)))) }
                        for (huid, hname, count) in shelves {
                            entries.append(.record(.shelf(CatalogShelf(uid: huid, departmentUID: duid, name: hname))))
                            if count > 0 { entries.append(.products(shelf: huid, count: count)) }
                        }
                    }
                }
            }
            if !storeUID.isEmpty && entries.isEmpty { throw StorageError("no store has the uid \"\(storeUID)\"") }
            let p = try db.prepare("""
                SELECT uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                       stock, often_out_of_stock, barcode FROM products WHERE shelf_uid = ?
                ORDER BY name, uid LIMIT ? OFFSET ?
                """)
            var out: [CatalogRecord] = []
            var index = 0
            let start = cursor?.record ?? 0
            for entry in entries {
                if out.count >= limit { break }
                switch entry {
                case .record(let r):
                    if index >= start { out.append(r) }
                    index += 1
                case .products(let shelf, let count):
                    if index + count <= start { index += count; continue }
                    let offset = max(0, start - index)
                    p.bind(.text(shelf), .integer(Int64(limit - out.count)), .integer(Int64(offset)))
                    var taken = 0
                    while try p.step() {
                        let stock = UInt32(clamping: p.int(9))
                        out.append(.product(CatalogProduct(
                            product: Product(uid: p.text(0), name: p.text(2), brand: p.text(3), unit: p.text(4),
                                             unitSize: UInt32(clamping: p.int(5)), price: Money(minorUnits: p.int(6), currency: p.text(7)),
                                             imageURL: p.text(8), outOfStock: stock == 0, oftenOutOfStock: p.int(10) != 0,
                                             shelfUID: p.text(1)),
                            stock: stock, barcode: p.text(11))))
                        taken += 1
                    }
                    index += offset + taken
                    if offset + taken < count { return (out, ExportCursor(version: version, record: index), version) }
                }
            }
            let total = entries.reduce(0) { n, e in if case .products(_, let k) = e { return n + k } else { return n + 1 } }
            return (out, index < total ? ExportCursor(version: version, record: index) : nil, version)
        }
    }
}
