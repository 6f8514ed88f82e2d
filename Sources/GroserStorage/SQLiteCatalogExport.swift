import GroserWire

// SQLiteCatalogStore's catalog export (docs/CATALOG.md §8): pages of
// records in the canonical order, each from one read transaction.

extension SQLiteCatalogStore {
    /// Up to `limit` records of the catalog (or of one store, with its city)
    /// in the canonical order, from `cursor`; the cursor of the next page, or
    /// nil after the last. Throws when the catalog changed since `cursor`.
    public func exportPage(storeUID: String, from cursor: ExportCursor?, limit: Int)
        throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64) {
        try connection.withLock { (db) throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64) in
            try Self.reading(db) { (version) throws(StorageError) -> (records: [CatalogRecord], next: ExportCursor?, version: UInt64) in
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
}
