/// The PostgreSQL store's tables: SQLite's catalog and orders
/// (SQLiteCatalogStore, SQLiteCommerceStore) in PostgreSQL's types, and
/// the checkout idempotency answers. Sessions are `SessionKey` bytes
/// (bytea); names and codes that the catalog orders by are `COLLATE "C"`,
/// byte order like SQLite's BINARY, whatever the database's locale.
public enum PostgresSchema {
    /// Current schema version: the number of `steps`.
    public static let version: Int = steps.count

    /// Step n (from 1) brings the schema from version n - 1 to n. Append a
    /// step to change the schema; never edit one that has shipped.
    static let steps: [String] = [
        SharedSchema.catalog(.postgres) + """
        CREATE TABLE products(
            uid text COLLATE "C" PRIMARY KEY, shelf_uid text NOT NULL REFERENCES shelves(uid),
            name text COLLATE "C" NOT NULL, brand text NOT NULL, unit text NOT NULL, unit_size bigint NOT NULL,
            price_minor bigint NOT NULL CHECK (price_minor >= 0), currency text NOT NULL,
            image_url text NOT NULL, stock bigint NOT NULL CHECK (stock >= 0),
            often_out_of_stock boolean NOT NULL,
            changed_version bigint NOT NULL DEFAULT 0, barcode text NOT NULL DEFAULT '');
        CREATE INDEX products_by_shelf ON products(shelf_uid, name);
        CREATE INDEX products_by_change ON products(changed_version);
        CREATE INDEX stores_by_position ON stores(position);
        CREATE INDEX departments_by_store ON departments(store_uid, position);
        CREATE INDEX shelves_by_department ON shelves(department_uid, position);
        """ + SharedSchema.checkout(.postgres),
        // Sessions, carts and remembered answers, shared by every groserd
        // on the database (the customer log's records, per session).
        PostgresCustomerStore.schema,
        // The secret of session tokens not yet stored (groserd's SessionTokens).
        PostgresCustomerStore.secretsSchema,
    ]

    /// The advisory lock under which groserd migrates and seeds: the same
    /// key on every host ("groser" in ASCII).
    static let lockKey = "113723233330546"

    /// Brings the database to `version`, one step per transaction, holding
    /// the advisory lock so several groserd starting at once migrate once;
    /// versions applied are rows of `groser_schema(version int)`. Refuses a
    /// database that a newer groserd migrated further.
    public static func migrate(_ c: PostgresConnection) throws(StorageError) {
        try withMigrationLock(c) { () throws(StorageError) in try migrateLocked(c) }
    }

    /// Runs `body` holding the session advisory lock (re-entrant in one
    /// session; released when the connection ends, whatever happens).
    static func withMigrationLock<T>(_ c: PostgresConnection, _ body: () throws(StorageError) -> T) throws(StorageError) -> T {
        try postgres { () throws(PostgresError) in try c.execute("SELECT pg_advisory_lock($1)", [lockKey]) }
        do {
            let result = try body()
            try postgres { () throws(PostgresError) in try c.execute("SELECT pg_advisory_unlock($1)", [lockKey]) }
            return result
        } catch {
            if !c.isBroken {
                if c.isInTransaction { try? c.executeScript("ROLLBACK") }
                _ = try? c.execute("SELECT pg_advisory_unlock($1)", [lockKey])
            }
            throw error
        }
    }

    private static func migrateLocked(_ c: PostgresConnection) throws(StorageError) {
        var current = try postgres { () throws(PostgresError) -> Int in
            try c.executeScript("CREATE TABLE IF NOT EXISTS groser_schema(version int NOT NULL)")
            return Int(try c.execute("SELECT coalesce(max(version), 0) AS v FROM groser_schema")[0, "v"] ?? "0") ?? 0
        }
        guard current <= version else {
            throw StorageError("the PostgreSQL database has schema version \(current), newer than this groserd's \(version)")
        }
        while current < version {
            let next = current + 1
            try postgres { () throws(PostgresError) in
                try c.executeScript("BEGIN")
                do throws(PostgresError) {
                    try c.executeScript(steps[next - 1])
                    try c.execute("INSERT INTO groser_schema VALUES ($1)", [String(next)])
                    try c.executeScript("COMMIT")
                } catch {
                    if !c.isBroken { try? c.executeScript("ROLLBACK") }
                    throw error
                }
            }
            current = next
        }
    }
}

/// Runs `body`, turning PostgreSQL's errors into storage errors: a lost or
/// refused connection into one that says PostgreSQL is unavailable.
@discardableResult
func postgres<T>(_ body: () throws(PostgresError) -> T) throws(StorageError) -> T {
    do { return try body() } catch { throw StorageError(error) }
}

extension StorageError {
    /// PostgreSQL's error as a storage error; a connection failure is
    /// of kind `.unavailable`, and says so first.
    init(_ error: PostgresError) {
        if error.isConnectionFailure {
            self.init("PostgreSQL is unavailable: \(error.message)", kind: .unavailable)
        } else {
            self.init("PostgreSQL: \(error)")
        }
    }
}

/// Values in PostgreSQL's text formats, for parameters sent as text.
enum PostgresText {
    /// A text[] literal: every element quoted, `"` and `\` escaped, so any
    /// string (empty, with commas, braces or "NULL") is itself.
    static func array<S: Sequence>(_ values: S) -> String where S.Element == String {
        var out = "{"
        var first = true
        for v in values {
            if !first { out += "," }
            first = false
            out += "\""
            for ch in v.unicodeScalars {
                if ch == "\"" || ch == "\\" { out.unicodeScalars.append("\\") }
                out.unicodeScalars.append(ch)
            }
            out += "\""
        }
        return out + "}"
    }

    /// A bigint[] literal.
    static func array<S: Sequence>(_ values: S) -> String where S.Element == Int64 {
        "{" + values.map(String.init).joined(separator: ",") + "}"
    }

    /// A bytea value in hex format (`\x0aff`).
    static func bytea(_ bytes: [UInt8]) -> String { "\\x" + hexDigits(bytes) }

    /// A session key as its bytea.
    static func bytea(_ session: SessionKey) -> String { "\\x" + session.hex }

    /// Bytes from a bytea in hex format, as PostgreSQL (9.0 on, with the
    /// default bytea_output) sends it; nil for another format.
    static func bytes(fromBytea text: String) -> [UInt8]? {
        let utf8 = text.utf8[...]
        guard utf8.starts(with: "\\x".utf8) else { return nil }
        return Hex.decode(utf8.dropFirst(2))
    }
}
