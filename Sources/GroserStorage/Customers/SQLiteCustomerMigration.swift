import GroserWire

// What the customer shards read from the SQLite database: product facts for
// carts, and the sessions and carts an older groserd kept there, moved once
// into the customer log.

extension SQLiteCatalogStore {
    /// A product as carts need it, with its shelf (caches are dropped by
    /// shelf when the catalog changes). Read outside any write transaction.
    public func productFacts(_ uid: String) throws(StorageError) -> (product: ProductRecord, shelfUID: String)? {
        try connection.withLock { (db) throws(StorageError) -> (product: ProductRecord, shelfUID: String)? in
            let s = try db.cached("""
                SELECT p.uid, d.store_uid, p.name, p.price_minor, p.currency, p.stock, p.shelf_uid FROM products p
                JOIN shelves h ON h.uid = p.shelf_uid JOIN departments d ON d.uid = h.department_uid
                WHERE p.uid = ?
                """).bind(.text(uid))
            defer { s.reset() }
            guard try s.step() else { return nil }
            return (ProductRecord(uid: s.text(0), storeUID: s.text(1), name: s.text(2),
                                  price: Money(minorUnits: s.int(3), currency: s.text(4)), stock: UInt32(clamping: s.int(5))),
                    s.text(6))
        }
    }

    /// Sessions, carts and remembered answers that an older groserd kept in
    /// the database, as customer-log records (empty once moved).
    public func legacyCustomerRecords(nowUnix: Int64) throws(StorageError) -> [CustomerRecord] {
        try connection.withLock { (db) throws(StorageError) -> [CustomerRecord] in
            var records: [CustomerRecord] = []
            let s = try db.prepare("SELECT token_hash, created_at FROM sessions")
            while try s.step() {
                records.append(.session(SessionKey(storedHex: s.text(0)), createdAtUnix: s.int(1)))
            }
            s.reset()
            guard !records.isEmpty else { return [] }
            let c = try db.prepare("SELECT id, session, store_uid, version FROM carts")
            let l = try db.prepare("SELECT product_uid, quantity, seen_price_minor FROM cart_lines WHERE cart_id = ? ORDER BY position")
            while try c.step() {
                l.bind(.integer(c.int(0)))
                var lines: [CartLineRecord] = []
                while try l.step() {
                    lines.append(CartLineRecord(productUID: l.text(0), quantity: UInt32(clamping: l.int(1)), seenPriceMinorUnits: l.int(2)))
                }
                records.append(.cart(SessionKey(storedHex: c.text(1)), storeUID: c.text(2),
                                     StoredCart(version: UInt64(c.int(3)), lines: lines), atUnix: nowUnix))
            }
            c.reset()
            let i = try db.prepare("SELECT session, key, fingerprint, field, body FROM idempotency")
            while try i.step() {
                records.append(.answer(SessionKey(storedHex: i.text(0)), key: i.text(1), StoredAnswer(
                    IdempotentAnswer(fingerprint: i.text(2), field: UInt32(clamping: i.int(3)), body: i.blob(4)), atUnix: nowUnix)))
            }
            i.reset()
            return records
        }
    }

    /// Forgets the sessions and carts once the customer log holds them
    /// durably. Remembered answers stay: checkout keeps its own in the
    /// database (a retry after a crash between the order's commit and the
    /// log's finds its order there).
    public func removeLegacyCustomers() throws(StorageError) {
        try connection.withLock { (db) throws(StorageError) in
            try db.transaction { () throws(StorageError) in
                try db.execute("DELETE FROM cart_lines; DELETE FROM carts; DELETE FROM sessions;")
            }
        }
    }
}

extension SQLiteCatalogStore {
    /// A view of this database whose write transactions are rolled back
    /// instead of committed: every caller finds the database as it was. For
    /// the fuzz harness, which must start each input from the same catalog.
    public var rollingBack: any CommerceStore { RollingBackStore(store: self) }
}

private struct RollingBackStore: CommerceStore {
    let store: SQLiteCatalogStore
    func write<T>(_ body: (any CommerceTransaction) throws(StorageError) -> T) throws(StorageError) -> T {
        try store.connection.withLock { (db) throws(StorageError) -> T in
            try db.execute("BEGIN")
            defer {
                db.resetCached()
                try? db.execute("ROLLBACK")
            }
            return try body(SQLiteCommerceTransaction(db: db))
        }
    }
}
