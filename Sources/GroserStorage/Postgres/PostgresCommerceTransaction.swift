import GroserWire

/// SetProduct's and checkout's operations on a PostgreSQL connection on
/// which a transaction is open. Other hosts write the same rows at once:
/// `product` locks the product's row until the transaction ends, so a
/// stock checked is still there at `decrementStock`, and `decrementStock`
/// refuses to take more than there is in any case.
public final class PostgresCommerceTransaction: CommerceTransaction {
    let c: PostgresConnection

    /// Over a connection on which the caller already issued BEGIN (and will
    /// COMMIT or ROLLBACK).
    public init(connection: PostgresConnection) {
        c = connection
    }

    private func execute(_ sql: String, _ parameters: [String?] = []) throws(StorageError) -> PostgresRows {
        try postgres { () throws(PostgresError) in try c.execute(sql, parameters) }
    }

    private func script(_ sql: String) throws(StorageError) {
        try postgres { () throws(PostgresError) in try c.executeScript(sql) }
    }

    public func savepoint() throws(StorageError) { try script("SAVEPOINT request") }
    public func rollbackToSavepoint() throws(StorageError) { try script("ROLLBACK TO SAVEPOINT request; RELEASE SAVEPOINT request") }
    public func releaseSavepoint() throws(StorageError) { try script("RELEASE SAVEPOINT request") }

    public func storeCityCode(_ storeUID: String) throws(StorageError) -> String? {
        try execute("SELECT c.code FROM stores s JOIN cities c ON c.uid = s.city_uid WHERE s.uid = $1", [storeUID])
            .rows.first?[0]
    }

    /// The product, its row locked (FOR UPDATE) until the transaction ends.
    public func product(_ uid: String) throws(StorageError) -> ProductRecord? {
        let rows = try execute("""
            SELECT p.uid, d.store_uid, p.name, p.price_minor, p.currency, p.stock FROM products p
            JOIN shelves h ON h.uid = p.shelf_uid JOIN departments d ON d.uid = h.department_uid
            WHERE p.uid = $1 FOR UPDATE OF p
            """, [uid])
        guard let r = rows.rows.first else { return nil }
        return ProductRecord(uid: r[0] ?? "", storeUID: r[1] ?? "", name: r[2] ?? "",
                             price: Money(minorUnits: Int64(r[3] ?? "") ?? 0, currency: r[4] ?? ""),
                             stock: UInt32(clamping: Int64(r[5] ?? "") ?? 0))
    }

    public func catalogProduct(_ uid: String) throws(StorageError) -> (Product, UInt32)? {
        let rows = try execute("SELECT \(PostgresCatalogStore.productColumns) FROM products p WHERE p.uid = $1", [uid])
        guard let r = rows.rows.first else { return nil }
        return (PostgresCatalogStore.product(r), PostgresCatalogStore.stock(r))
    }

    public func idempotentAnswer(session: SessionKey, key: String) throws(StorageError) -> IdempotentAnswer? {
        let rows = try execute("SELECT fingerprint, field, body FROM idempotency WHERE session = $1 AND key = $2",
                               [PostgresText.bytea(session), key])
        guard let r = rows.rows.first else { return nil }
        guard let body = PostgresText.bytes(fromBytea: r[2] ?? "") else {
            throw StorageError("PostgreSQL sent an idempotency answer's body in a format other than hex (bytea_output)")
        }
        return IdempotentAnswer(fingerprint: r[0] ?? "", field: UInt32(clamping: Int64(r[1] ?? "") ?? 0), body: body)
    }

    /// Throws when the key has an answer already (its primary key).
    public func saveIdempotentAnswer(session: SessionKey, key: String, _ answer: IdempotentAnswer) throws(StorageError) {
        _ = try execute("INSERT INTO idempotency(session, key, fingerprint, field, body) VALUES ($1, $2, $3, $4, $5)",
                        [PostgresText.bytea(session), key, answer.fingerprint, String(answer.field), PostgresText.bytea(answer.body)])
    }

    /// Takes `quantity` off the stock only if there is that much: another
    /// host may have sold it since this transaction looked without a lock.
    public func decrementStock(productUID: String, by quantity: UInt32) throws(StorageError) {
        let rows = try execute("UPDATE products SET stock = stock - $2 WHERE uid = $1 AND stock >= $2",
                               [productUID, String(quantity)])
        guard rows.affected == 1 else {
            throw StorageError("the stock of \(productUID) changed while the checkout ran; try again")
        }
    }

    public func updateProduct(_ update: ProductUpdate) throws(StorageError) {
        guard update.priceMinorUnits != nil || update.stock != nil else { return }
        _ = try execute("""
            UPDATE products SET price_minor = coalesce($2::bigint, price_minor), stock = coalesce($3::bigint, stock)
            WHERE uid = $1
            """, [update.productUID, update.priceMinorUnits.map { String($0) }, update.stock.map { String($0) }])
    }

    /// One statement: the new version, the products' marks, and a
    /// notification on `PostgresCatalogStore.notificationChannel` with the
    /// version, which PostgreSQL delivers when the transaction commits.
    public func bumpCatalogVersion(touching products: [String]) throws(StorageError) -> UInt64 {
        let rows = try execute("""
            WITH v AS (UPDATE meta SET value = value + 1 WHERE key = 'catalog_version' RETURNING value),
                 m AS (UPDATE products SET changed_version = (SELECT value FROM v) WHERE uid = ANY($1::text[]))
            SELECT value, pg_notify($2, value::text) FROM v
            """, [PostgresText.array(products), PostgresCatalogStore.notificationChannel])
        guard let v = rows.rows.first?[0].flatMap({ UInt64($0) }) else { throw StorageError("the database has no catalog version") }
        return v
    }

    /// One statement: the order and its lines (unnest), numbered from the
    /// orders' identity, so numbers are unique across hosts.
    public func insertOrder(_ d: Order, session: SessionKey) throws(StorageError) -> Order {
        let rows = try execute("""
            WITH o AS (
                INSERT INTO orders(session, store_uid, city_code, total_minor, currency, card_brand, card_last4,
                                   created_at, delivery_address, holder_name)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id),
            l AS (
                INSERT INTO order_lines(order_id, position, product_uid, name, unit_price_minor, quantity, line_total_minor)
                SELECT (SELECT id FROM o), u.n - 1, u.product_uid, u.name, u.unit_price, u.quantity, u.line_total
                FROM unnest($11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::bigint[])
                    WITH ORDINALITY AS u(product_uid, name, unit_price, quantity, line_total, n))
            SELECT id FROM o
            """, [
                PostgresText.bytea(session), d.storeUID, d.cityCode, String(d.total.minorUnits), d.total.currency,
                d.cardBrand, d.cardLast4, String(d.createdAtUnix), d.deliveryAddress, d.holderName,
                PostgresText.array(d.lines.map(\.productUID)), PostgresText.array(d.lines.map(\.name)),
                PostgresText.array(d.lines.map { $0.unitPrice.minorUnits }), PostgresText.array(d.lines.map { Int64($0.quantity) }),
                PostgresText.array(d.lines.map { $0.lineTotal.minorUnits }),
            ])
        guard let id = rows.rows.first?[0].flatMap({ Int64($0) }) else { throw StorageError("PostgreSQL gave the order no number") }
        var order = d
        order.number = SQLiteCommerceTransaction.orderNumber(id)
        return order
    }

    /// Newest first.
    public func orders(session: SessionKey) throws(StorageError) -> [Order] {
        let key = PostgresText.bytea(session)
        let results = try postgres { () throws(PostgresError) in
            try c.batch([
                PostgresStatement("""
                    SELECT id, store_uid, city_code, total_minor, currency, card_brand, card_last4, created_at,
                           delivery_address, holder_name FROM orders WHERE session = $1 ORDER BY id DESC
                    """, [key]),
                PostgresStatement("""
                    SELECT l.order_id, l.product_uid, l.name, l.unit_price_minor, l.quantity, l.line_total_minor
                    FROM order_lines l JOIN orders o ON o.id = l.order_id
                    WHERE o.session = $1 ORDER BY l.order_id, l.position
                    """, [key]),
            ])
        }
        var lines: [String: [[String?]]] = [:]
        for r in results[1].rows { lines[r[0] ?? "", default: []].append(r) }
        return results[0].rows.map { o in
            let int = { (s: String?) in Int64(s ?? "") ?? 0 }
            let currency = o[4] ?? ""
            return Order(
                number: SQLiteCommerceTransaction.orderNumber(int(o[0])), storeUID: o[1] ?? "", cityCode: o[2] ?? "",
                lines: (lines[o[0] ?? ""] ?? []).map { l in
                    OrderLine(productUID: l[1] ?? "", name: l[2] ?? "", unitPrice: Money(minorUnits: int(l[3]), currency: currency),
                              quantity: UInt32(clamping: int(l[4])), lineTotal: Money(minorUnits: int(l[5]), currency: currency))
                },
                total: Money(minorUnits: int(o[3]), currency: currency), cardBrand: o[5] ?? "", cardLast4: o[6] ?? "",
                createdAtUnix: int(o[7]), deliveryAddress: o[8] ?? "", holderName: o[9] ?? "")
        }
    }
}
