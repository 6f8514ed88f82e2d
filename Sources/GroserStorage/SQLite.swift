import CSQLite

// SQLite's C API as the stores use it: a connection, its prepared
// statements and the values bound to them; failures are StorageErrors.

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer; Swift cannot import it.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection. Not thread-safe by itself: its owner serialises use.
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?

    init(path: String) throws(StorageError) {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            handle = nil
            throw StorageError("cannot open the database \(path): \(message)")
        }
        // A catalog import's one transaction holds the write lock for
        // seconds at a million products (docs/BENCHMARKS.md, bench-scale):
        // cart commits wait for it rather than fail.
        sqlite3_busy_timeout(handle, 30_000)
    }

    deinit { sqlite3_close_v2(handle) }

    var lastError: String { String(cString: sqlite3_errmsg(handle)) }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Runs one or more statements that return no rows.
    func execute(_ sql: String) throws(StorageError) {
        var error: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(handle, sql, nil, nil, &error) != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? lastError
            sqlite3_free(error)
            throw StorageError("SQLite: \(message)")
        }
    }

    /// Throws a readable error when the database cannot be written (a
    /// read-only file or file system), so groserd refuses to start instead
    /// of answering every later write with an error.
    func checkWritable(_ path: String) throws(StorageError) {
        let why: String
        if sqlite3_db_readonly(handle, "main") == 1 {
            why = "SQLite opened it read-only"
        } else {
            do {
                try execute("BEGIN IMMEDIATE")
                try execute("ROLLBACK")
                return
            } catch {
                why = error.description
            }
        }
        throw StorageError("the database \(path) cannot be written (\(why)); groserd needs to write it: check its mode, owner and file system")
    }

    /// Makes `groser_session_key(token)` (a token's `SessionKey`) callable
    /// from SQL, for the migration that hashes stored tokens.
    func registerSessionKeyFunction() throws(StorageError) {
        let rc = sqlite3_create_function_v2(
            handle, "groser_session_key", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil,
            { context, count, values in
                guard count == 1, let value = values?[0], let text = sqlite3_value_text(value) else {
                    sqlite3_result_null(context)
                    return
                }
                let key = SessionKey(token: String(cString: text))
                sqlite3_result_text(context, key.hex, -1, transient)
            }, nil, nil, nil)
        guard rc == SQLITE_OK else { throw StorageError("SQLite cannot register groser_session_key: \(lastError)") }
    }

    /// Statements prepared once and kept for the connection's life: the
    /// cart path runs the same few statements for every request.
    private var cache: [String: SQLiteStatement] = [:]

    /// A prepared statement for `sql`, from the cache after its first use.
    func cached(_ sql: String) throws(StorageError) -> SQLiteStatement {
        if let stmt = cache[sql] { return stmt }
        let stmt = try prepare(sql)
        cache[sql] = stmt
        return stmt
    }

    /// Ends every cached statement's run, so none holds a read snapshot open.
    func resetCached() {
        for stmt in cache.values { stmt.reset() }
    }

    func prepare(_ sql: String) throws(StorageError) -> SQLiteStatement {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw StorageError("SQLite cannot prepare \(sql.prefix(40))…: \(lastError)")
        }
        return SQLiteStatement(stmt, connection: self)
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(_ body: () throws(StorageError) -> T) throws(StorageError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            resetCached()
            try execute("COMMIT")
            return result
        } catch {
            resetCached()
            try? execute("ROLLBACK")
            throw error
        }
    }
}

/// A prepared statement; finalized when released.
final class SQLiteStatement {
    private let stmt: OpaquePointer
    // Unowned: the connection keeps its cached statements alive.
    private unowned let connection: SQLiteConnection

    init(_ stmt: OpaquePointer, connection: SQLiteConnection) {
        self.stmt = stmt
        self.connection = connection
    }

    deinit { sqlite3_finalize(stmt) }

    /// Binds parameters 1...n in order and resets the statement for a new run.
    @discardableResult
    func bind(_ values: SQLiteValue...) -> SQLiteStatement {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            switch v {
            case .integer(let n): sqlite3_bind_int64(stmt, index, n)
            case .text(let s): sqlite3_bind_text(stmt, index, s, -1, transient)
            case .blob(let b):
                b.withUnsafeBytes { raw in
                    _ = sqlite3_bind_blob(stmt, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(raw.count), transient)
                }
            case .null: sqlite3_bind_null(stmt, index)
            }
        }
        return self
    }

    /// Ends the current run (bindings stay).
    func reset() { sqlite3_reset(stmt) }

    /// Steps once: true when a row is ready, false when done.
    func step() throws(StorageError) -> Bool {
        switch sqlite3_step(stmt) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw StorageError("SQLite: \(connection.lastError)")
        }
    }

    /// Runs a statement that returns no rows.
    func run() throws(StorageError) {
        sqlite3_reset(stmt)
        while try step() {}
    }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(stmt, column) }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(stmt, column))
        guard count > 0, let p = sqlite3_column_blob(stmt, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }

    func text(_ column: Int32) -> String {
        guard let p = sqlite3_column_text(stmt, column) else { return "" }
        return String(cString: p)
    }
}

/// A value bound to a statement parameter.
enum SQLiteValue {
    case integer(Int64)
    case text(String)
    case blob([UInt8])
    case null
}
