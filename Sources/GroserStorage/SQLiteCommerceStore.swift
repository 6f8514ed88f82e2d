import GroserWire

// SQLite as the commerce store: the write transaction checkout and orders
// run in, with a savepoint a request, and the schema migrations for them.

extension SQLiteCatalogStore: CommerceStore {
    public func write<T>(_ body: (any CommerceTransaction) throws(StorageError) -> T) throws(StorageError) -> T {
        try checkStillInPlace()
        let result = try connection.withLock { (db) throws(StorageError) -> T in
            try db.transaction { () throws(StorageError) -> T in
                try body(SQLiteCommerceTransaction(db: db))
            }
        }
        // Deleted while the batch committed: its changes went to a file
        // nobody will open again, so they are not acknowledged.
        try checkStillInPlace()
        return result
    }

    static func migrateToCommerce(_ db: SQLiteConnection) throws(StorageError) {
        try db.execute("""
        CREATE TABLE sessions(
            selector TEXT NOT NULL, token TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);
        CREATE INDEX sessions_by_selector ON sessions(selector);
        CREATE TABLE carts(
            id INTEGER PRIMARY KEY, session TEXT NOT NULL, store_uid TEXT NOT NULL REFERENCES stores(uid),
            version INTEGER NOT NULL, UNIQUE(session, store_uid));
        CREATE TABLE cart_lines(
            cart_id INTEGER NOT NULL REFERENCES carts(id), product_uid TEXT NOT NULL REFERENCES products(uid),
            quantity INTEGER NOT NULL CHECK (quantity > 0), seen_price_minor INTEGER NOT NULL,
            position INTEGER NOT NULL, PRIMARY KEY(cart_id, product_uid));
        """ + SharedSchema.checkout(.sqlite))
    }
}

extension SQLiteCatalogStore {
    /// Schema 3: sessions are kept by the hash of their token. Every column
    /// that held a token (sessions, carts, idempotency, orders) now holds
    /// its `SessionKey`; sessions open before the upgrade keep working.
    static func migrateToHashedSessions(_ db: SQLiteConnection) throws(StorageError) {
        try db.registerSessionKeyFunction()
        try db.execute("""
        CREATE TABLE sessions_v3(token_hash TEXT PRIMARY KEY, created_at INTEGER NOT NULL) WITHOUT ROWID;
        INSERT OR IGNORE INTO sessions_v3 SELECT groser_session_key(token), created_at FROM sessions;
        DROP TABLE sessions;
        ALTER TABLE sessions_v3 RENAME TO sessions;
        UPDATE carts SET session = groser_session_key(session);
        UPDATE idempotency SET session = groser_session_key(session);
        UPDATE orders SET session = groser_session_key(session);
        """)
    }
}

final class SQLiteCommerceTransaction: CommerceTransaction {
    let db: SQLiteConnection
    init(db: SQLiteConnection) { self.db = db }

    // Cached statements, not sqlite3_exec: these run for every request.
    func savepoint() throws(StorageError) { try db.cached("SAVEPOINT request").run() }
    func rollbackToSavepoint() throws(StorageError) {
        try db.cached("ROLLBACK TO request").run()
        try db.cached("RELEASE request").run()
    }
    func releaseSavepoint() throws(StorageError) { try db.cached("RELEASE request").run() }

    func storeCityCode(_ storeUID: String) throws(StorageError) -> String? {
        let s = try db.cached("SELECT cities.code FROM stores JOIN cities ON cities.uid = stores.city_uid WHERE stores.uid = ?")
            .bind(.text(storeUID))
        return try s.step() ? s.text(0) : nil
    }

    func product(_ uid: String) throws(StorageError) -> ProductRecord? {
        let s = try db.cached("""
            SELECT p.uid, d.store_uid, p.name, p.price_minor, p.currency, p.stock FROM products p
            JOIN shelves h ON h.uid = p.shelf_uid JOIN departments d ON d.uid = h.department_uid
            WHERE p.uid = ?
            """).bind(.text(uid))
        guard try s.step() else { return nil }
        return ProductRecord(uid: s.text(0), storeUID: s.text(1), name: s.text(2),
                             price: Money(minorUnits: s.int(3), currency: s.text(4)), stock: UInt32(clamping: s.int(5)))
    }

    func catalogProduct(_ uid: String) throws(StorageError) -> (Product, UInt32)? {
        let p = try db.cached("""
            SELECT uid, shelf_uid, name, brand, unit, unit_size, price_minor, currency, image_url,
                   stock, often_out_of_stock, barcode FROM products WHERE uid = ?
            """).bind(.text(uid))
        guard try p.step() else { return nil }
        return (SQLiteCatalogStore.product(p), UInt32(clamping: p.int(9)))
    }

    func idempotentAnswer(session: SessionKey, key: String) throws(StorageError) -> IdempotentAnswer? {
        let s = try db.cached("SELECT fingerprint, field, body FROM idempotency WHERE session = ? AND key = ?")
            .bind(.text(session.hex), .text(key))
        guard try s.step() else { return nil }
        return IdempotentAnswer(fingerprint: s.text(0), field: UInt32(clamping: s.int(1)), body: s.blob(2))
    }

    func saveIdempotentAnswer(session: SessionKey, key: String, _ answer: IdempotentAnswer) throws(StorageError) {
        try db.cached("INSERT INTO idempotency VALUES (?, ?, ?, ?, ?)")
            .bind(.text(session.hex), .text(key), .text(answer.fingerprint), .integer(Int64(answer.field)), .blob(answer.body)).run()
    }

    func decrementStock(productUID: String, by quantity: UInt32) throws(StorageError) {
        try db.cached("UPDATE products SET stock = stock - ? WHERE uid = ?").bind(.integer(Int64(quantity)), .text(productUID)).run()
    }

    func updateProduct(_ update: ProductUpdate) throws(StorageError) {
        if let price = update.priceMinorUnits {
            try db.cached("UPDATE products SET price_minor = ? WHERE uid = ?").bind(.integer(price), .text(update.productUID)).run()
        }
        if let stock = update.stock {
            try db.cached("UPDATE products SET stock = ? WHERE uid = ?").bind(.integer(Int64(stock)), .text(update.productUID)).run()
        }
    }

    func bumpCatalogVersion(touching products: [String]) throws(StorageError) -> UInt64 {
        try db.cached("UPDATE meta SET value = value + 1 WHERE key = 'catalog_version'").run()
        let s = try db.cached("SELECT value FROM meta WHERE key = 'catalog_version'")
        _ = try s.step()
        let version = s.int(0)
        s.reset()
        let mark = try db.cached("UPDATE products SET changed_version = ? WHERE uid = ?")
        for uid in products { try mark.bind(.integer(version), .text(uid)).run() }
        return UInt64(version)
    }

    func insertOrder(_ d: Order, session: SessionKey) throws(StorageError) -> Order {
        try db.cached("""
            INSERT INTO orders(session, store_uid, city_code, total_minor, currency, card_brand, card_last4,
                               created_at, delivery_address, holder_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).bind(.text(session.hex), .text(d.storeUID), .text(d.cityCode), .integer(d.total.minorUnits),
                      .text(d.total.currency), .text(d.cardBrand), .text(d.cardLast4), .integer(d.createdAtUnix),
                      .text(d.deliveryAddress), .text(d.holderName)).run()
        let id = db.lastInsertRowID
        let line = try db.cached("INSERT INTO order_lines VALUES (?, ?, ?, ?, ?, ?, ?)")
        for (i, l) in d.lines.enumerated() {
            try line.bind(.integer(id), .integer(Int64(i)), .text(l.productUID), .text(l.name),
                          .integer(l.unitPrice.minorUnits), .integer(Int64(l.quantity)), .integer(l.lineTotal.minorUnits)).run()
        }
        var order = d
        order.number = Self.orderNumber(id)
        return order
    }

    static func orderNumber(_ id: Int64) -> String {
        let digits = String(id)
        return "G-" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }

    func orders(session: SessionKey) throws(StorageError) -> [Order] {
        let o = try db.cached("""
            SELECT id, store_uid, city_code, total_minor, currency, card_brand, card_last4, created_at,
                   delivery_address, holder_name FROM orders WHERE session = ? ORDER BY id DESC
            """).bind(.text(session.hex))
        var orders: [(Int64, Order)] = []
        while try o.step() {
            let currency = o.text(4)
            orders.append((o.int(0), Order(
                number: Self.orderNumber(o.int(0)), storeUID: o.text(1), cityCode: o.text(2), lines: [],
                total: Money(minorUnits: o.int(3), currency: currency), cardBrand: o.text(5), cardLast4: o.text(6),
                createdAtUnix: o.int(7), deliveryAddress: o.text(8), holderName: o.text(9))))
        }
        let l = try db.cached("""
            SELECT product_uid, name, unit_price_minor, quantity, line_total_minor FROM order_lines
            WHERE order_id = ? ORDER BY position
            """)
        for i in orders.indices {
            l.bind(.integer(orders[i].0))
            let currency = orders[i].1.total.currency
            while try l.step() {
                orders[i].1.lines.append(OrderLine(
                    productUID: l.text(0), name: l.text(1), unitPrice: Money(minorUnits: l.int(2), currency: currency),
                    quantity: UInt32(clamping: l.int(3)), lineTotal: Money(minorUnits: l.int(4), currency: currency)))
            }
        }
        return orders.map(\.1)
    }
}
