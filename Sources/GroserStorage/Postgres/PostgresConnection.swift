import CPostgres
import GroserSystem
#if canImport(Glibc)
import Glibc
#endif

/// What PostgreSQL refused, with its SQLSTATE ("23505" is a unique
/// violation, "40001" a serialization failure), or why the connection
/// failed (SQLSTATE empty).
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE, empty for a connection failure.
    public var sqlState: String
    /// libpq's message, on one line.
    public var message: String
    /// In a pipelined batch, the position of the statement that failed.
    public var statement: Int?

    public init(sqlState: String, message: String, statement: Int? = nil) {
        self.sqlState = sqlState
        self.message = message
        self.statement = statement
    }

    /// A unique constraint refused the row (an idempotency key used twice).
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// No answer can come on this connection: reconnect.
    public var isConnectionFailure: Bool { sqlState.isEmpty || sqlState.hasPrefix("08") || sqlState == "57P01" }

    public var description: String {
        (sqlState.isEmpty ? "" : "\(sqlState): ") + message + (statement.map { " (statement \($0 + 1) of the batch)" } ?? "")
    }
}

/// The rows of one statement, as text (libpq's text format), and how many
/// rows it changed.
public struct PostgresRows: Sendable {
    public var columns: [String]
    public var rows: [[String?]]
    /// For INSERT, UPDATE and DELETE: the rows changed.
    public var affected: Int

    /// The value of `column` in row `row`, nil for NULL.
    public subscript(row: Int, column: String) -> String? {
        guard let c = columns.firstIndex(of: column) else { return nil }
        return rows[row][c]
    }
}

/// One statement of a batch: SQL with $1, $2 … and their values as text
/// (nil for NULL).
public struct PostgresStatement: Sendable {
    public var sql: String
    public var parameters: [String?]

    public init(_ sql: String, _ parameters: [String?] = []) {
        self.sql = sql
        self.parameters = parameters
    }
}

/// One libpq connection. Not thread-safe by itself: its owner serialises
/// use, as with `SQLiteConnection`. Every statement is sent with
/// parameters apart from the SQL (PQexecParams), never spliced into it.
public final class PostgresConnection: @unchecked Sendable {
    // @unchecked: the PGconn is used by one thread at a time (the owner's
    // contract above) and freed once, in close or deinit.
    private var conn: OpaquePointer?

    /// Connects with a libpq conninfo ("host=/run/postgresql dbname=groser")
    /// or URI ("postgres://…"); the error says why not, with the password
    /// never in it.
    public init(_ conninfo: String) throws(PostgresError) {
        guard let c = PQconnectdb(conninfo) else { throw PostgresError(sqlState: "", message: "libpq could not allocate a connection") }
        guard PQstatus(c) == CONNECTION_OK else {
            let message = Self.oneLine(PQerrorMessage(c))
            PQfinish(c)
            throw PostgresError(sqlState: "", message: "cannot connect to PostgreSQL: \(message)")
        }
        // Notices ("relation … already exists, skipping") would go to
        // standard error, between groserd's log lines: they are dropped.
        _ = PQsetNoticeProcessor(c, { _, _ in }, nil)
        conn = c
    }

    deinit { close() }

    /// Closes the connection; later calls fail.
    public func close() {
        if let conn { PQfinish(conn) }
        conn = nil
    }

    /// The server's version as a number (150018 for 15.18).
    public var serverVersion: Int { conn.map { Int(PQserverVersion($0)) } ?? 0 }

    /// Runs one statement and returns its rows.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        let c = try live()
        let result = Self.withCStrings(parameters) { values in
            PQexecParams(c, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        return try Self.rows(of: result, c, statement: nil)
    }

    /// Runs `sql`, one or more statements without parameters (libpq's
    /// simple protocol: PQexec), for schema scripts and transaction control;
    /// statements after a failing one do not run.
    public func executeScript(_ sql: String) throws(PostgresError) {
        let c = try live()
        _ = try Self.rows(of: PQexec(c, sql), c, statement: nil)
    }

    /// The connection is lost: no statement can run on it (libpq's
    /// CONNECTION_BAD, known after a call failed).
    public var isBroken: Bool { conn.map { PQstatus($0) == CONNECTION_BAD } ?? true }

    /// A transaction is open (idle or failed) on the connection.
    public var isInTransaction: Bool {
        guard let conn else { return false }
        let s = PQtransactionStatus(conn)
        return s == PQTRANS_INTRANS || s == PQTRANS_INERROR
    }

    /// Starts receiving the notifications sent on `channel` (LISTEN).
    public func listen(_ channel: String) throws(PostgresError) {
        try executeScript("LISTEN " + Self.quotedIdentifier(channel))
    }

    /// The notifications that arrived (delivered at their sender's commit),
    /// waiting up to `timeoutMilliseconds` for the first when none has yet;
    /// empty when none came in time.
    public func notifications(timeoutMilliseconds: Int) throws(PostgresError) -> [(channel: String, payload: String)] {
        let c = try live()
        var out = try drainNotifications(c)
        guard out.isEmpty, timeoutMilliseconds > 0 else { return out }
        var fd = pollfd(fd: PQsocket(c), events: Int16(POLLIN), revents: 0)
        guard fd.fd >= 0 else { throw failure(c, "the connection has no socket") }
        let deadline = monotonicMilliseconds() + timeoutMilliseconds
        while out.isEmpty {
            let left = deadline - monotonicMilliseconds()
            if left <= 0 { break }
            let n = poll(&fd, 1, Int32(clamping: left))
            if n < 0 {
                if errno == EINTR { continue }
                throw PostgresError(sqlState: "", message: "poll on the connection failed: errno \(errno)")
            }
            if n == 0 { break }
            // Data that held no notification (a parameter status) does not
            // end the wait.
            out = try drainNotifications(c)
        }
        return out
    }

    private func drainNotifications(_ c: OpaquePointer) throws(PostgresError) -> [(channel: String, payload: String)] {
        guard PQconsumeInput(c) == 1 else { throw failure(c, "cannot read from the connection") }
        var out: [(channel: String, payload: String)] = []
        while let n = PQnotifies(c) {
            out.append((String(cString: n.pointee.relname), String(cString: n.pointee.extra)))
            PQfreemem(n)
        }
        return out
    }

    private func monotonicMilliseconds() -> Int { Int(monotonicNanoseconds() / 1_000_000) }

    /// `name` as an SQL identifier, quoted ("a""b").
    public static func quotedIdentifier(_ name: String) -> String {
        "\"" + name.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
    }

    /// Runs `statements` in one transaction and one round trip (libpq's
    /// pipeline mode, PostgreSQL 14+): every statement, then one sync. The
    /// statements up to a sync are one implicit transaction (no BEGIN or
    /// COMMIT: an explicit block would outlive a failure); when one fails,
    /// the server skips the rest and rolls the transaction back, so nothing
    /// of the batch is applied, and the error names the statement.
    public func batch(_ statements: [PostgresStatement]) throws(PostgresError) -> [PostgresRows] {
        let c = try live()
        guard PQenterPipelineMode(c) == 1 else { throw failure(c, "cannot enter pipeline mode") }
        defer {
            // Leaves pipeline mode; it refuses while results are unread.
            while PQexitPipelineMode(c) != 1, let extra = PQgetResult(c) { PQclear(extra) }
        }
        let all = statements
        for s in all {
            let sent = Self.withCStrings(s.parameters) { values in
                PQsendQueryParams(c, s.sql, Int32(s.parameters.count), nil, values, nil, nil, 0)
            }
            guard sent == 1 else { throw failure(c, "cannot send a statement") }
        }
        guard PQpipelineSync(c) == 1 else { throw failure(c, "cannot send the batch's sync") }
        var rows: [PostgresRows] = []
        var firstError: PostgresError?
        for index in all.indices {
            // Each statement's result, then the NULL that ends it.
            let result = PQgetResult(c)
            defer { while let extra = PQgetResult(c) { PQclear(extra) } }
            guard let result else { throw failure(c, "the batch ended early") }
            let status = PQresultStatus(result)
            if status == PGRES_PIPELINE_ABORTED {
                PQclear(result)
                continue
            }
            do {
                rows.append(try Self.rows(of: result, c, statement: index))
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        // The sync's own result.
        if let sync = PQgetResult(c) {
            let status = PQresultStatus(sync)
            PQclear(sync)
            guard status == PGRES_PIPELINE_SYNC else { throw failure(c, "the batch's sync did not come") }
        }
        if let firstError { throw firstError }
        return rows
    }

    private func live() throws(PostgresError) -> OpaquePointer {
        guard let conn else { throw PostgresError(sqlState: "", message: "the connection is closed") }
        return conn
    }

    private func failure(_ c: OpaquePointer, _ what: String) -> PostgresError {
        PostgresError(sqlState: "", message: "\(what): \(Self.oneLine(PQerrorMessage(c)))")
    }

    /// Reads `result` (and frees it): its rows, or its error.
    private static func rows(of result: OpaquePointer?, _ c: OpaquePointer, statement: Int?) throws(PostgresError) -> PostgresRows {
        guard let result else {
            throw PostgresError(sqlState: "", message: oneLine(PQerrorMessage(c)), statement: statement)
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            let n = Int(PQntuples(result)), f = Int(PQnfields(result))
            let columns = (0..<f).map { String(cString: PQfname(result, Int32($0))) }
            var rows: [[String?]] = []
            rows.reserveCapacity(n)
            for r in 0..<n {
                rows.append((0..<f).map { col in
                    PQgetisnull(result, Int32(r), Int32(col)) == 1 ? nil : String(cString: PQgetvalue(result, Int32(r), Int32(col)))
                })
            }
            let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
            return PostgresRows(columns: columns, rows: rows, affected: affected)
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
                ?? oneLine(PQresultErrorMessage(result))
            throw PostgresError(sqlState: state, message: message, statement: statement)
        }
    }

    /// Runs `body` with `strings` as C strings (NULL for nil) that live
    /// until it returns.
    private static func withCStrings<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let storage: [UnsafeMutablePointer<CChar>?] = strings.map { s in s.map { strdup($0) } }
        defer { for p in storage { free(p) } }
        return body(storage.map { $0.map { UnsafePointer($0) } })
    }

    private static func oneLine(_ p: UnsafePointer<CChar>?) -> String {
        guard let p else { return "" }
        return String(cString: p).split(whereSeparator: \.isNewline).map { $0.trimmingSpaces }.joined(separator: " ")
    }
}
