/// The tables SQLite's and PostgreSQL's stores both create, described once
/// and written in each one's SQL dialect: the catalog's meta, cities,
/// stores, departments and shelves, and checkout's remembered answers and
/// orders. Each store's migration step that creates them renders them
/// (SQLiteCatalogStore's and SQLiteCommerceStore's first steps,
/// PostgresSchema's first). Those steps have shipped: what is here is never
/// edited; a change is a new step in each store.
enum SharedSchema {
    /// The SQL each store speaks, in the column types it was created with.
    enum Dialect {
        case sqlite, postgres

        var text: String { self == .sqlite ? "TEXT" : "text" }
        /// Text the catalog orders by: byte order whatever the database's
        /// locale (SQLite's BINARY is already).
        var orderedText: String { self == .sqlite ? "TEXT" : "text COLLATE \"C\"" }
        var integer: String { self == .sqlite ? "INTEGER" : "bigint" }
        var bytes: String { self == .sqlite ? "BLOB" : "bytea" }
        /// A `SessionKey`: hex text in SQLite, its bytes in PostgreSQL.
        var sessionKey: String { self == .sqlite ? "TEXT" : "bytea" }
        /// A primary key the database numbers.
        var numberedKey: String { self == .sqlite ? "INTEGER PRIMARY KEY" : "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY" }
    }

    /// The catalog version and the catalog's skeleton above its products.
    static func catalog(_ d: Dialect) -> String {
        """
        CREATE TABLE meta(key \(d.text) PRIMARY KEY, value \(d.integer) NOT NULL);
        INSERT INTO meta VALUES ('catalog_version', 1);
        CREATE TABLE cities(
            uid \(d.text) PRIMARY KEY, code \(d.orderedText) NOT NULL UNIQUE, name \(d.text) NOT NULL,
            default_store_uid \(d.text) NOT NULL);
        CREATE TABLE stores(
            uid \(d.text) PRIMARY KEY, city_uid \(d.text) NOT NULL REFERENCES cities(uid),
            position \(d.integer) NOT NULL, name \(d.text) NOT NULL, chain \(d.text) NOT NULL, address \(d.text) NOT NULL);
        CREATE TABLE departments(
            uid \(d.text) PRIMARY KEY, store_uid \(d.text) NOT NULL REFERENCES stores(uid),
            position \(d.integer) NOT NULL, name \(d.text) NOT NULL);
        CREATE TABLE shelves(
            uid \(d.text) PRIMARY KEY, department_uid \(d.text) NOT NULL REFERENCES departments(uid),
            position \(d.integer) NOT NULL, name \(d.text) NOT NULL);

        """
    }

    /// Checkout's remembered answers, and the orders with their lines.
    static func checkout(_ d: Dialect) -> String {
        """
        CREATE TABLE idempotency(
            session \(d.sessionKey) NOT NULL, key \(d.text) NOT NULL, fingerprint \(d.text) NOT NULL, field \(d.integer) NOT NULL,
            body \(d.bytes) NOT NULL, PRIMARY KEY(session, key));
        CREATE TABLE orders(
            id \(d.numberedKey), session \(d.sessionKey) NOT NULL, store_uid \(d.text) NOT NULL, city_code \(d.text) NOT NULL,
            total_minor \(d.integer) NOT NULL, currency \(d.text) NOT NULL, card_brand \(d.text) NOT NULL,
            card_last4 \(d.text) NOT NULL, created_at \(d.integer) NOT NULL, delivery_address \(d.text) NOT NULL,
            holder_name \(d.text) NOT NULL);
        CREATE INDEX orders_by_session ON orders(session, id);
        CREATE TABLE order_lines(
            order_id \(d.integer) NOT NULL REFERENCES orders(id), position \(d.integer) NOT NULL,
            product_uid \(d.text) NOT NULL, name \(d.text) NOT NULL, unit_price_minor \(d.integer) NOT NULL,
            quantity \(d.integer) NOT NULL, line_total_minor \(d.integer) NOT NULL, PRIMARY KEY(order_id, position));

        """
    }
}
