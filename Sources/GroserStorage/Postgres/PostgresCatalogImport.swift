import GroserWire

// Catalog import into PostgreSQL: staging, checking (CatalogImportValidator)
// and applying an import in one transaction.

extension PostgresCatalogStore: CatalogImporting {
    public func beginImport(id: UInt64, replace: Bool) throws(StorageError) -> any CatalogImportSession {
        try PostgresCatalogImport(connectInfo: connectInfo, id: id, replace: replace)
    }
}

/// One catalog import into PostgreSQL, checked by CatalogImportValidator
/// as SQLite's is. It has a connection of its own: staged rows go to its
/// temporary tables (a batch a chunk), which nobody else sees, and the
/// commit applies them from there in one pipelined transaction. The uids
/// and owners the checks need stay in memory; the live catalog is read a
/// chunk at a time.
final class PostgresCatalogImport: CatalogImportSession {
    let id: UInt64
    let replace: Bool
    private(set) var records: UInt64 = 0
    private var connection: PostgresConnection?
    private var position: Int64 = 0

    // What the file staged so far: each uid's line, and the owners the
    // checks look up.
    private var cityLine: [String: UInt32] = [:]
    private var cityDefaults: [(uid: String, store: String, line: UInt32)] = []
    private var storeLine: [String: UInt32] = [:]
    private var storeCity: [String: String] = [:]
    private var departmentLine: [String: UInt32] = [:]
    private var departmentStore: [String: String] = [:]
    private var shelfLine: [String: UInt32] = [:]
    private var shelfStore: [String: String] = [:]
    private var productLine: [String: UInt32] = [:]

    init(connectInfo: String, id: UInt64, replace: Bool) throws(StorageError) {
        self.id = id
        self.replace = replace
        let c = try postgres { () throws(PostgresError) in try PostgresConnection(connectInfo) }
        try postgres { () throws(PostgresError) in
            try c.executeScript("""
                CREATE TEMP TABLE s_cities(uid text, code text, name text, default_store_uid text);
                CREATE TEMP TABLE s_stores(uid text, city_uid text, name text, chain text, address text, pos bigint);
                CREATE TEMP TABLE s_departments(uid text, store_uid text, name text, pos bigint);
                CREATE TEMP TABLE s_shelves(uid text, department_uid text, name text, pos bigint);
                CREATE TEMP TABLE s_products(uid text, shelf_uid text, store_uid text, name text, brand text, unit text,
                    unit_size bigint, price_minor bigint, currency text, image_url text, stock bigint,
                    often_out_of_stock boolean, barcode text);
                """)
        }
        connection = c
    }

    deinit { discard() }

    /// Closes the import's connection; its temporary tables go with it.
    func discard() {
        connection?.close()
        connection = nil
    }

    private func live() throws(ImportProblem) -> PostgresConnection {
        guard let connection else { throw ImportProblem(line: 0, "the import is over") }
        return connection
    }

    // MARK: Records

    /// The live catalog's rows for the uids `records` name: which exist,
    /// and their owners.
    private struct LiveOwners {
        var cities: Set<String> = []
        var storeCity: [String: String] = [:]
        var departmentStore: [String: String] = [:]
        var shelfStore: [String: String] = [:]
        var productStore: [String: String] = [:]
    }

    private func liveOwners(_ records: [NumberedRecord], _ c: PostgresConnection) throws(PostgresError) -> LiveOwners {
        var uids: Set<String> = []
        for r in records {
            switch r.record {
            case .city: break
            case .store(let s): uids.insert(s.uid); uids.insert(s.cityUID)
            case .department(let d): uids.insert(d.uid); uids.insert(d.storeUID)
            case .shelf(let h): uids.insert(h.uid); uids.insert(h.departmentUID)
            case .product(let p): uids.insert(p.product.uid); uids.insert(p.product.shelfUID)
            }
        }
        var owners = LiveOwners()
        guard !uids.isEmpty else { return owners }
        let all = PostgresText.array(uids)
        let rows = try c.batch([
            PostgresStatement("SELECT uid FROM cities WHERE uid = ANY($1::text[])", [all]),
            PostgresStatement("SELECT uid, city_uid FROM stores WHERE uid = ANY($1::text[])", [all]),
            PostgresStatement("SELECT uid, store_uid FROM departments WHERE uid = ANY($1::text[])", [all]),
            PostgresStatement("""
                SELECT h.uid, d.store_uid FROM shelves h JOIN departments d ON d.uid = h.department_uid
                WHERE h.uid = ANY($1::text[])
                """, [all]),
            PostgresStatement("""
                SELECT p.uid, d.store_uid FROM products p JOIN shelves h ON h.uid = p.shelf_uid
                JOIN departments d ON d.uid = h.department_uid WHERE p.uid = ANY($1::text[])
                """, [all]),
        ])
        func pairs(_ r: PostgresRows) -> [String: String] {
            Dictionary(r.rows.map { ($0[0] ?? "", $0[1] ?? "") }, uniquingKeysWith: { a, _ in a })
        }
        owners.cities = Set(rows[0].rows.map { $0[0] ?? "" })
        owners.storeCity = pairs(rows[1])
        owners.departmentStore = pairs(rows[2])
        owners.shelfStore = pairs(rows[3])
        owners.productStore = pairs(rows[4])
        return owners
    }

    /// Checks and stages `records` in order: one round trip to read what
    /// the live catalog has of them, one to stage those accepted.
    func add(_ records: [NumberedRecord]) throws(ImportProblem) {
        guard !records.isEmpty else { return }
        let c = try live()
        let owners: LiveOwners
        do { owners = try liveOwners(records, c) } catch {
            throw ImportProblem(line: records[0].line, "the import could not be staged: \(StorageError(error))")
        }
        var cities: [[String]] = Array(repeating: [], count: 4)
        var stores: [[String]] = Array(repeating: [], count: 6)
        var departments: [[String]] = Array(repeating: [], count: 4)
        var shelves: [[String]] = Array(repeating: [], count: 4)
        var products: [[String]] = Array(repeating: [], count: 13)
        func append(_ row: [String], to table: inout [[String]]) {
            for (i, v) in row.enumerated() { table[i].append(v) }
        }
        var problem: ImportProblem?
        for r in records {
            let owner: String?
            do {
                owner = try CatalogImportValidator.check(r, Lookup(file: self, live: owners))
            } catch {
                problem = error
                break
            }
            position += 1
            let pos = String(position)
            switch r.record {
            case .city(let x):
                append([x.uid, x.code, x.name, x.defaultStoreUID], to: &cities)
                cityLine[x.uid] = r.line
                cityDefaults.append((x.uid, x.defaultStoreUID, r.line))
            case .store(let s):
                append([s.uid, s.cityUID, s.name, s.chain, s.address, pos], to: &stores)
                storeLine[s.uid] = r.line
                storeCity[s.uid] = s.cityUID
            case .department(let d):
                append([d.uid, d.storeUID, d.name, pos], to: &departments)
                departmentLine[d.uid] = r.line
                departmentStore[d.uid] = d.storeUID
            case .shelf(let h):
                append([h.uid, h.departmentUID, h.name, pos], to: &shelves)
                shelfLine[h.uid] = r.line
                shelfStore[h.uid] = owner ?? ""
            case .product(let v):
                let p = v.product
                let store = owner ?? ""
                append([p.uid, p.shelfUID, store, p.name, p.brand, p.unit, String(p.unitSize), String(p.price.minorUnits),
                        p.price.currency, p.imageURL, String(v.stock), p.oftenOutOfStock ? "t" : "f", v.barcode], to: &products)
                productLine[p.uid] = r.line
            }
            self.records += 1
        }
        let array = { (columns: [[String]]) in columns.map { PostgresText.array($0) as String? } }
        var statements: [PostgresStatement] = []
        if !cities[0].isEmpty {
            statements.append(PostgresStatement(
                "INSERT INTO s_cities SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])", array(cities)))
        }
        if !stores[0].isEmpty {
            statements.append(PostgresStatement("""
                INSERT INTO s_stores SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
                """, array(stores)))
        }
        if !departments[0].isEmpty {
            statements.append(PostgresStatement(
                "INSERT INTO s_departments SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])", array(departments)))
        }
        if !shelves[0].isEmpty {
            statements.append(PostgresStatement(
                "INSERT INTO s_shelves SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])", array(shelves)))
        }
        if !products[0].isEmpty {
            statements.append(PostgresStatement("""
                INSERT INTO s_products SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                    $6::text[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::bigint[], $12::boolean[], $13::text[])
                """, array(products)))
        }
        if !statements.isEmpty {
            do { _ = try c.batch(statements) } catch {
                throw ImportProblem(line: records[0].line, "the import could not be staged: \(StorageError(error))")
            }
        }
        if let problem { throw problem }
    }

    /// The validator's questions, answered from what the file staged so
    /// far and the live catalog's rows read for the batch.
    private struct Lookup: CatalogImportLookup {
        typealias Failure = Never
        let file: PostgresCatalogImport
        let live: LiveOwners

        func lineInFile(_ kind: Kind, _ uid: String) -> UInt32? {
            switch kind {
            case .city: file.cityLine[uid]
            case .store: file.storeLine[uid]
            case .department: file.departmentLine[uid]
            case .shelf: file.shelfLine[uid]
            case .product: file.productLine[uid]
            }
        }

        func exists(_ kind: Kind, _ uid: String) -> Bool {
            switch kind {
            case .city: file.cityLine[uid] != nil || live.cities.contains(uid)
            case .store: file.storeLine[uid] != nil || live.storeCity[uid] != nil
            default: false
            }
        }

        func store(of kind: Kind, _ uid: String) -> String? {
            switch kind {
            case .department: file.departmentStore[uid] ?? live.departmentStore[uid]
            case .shelf: file.shelfStore[uid] ?? live.shelfStore[uid]
            default: nil
            }
        }

        func ownerInCatalog(_ kind: Kind, _ uid: String) -> String? {
            switch kind {
            case .city: nil
            case .store: live.storeCity[uid]
            case .department: live.departmentStore[uid]
            case .shelf: live.shelfStore[uid]
            case .product: live.productStore[uid]
            }
        }
    }

    // MARK: Commit

    /// Applies every staged record in one transaction (one pipelined
    /// batch: all of it or, on any failure, none), bumps the catalog
    /// version, marks the products it wrote at that version and notifies
    /// `PostgresCatalogStore.notificationChannel`; then ends the import.
    func commit() throws(ImportProblem) -> ImportSummary {
        let c = try live()
        defer { discard() }
        do {
            // Every staged city's default store must be one of its stores.
            let liveStores = try c.execute("SELECT uid, city_uid FROM stores WHERE uid = ANY($1::text[])",
                                           [PostgresText.array(cityDefaults.map(\.store))])
            let liveCity = Dictionary(liveStores.rows.map { ($0[0] ?? "", $0[1] ?? "") }, uniquingKeysWith: { a, _ in a })
            for city in cityDefaults where (storeCity[city.store] ?? liveCity[city.store]) != city.uid {
                throw ImportProblem(line: city.line, "city \(city.uid): default_store_uid \(city.store) is not a store of this city in the file or the catalog")
            }
            let summary = try apply(c)
            return summary
        } catch let problem as ImportProblem {
            throw problem
        } catch let error as PostgresError {
            throw ImportProblem(line: 0, "the import could not be applied: \(StorageError(error)); nothing was changed")
        } catch {
            throw ImportProblem(line: 0, "the import could not be applied: \(error); nothing was changed")
        }
    }

    private func apply(_ c: PostgresConnection) throws(PostgresError) -> ImportSummary {
        let keepOrReplacePosition = replace ? "position = excluded.position," : ""
        var statements = [
            PostgresStatement("""
                INSERT INTO cities(uid, code, name, default_store_uid)
                    SELECT uid, code, name, default_store_uid FROM s_cities
                    ON CONFLICT(uid) DO UPDATE SET code = excluded.code, name = excluded.name,
                        default_store_uid = excluded.default_store_uid
                """),
            PostgresStatement("""
                INSERT INTO stores(uid, city_uid, position, name, chain, address)
                    SELECT uid, city_uid, (SELECT coalesce(max(position), 0) FROM stores) + pos, name, chain, address
                    FROM s_stores
                    ON CONFLICT(uid) DO UPDATE SET name = excluded.name, chain = excluded.chain, address = excluded.address
                """),
            PostgresStatement("""
                INSERT INTO departments(uid, store_uid, position, name)
                    SELECT uid, store_uid, (SELECT coalesce(max(position), 0) FROM departments) + pos, name FROM s_departments
                    ON CONFLICT(uid) DO UPDATE SET \(keepOrReplacePosition) name = excluded.name
                """),
            PostgresStatement("""
                INSERT INTO shelves(uid, department_uid, position, name)
                    SELECT uid, department_uid, (SELECT coalesce(max(position), 0) FROM shelves) + pos, name FROM s_shelves
                    ON CONFLICT(uid) DO UPDATE SET \(keepOrReplacePosition) department_uid = excluded.department_uid,
                        name = excluded.name
                """),
            PostgresStatement("UPDATE meta SET value = value + 1 WHERE key = 'catalog_version' RETURNING value"),
            PostgresStatement("""
                INSERT INTO products(uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                                     stock, often_out_of_stock, changed_version, barcode)
                    SELECT uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                           stock, often_out_of_stock, (SELECT value FROM meta WHERE key = 'catalog_version'), barcode
                    FROM s_products
                    ON CONFLICT(uid) DO UPDATE SET shelf_uid = excluded.shelf_uid, name = excluded.name,
                        brand = excluded.brand, unit = excluded.unit, unit_size = excluded.unit_size,
                        price_minor = excluded.price_minor, currency = excluded.currency, image_url = excluded.image_url,
                        stock = excluded.stock, often_out_of_stock = excluded.often_out_of_stock,
                        changed_version = excluded.changed_version, barcode = excluded.barcode
                """),
            PostgresStatement("SELECT (SELECT count(*) FROM s_stores) AS stores, (SELECT count(*) FROM s_products) AS products"),
            PostgresStatement("SELECT pg_notify($1, value::text) FROM meta WHERE key = 'catalog_version'",
                              [PostgresCatalogStore.notificationChannel]),
        ]
        if replace {
            // In every covered store: what the file does not name goes.
            statements += [
                PostgresStatement("""
                    WITH gone AS (
                        DELETE FROM products WHERE uid IN (
                            SELECT p.uid FROM products p JOIN shelves h ON h.uid = p.shelf_uid
                            JOIN departments d ON d.uid = h.department_uid
                            WHERE d.store_uid IN (SELECT uid FROM s_stores) AND p.uid NOT IN (SELECT uid FROM s_products))
                        RETURNING uid)
                    SELECT count(*) AS removed FROM gone
                    """),
                PostgresStatement("""
                    DELETE FROM shelves WHERE uid IN (
                        SELECT h.uid FROM shelves h JOIN departments d ON d.uid = h.department_uid
                        WHERE d.store_uid IN (SELECT uid FROM s_stores) AND h.uid NOT IN (SELECT uid FROM s_shelves))
                    """),
                PostgresStatement("""
                    DELETE FROM departments WHERE store_uid IN (SELECT uid FROM s_stores)
                        AND uid NOT IN (SELECT uid FROM s_departments)
                    """),
            ]
        }
        let results = try c.batch(statements)
        let int = { (s: String?) in Int(s ?? "") ?? 0 }
        return ImportSummary(catalogVersion: UInt64(results[4].rows.first?[0] ?? "") ?? 0,
                             stores: int(results[6][0, "stores"]), products: int(results[6][0, "products"]),
                             removed: replace ? int(results[8][0, "removed"]) : 0)
    }
}

extension PostgresCatalogStore {
    /// SQLiteCatalogStore.exportPage's pages, from one REPEATABLE READ
    /// snapshot: the catalog's skeleton in one round trip, then the page's
    /// products (a query a shelf it reaches into) in another.
    public func exportPage(storeUID: String, from cursor: ExportCursor?, limit: Int)
        throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64) {
        try withConnection(start: { (c) throws(PostgresError) in try c.executeScript(Self.snapshot) }) {
            (c, _) throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64) in
            let top = try postgres { () throws(PostgresError) in
                try c.batch([
                    PostgresStatement(Self.versionQuery),
                    PostgresStatement("SELECT uid, code, name, default_store_uid FROM cities ORDER BY code"),
                    PostgresStatement("SELECT uid, city_uid, name, chain, address FROM stores ORDER BY position, uid"),
                    PostgresStatement("""
                        SELECT uid, store_uid, name FROM departments WHERE $1 = '' OR store_uid = $1 ORDER BY position, uid
                        """, [storeUID]),
                    PostgresStatement("""
                        SELECT h.uid, h.department_uid, h.name, coalesce(n.count, 0) AS count FROM shelves h
                        JOIN departments d ON d.uid = h.department_uid
                        LEFT JOIN (SELECT shelf_uid, count(*) AS count FROM products GROUP BY shelf_uid) n ON n.shelf_uid = h.uid
                        WHERE $1 = '' OR d.store_uid = $1 ORDER BY h.position, h.uid
                        """, [storeUID]),
                ])
            }
            let version = try Self.version(top[0])
            if let cursor, cursor.version != version {
                throw StorageError("the catalog changed (version \(cursor.version) → \(version)) since the export began; start it again")
            }
            var storesByCity: [String: [StoreSummary]] = [:]
            for r in top[2].rows {
                let city = r[1] ?? ""
                storesByCity[city, default: []].append(StoreSummary(uid: r[0] ?? "", name: r[2] ?? "", chain: r[3] ?? "", address: r[4] ?? "", cityUID: city))
            }
            var departmentsByStore: [String: [(String, String)]] = [:]
            for r in top[3].rows { departmentsByStore[r[1] ?? "", default: []].append((r[0] ?? "", r[2] ?? "")) }
            var shelvesByDepartment: [String: [(String, String, Int)]] = [:]
            for r in top[4].rows { shelvesByDepartment[r[1] ?? "", default: []].append((r[0] ?? "", r[2] ?? "", Int(r[3] ?? "") ?? 0)) }

            // The skeleton in canonical order, as SQLite's export builds it.
            enum Entry { case record(CatalogRecord); case products(shelf: String, count: Int) }
            var entries: [Entry] = []
            for r in top[1].rows {
                let city = City(uid: r[0] ?? "", code: r[1] ?? "", name: r[2] ?? "", stores: [], defaultStoreUID: r[3] ?? "")
                let stores = storesByCity[city.uid] ?? []
                if !storeUID.isEmpty && !stores.contains(where: { $0.uid == storeUID }) { continue }
                entries.append(.record(.city(city)))
                for store in stores where storeUID.isEmpty || store.uid == storeUID {
                    entries.append(.record(.store(store)))
                    for (duid, dname) in departmentsByStore[store.uid] ?? [] {
                        entries.append(.record(.department(CatalogDepartment(uid: duid, storeUID: store.uid, name: dname))))
                        for (huid, hname, count) in shelvesByDepartment[duid] ?? [] {
                            entries.append(.record(.shelf(CatalogShelf(uid: huid, departmentUID: duid, name: hname))))
                            if count > 0 { entries.append(.products(shelf: huid, count: count)) }
                        }
                    }
                }
            }
            if !storeUID.isEmpty && entries.isEmpty { throw StorageError("no store has the uid \"\(storeUID)\"") }

            // The page: records, and for each shelf it reaches into, a
            // product query with the offset and count it takes.
            enum Slot { case record(CatalogRecord); case products(statement: Int) }
            var slots: [Slot] = []
            var queries: [PostgresStatement] = []
            var taken = 0
            var index = 0
            var next: Int?
            let start = cursor?.record ?? 0
            for entry in entries {
                if taken >= limit { break }
                switch entry {
                case .record(let r):
                    if index >= start {
                        slots.append(.record(r))
                        taken += 1
                    }
                    index += 1
                case .products(let shelf, let count):
                    if index + count <= start { index += count; continue }
                    let offset = max(0, start - index)
                    let n = min(count - offset, limit - taken)
                    slots.append(.products(statement: queries.count))
                    queries.append(PostgresStatement("""
                        SELECT \(Self.productColumns) FROM products p WHERE p.shelf_uid = $1
                        ORDER BY p.name, p.uid LIMIT $2 OFFSET $3
                        """, [shelf, String(n), String(offset)]))
                    taken += n
                    index += offset + n
                    if offset + n < count { next = index }
                }
            }
            let products = queries.isEmpty ? [] : try postgres { () throws(PostgresError) in try c.batch(queries) }
            try postgres { () throws(PostgresError) in try c.executeScript("COMMIT") }
            var out: [CatalogRecord] = []
            out.reserveCapacity(taken)
            for slot in slots {
                switch slot {
                case .record(let r): out.append(r)
                case .products(let statement):
                    for r in products[statement].rows {
                        let stock = Self.stock(r)
                        var product = Self.product(r)
                        product.barcode = ""
                        out.append(.product(CatalogProduct(product: product, stock: stock, barcode: r[11] ?? "")))
                    }
                }
            }
            if let next { return (out, ExportCursor(version: version, record: next), version) }
            let total = entries.reduce(0) { n, e in if case .products(_, let k) = e { return n + k } else { return n + 1 } }
            return (out, index < total ? ExportCursor(version: version, record: index) : nil, version)
        }
    }
}
